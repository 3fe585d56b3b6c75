import { z } from "@hono/zod-openapi";
import { sql, type SQL } from "drizzle-orm";
import { statement, type AccountDb } from "../../db/client";
import { events } from "../../db/schema";
import { newId } from "../../lib/ids";

/**
 * Every event type of the spec (Events) that webhooks can subscribe to. Campaign mail emits `bounced`, `delivered`,
 * `complained` and `campaign.completed`, API and SMTP mail the `relay.*` types; delivery feedback (DSNs, ARF reports,
 * Cloudflare Email Sending events, SES notifications: docs/deliverability.md) emits the delivered/bounced/complained
 * ones after the hand-off. Tracked messages emit `opened` and `clicked` (docs/tracking.md); a run of an automation
 * emits `automation.completed`; a domain's warm-up emits `warmup.status_changed`. Mail received on a receiving domain
 * emits `email.received`, and `replied` on the timeline of the sent message it answers (docs/inbound.md).
 */
export const eventTypes = [
  "delivered",
  "bounced",
  "opened",
  "clicked",
  "complained",
  "unsubscribed",
  "verification.completed",
  "campaign.completed",
  "warmup.status_changed",
  "automation.completed",
  "relay.sent",
  "relay.failed",
  "relay.suppressed",
  "relay.cancelled",
  "relay.delivered",
  "relay.bounced",
  "relay.complained",
  "email.received",
  "replied",
] as const;
export type EventType = (typeof eventTypes)[number];

export type EventInput = {
  accountId: string;
  type: EventType;
  /** The object the event is about (msg_…, vjob_…), for timelines. */
  subjectId?: string;
  /**
   * Names the fact, e.g. `relay.sent:msg_…` or `relay.bounced:msg_…:user@example.com`. A producer that runs again
   * for the same fact (a retried queue message) writes the same key, and the unique index keeps the first event.
   */
  dedupeKey: string;
  data: Record<string, unknown>;
};

/**
 * The one way events are written: an INSERT that is a no-op when the fact is already recorded, so it can join the
 * producer's own D1 batch (one transaction with the state change it reports). After the batch commits, call
 * `dispatchEvents` (webhooks) with the same account and dedupe keys. With `when`, the event is written only if that
 * SQL condition holds at its point of the batch (the state change it reports did happen).
 */
export function eventStatement(db: AccountDb, event: EventInput, when?: SQL): D1PreparedStatement {
  const row = {
    id: newId("evt"),
    accountId: event.accountId,
    type: event.type,
    subjectId: event.subjectId ?? null,
    dedupeKey: event.dedupeKey,
    data: event.data,
  };
  if (when === undefined)
    return statement(
      db,
      db
        .insert(events)
        .values(row)
        .onConflictDoNothing({ target: [events.accountId, events.dedupeKey] }),
    );
  return statement(
    db,
    sql`INSERT INTO ${events} (id, account_id, type, subject_id, dedupe_key, data)
      SELECT ${row.id}, ${row.accountId}, ${row.type}, ${row.subjectId}, ${row.dedupeKey}, ${JSON.stringify(row.data)} WHERE ${when}
      ON CONFLICT (account_id, dedupe_key) DO NOTHING`,
  );
}

// ---------------------------------------------------------------------------------------------------------------
// The `data` object of each event type. The spec leaves these open; they are fixed here once so producers, the
// webhook test sender, the OpenAPI document and the README all describe the same shapes. Objects are loose: a
// producer may add fields, receivers must ignore fields they do not know.

// Fields every event about a message carries (what the sending pipeline writes), then the recipient for per-recipient
// events. Test-mode messages (sk_test_ keys) add `test: true`.
const messageEventFields = {
  message_id: z.string().openapi({ example: "msg_4Qm0c2JYd7pG1rXw8LkN3e" }),
  from: z.string().optional().openapi({ example: "Acme <hello@acme.example.com>" }),
  subject: z.string().optional(),
  source: z
    .enum(["api", "smtp", "campaign"])
    .optional()
    .openapi({ description: "How the message was submitted: POST /send, the SMTP relay, or a campaign" }),
  stream: z
    .enum(["transactional", "broadcast"])
    .optional()
    .openapi({ description: "The message's stream: transactional (receipts, resets) or broadcast (campaigns, newsletters)" }),
  campaign_id: z.string().nullable().optional().openapi({ description: "The campaign of a campaign message (absent for API and SMTP messages)" }),
  tags: z.array(z.string()).optional().openapi({ description: "The message's tags" }),
  metadata: z.record(z.string(), z.string()).optional().openapi({ description: "The message's metadata, as sent" }),
  test: z.boolean().optional().openapi({ description: "true for messages of test-mode keys: nothing was really sent" }),
};
const recipientEventFields = {
  ...messageEventFields,
  recipient: z.string().openapi({ description: "The recipient this event is about", example: "jane@example.com" }),
  feedback_source: z
    .enum(["dsn", "arf", "cloudflare", "ses"])
    .optional()
    .openapi({ description: "For outcomes learnt after the hand-off: the report that told us (absent when the provider's SMTP reply did)" }),
};
const smtpResponse = z.string().nullable().optional().openapi({ description: "The receiving server's SMTP reply" });
const bounceFields = {
  bounce_type: z.enum(["hard", "soft", "blocked"]).openapi({
    description:
      "hard: the address does not exist (suppressed); blocked: refused by policy (5.7.x); soft: a temporary failure the provider gave up on (refunded, not suppressed)",
  }),
  smtp_code: z.number().int().nullable().optional(),
  enhanced_code: z.string().nullable().optional().openapi({ example: "5.1.1" }),
  smtp_response: smtpResponse,
};
// One tracking link serves every recipient of a multi-recipient message (they get the same bytes), so it cannot
// tell who opened or clicked: `recipient` is null there and the event is the message's.
const trackingFields = {
  ...messageEventFields,
  recipient: z.string().nullable().openapi({
    description: "The recipient who opened or clicked; null for a message sent to several recipients at once",
    example: "jane@example.com",
  }),
  user_agent: z.string().nullable().optional().openapi({ description: "The User-Agent of the request" }),
  ip: z.string().nullable().optional().openapi({ description: "The client address as Cloudflare saw it (CF-Connecting-IP)" }),
};

export const eventDataSchemas = {
  delivered: z.looseObject({ ...recipientEventFields, smtp_response: smtpResponse }).openapi("DeliveredEventData", {
    description: "A campaign message reached the receiving server, as the provider reported (Cloudflare Email Sending, SES)",
  }),
  bounced: z.looseObject({ ...recipientEventFields, ...bounceFields }).openapi("BouncedEventData", {
    description: "A campaign message bounced, at the hand-off or later (a DSN, a provider event); its credit was given back",
  }),
  opened: z.looseObject(trackingFields).openapi("OpenedEventData", {
    description: "A person's first open of a message with track_opens (per recipient); later opens and machine opens are counted, not emitted",
  }),
  clicked: z
    .looseObject({ ...trackingFields, url: z.string().openapi({ description: "The link as it was in the message" }) })
    .openapi("ClickedEventData", {
      description: "A person's first click of a tracked link (per recipient and link); later clicks are counted, not emitted",
    }),
  complained: z.looseObject({ ...recipientEventFields, feedback_type: z.string().nullable().optional() }).openapi("ComplainedEventData", {
    description: "A recipient of a campaign message reported it as spam (ARF feedback loop, provider event); the address is suppressed",
  }),
  unsubscribed: z
    .looseObject({
      email: z.string(),
      message_id: z.string().nullable().optional(),
      campaign_id: z.string().nullable().optional(),
      topic_id: z
        .string()
        .nullable()
        .optional()
        .openapi({ description: "The topic left (GET /topics/{id}); null when the recipient left all marketing mail" }),
      method: z.enum(["link", "one_click", "preferences", "api", "reply"]).optional().openapi({
        description:
          "How the recipient unsubscribed: one_click (the List-Unsubscribe link or the page's button), preferences (the link's preference page); link, api and reply are reserved",
      }),
    })
    .openapi("UnsubscribedEventData"),
  "verification.completed": z
    .looseObject({
      verification_id: z.string().openapi({ description: "The bulk job id (vjob_…), or an id of the single check" }),
      kind: z.enum(["single", "bulk"]),
      total: z.number().int(),
      counts: z.record(z.string(), z.number().int()).openapi({ description: "Addresses per result: valid, invalid, risky, unknown" }),
      email: z.string().optional().openapi({ description: "Single checks only" }),
      result: z.enum(["valid", "invalid", "risky", "unknown"]).optional().openapi({ description: "Single checks only" }),
    })
    .openapi("VerificationCompletedEventData"),
  "campaign.completed": z
    .looseObject({
      campaign_id: z.string(),
      name: z.string().optional(),
      outcome: z
        .enum(["delivered", "partially_delivered", "undelivered"])
        .optional()
        .openapi({ description: "The campaign's outcome (GET /campaigns/{id}): undelivered when no recipient was accepted" }),
      recipients: z.number().int(),
      sent: z.number().int(),
      delivered: z.number().int().optional(),
      hard_bounces: z.number().int().optional(),
      soft_bounces: z.number().int().optional(),
      failed: z.number().int(),
      suppressed: z.number().int(),
      cancelled: z.number().int().optional(),
      unknown: z.number().int().optional(),
      skipped: z
        .object({ invalid: z.number().int(), risky: z.number().int(), unknown: z.number().int() })
        .optional()
        .openapi({ description: "Audience contacts the campaign's verification left out, by result (not in recipients)" }),
    })
    .openapi("CampaignCompletedEventData", {
      description:
        "Every recipient of a sent campaign reached a final state; the counters (and outcome) are those of GET /campaigns/{id} at that moment, " +
        "which are its report's totals",
    }),
  "warmup.status_changed": z
    .looseObject({
      domain_id: z.string(),
      domain: z.string().openapi({ example: "example.com" }),
      previous_status: z.enum(["off", "active", "paused", "completed"]),
      status: z.enum(["off", "active", "paused", "completed"]),
      reason: z.string().optional().openapi({ description: "Why it paused, when a bounce or complaint rate paused it" }),
    })
    .openapi("WarmupStatusChangedEventData", {
      description:
        "A sending domain's warm-up started, was paused (by the account, or by a bounce/complaint rate over the limit), resumed or completed",
    }),
  "automation.completed": z
    .looseObject({
      automation_id: z.string(),
      run_id: z.string(),
      email: z.string(),
      contact_id: z.string().nullable().optional(),
      status: z.enum(["completed", "failed", "cancelled"]).optional().openapi({ description: "How the run ended" }),
      event_id: z.string().optional().openapi({ description: "The trigger's event id (the run id when none was given)" }),
      error: z.string().optional().openapi({ description: "Why a failed run failed" }),
    })
    .openapi("AutomationCompletedEventData", { description: "A run of an automation ended: completed, failed or cancelled." }),
  "relay.sent": z
    .looseObject({
      ...messageEventFields,
      recipients: z.array(z.string()).openapi({ description: "Recipients the provider accepted" }),
      smtp_response: smtpResponse,
    })
    .openapi("RelaySentEventData"),
  "relay.failed": z
    .looseObject({
      ...messageEventFields,
      recipients: z.array(z.string()).openapi({ description: "Recipients that could not be delivered (credits refunded)" }),
      attempts: z.number().int().optional(),
      smtp_response: smtpResponse,
    })
    .openapi("RelayFailedEventData"),
  "relay.suppressed": z
    .looseObject({ ...recipientEventFields, reason: z.enum(["bounce", "complaint", "unsubscribe", "manual"]) })
    .openapi("RelaySuppressedEventData"),
  "relay.cancelled": z
    .looseObject({
      ...messageEventFields,
      recipients: z.array(z.string()).openapi({ description: "Recipients that were waiting and will not be sent to" }),
      credits_refunded: z.number().int().openapi({ description: "Credits given back (one per charged recipient; 0 in test mode)" }),
      scheduled_at: z
        .string()
        .nullable()
        .optional()
        .openapi({ description: "The time it was scheduled for (null if it was queued to send at once)" }),
    })
    .openapi("RelayCancelledEventData", {
      description: "A scheduled or still queued message was cancelled (POST /messages/{id}/cancel) before it left; its credits were given back",
    }),
  "relay.delivered": z.looseObject({ ...recipientEventFields, smtp_response: smtpResponse }).openapi("RelayDeliveredEventData", {
    description: "The provider reported the message delivered to this recipient (Cloudflare Email Sending, SES; test mode simulates it)",
  }),
  "relay.bounced": z.looseObject({ ...recipientEventFields, ...bounceFields }).openapi("RelayBouncedEventData"),
  "relay.complained": z
    .looseObject({ ...recipientEventFields, feedback_type: z.string().nullable().optional() })
    .openapi("RelayComplainedEventData", {
      description: "The recipient reported the message as spam (ARF feedback loop, provider event); the address is suppressed",
    }),
  "email.received": z
    .looseObject({
      inbound_id: z.string().openapi({ example: "inb_4Qm0c2JYd7pG1rXw8LkN3e", description: "GET /inbound/{id} reads the whole message" }),
      domain_id: z.string(),
      envelope_from: z.string().openapi({ description: "MAIL FROM as Email Routing received it (empty for bounces)" }),
      envelope_to: z.string().openapi({ description: "RCPT TO: the receiving address" }),
      from: z.string().nullable().openapi({ description: "The From header, decoded", example: "Jane Doe <jane@example.org>" }),
      to: z.array(z.string()),
      cc: z.array(z.string()),
      subject: z.string().nullable(),
      date: z.string().nullable().openapi({ description: "The Date header as an ISO timestamp, null when absent or unreadable" }),
      message_id: z.string().nullable().openapi({ description: "The Message-ID header" }),
      in_reply_to: z.string().nullable(),
      references: z.array(z.string()),
      text_excerpt: z.string().openapi({ description: "The first 1,000 characters of the text body (or of the HTML's text)" }),
      attachments: z.array(
        z.object({
          index: z.number().int().openapi({ description: "`n` of GET /inbound/{id}/attachments/{n}" }),
          filename: z.string().nullable(),
          content_type: z.string(),
          size: z.number().int(),
          content_id: z.string().nullable(),
          download_url: z.string().openapi({ description: "A signed link that needs no key, valid until download_expires_at" }),
          download_expires_at: z.string(),
        }),
      ),
      size: z.number().int().openapi({ description: "The raw message's size in bytes" }),
      authentication: z.object({ spf: z.string().nullable(), dkim: z.string().nullable(), dmarc: z.string().nullable() }).openapi({
        description: "What Email Routing's checks said (pass, fail, none, …), as it wrote them; null when it said nothing",
      }),
      auto_submitted: z
        .string()
        .nullable()
        .openapi({ description: "The Auto-Submitted header (auto-replied, auto-generated), null for a person's mail" }),
      in_reply_to_message_id: z.string().nullable().openapi({ description: "The message we sent that this mail replies to" }),
      campaign_id: z.string().nullable().openapi({ description: "That message's campaign" }),
    })
    .openapi("EmailReceivedEventData", {
      description: "Mail arrived on a receiving domain and was stored. The raw bytes are not in the event: GET /inbound/{id}/raw",
    }),
  replied: z
    .looseObject({
      message_id: z.string().openapi({ description: "The message we sent that was answered" }),
      campaign_id: z.string().nullable().optional(),
      inbound_id: z.string().openapi({ description: "The reply, as stored (GET /inbound/{id})" }),
      from: z.string().nullable().optional().openapi({
        description: "Who replied (the reply's From header). Only for keys with the `inbound` scope, and endpoints subscribed to email.received",
      }),
      subject: z.string().nullable().optional().openapi({ description: "The reply's subject; shown to the same readers as `from`" }),
    })
    .openapi("RepliedEventData", {
      description: "Someone answered a message we sent: a received mail's In-Reply-To or References named its Message-ID. Auto-replies do not count",
    }),
} satisfies Record<EventType, z.ZodType<Record<string, unknown>>>;

export type EventData<T extends EventType> = z.infer<(typeof eventDataSchemas)[T]>;
