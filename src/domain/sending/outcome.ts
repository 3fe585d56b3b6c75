// What one delivery attempt did to a message, as D1 statements (recipient and message states, refunds,
// suppressions, events) and the events to dispatch once they are written. Every statement is idempotent (absolute
// values, guarded refunds, de-duplicated events), so recording the same outcome twice changes nothing.

import { sql, type SQL } from "drizzle-orm";
import { config } from "../../config";
import { sqlNow, statement, type Ctx } from "../../db/client";
import type { messages } from "../../db/schema";
import { chargeFromReservationStatements, refundStatements, releaseStatements } from "../credits/ledger";
import { recipientReference } from "../campaigns/fanout";
import { eventStatement, type EventInput } from "../events/events";
import { providerOfDomain, recipientDomain } from "../reports/providers";
import { recipientProviderStatements, recipientRollupStatements, sendingDomain, type Provider, type RollupCounts } from "../reports/rollups";
import { suppressionStatements } from "../suppressions/suppressions";
import type { RecipientOutcome, SendOutcome } from "../transport/types";
import { displayFrom } from "./mime";

export type MessageRow = typeof messages.$inferSelect;

/** What happened to one message: the D1 statements recording it, its events, and when to retry it (if at all). */
export type Disposition = { statements: D1PreparedStatement[]; events: EventInput[]; retryDelaySeconds?: number };

/**
 * A message's status as its recipients' statuses say it (suppressed and cancelled ones aside): still to send, then
 * handed over, delivered, unknown, bounced, else failed. Every write that moves recipients sets it with this.
 */
export function statusOfRecipients(messageId: string): SQL {
  return sql`(SELECT CASE
      WHEN SUM(status IN ('queued', 'deferred')) > 0 THEN 'deferred'
      WHEN SUM(status = 'sent') > 0 THEN 'sent'
      WHEN SUM(status IN ('delivered', 'complained')) > 0 THEN 'delivered'
      WHEN SUM(status = 'unknown') > 0 THEN 'unknown'
      WHEN SUM(status = 'bounced') > 0 THEN 'bounced'
      ELSE 'failed' END
    FROM message_recipients WHERE message_id = ${messageId} AND status NOT IN ('suppressed', 'cancelled'))`;
}

/** The fields every event about a message carries (delivery, feedback, tracking), then the event's own. */
export function eventData(
  message: Pick<MessageRow, "id" | "fromName" | "fromAddress" | "subject" | "source" | "stream" | "tags" | "metadata" | "campaignId">,
  extra: Record<string, unknown>,
) {
  return {
    message_id: message.id,
    from: displayFrom(message.fromName, message.fromAddress),
    subject: message.subject,
    source: message.source,
    stream: message.stream,
    tags: message.tags,
    metadata: message.metadata,
    ...(message.campaignId ? { campaign_id: message.campaignId } : {}),
    ...extra,
  };
}

/** 5.7.x is policy (content filter, reputation, authentication): the address may well exist. */
export function bounceType(rejection: { enhanced?: string }): "hard" | "blocked" {
  return rejection.enhanced?.startsWith("5.7.") ? "blocked" : "hard";
}

/** Mailbox providers by recipient domain (resolved once per delivery batch); a domain not in it is told by its name. */
export type ProvidersByDomain = ReadonlyMap<string, Provider>;

/**
 * The report rollups of a message's recipients: their providers are stored first (once), and `count` returns the
 * rollup statement to place BEFORE the update that moves the counted recipients out of `statuses`. Test mode
 * (sk_test_) mail is never counted.
 */
function messageRollups(ctx: Ctx, message: MessageRow, recipients: string[], providers: ProvidersByDomain | undefined) {
  const { db } = ctx;
  const counted = !message.testMode;
  const key = { accountId: message.accountId, domain: sendingDomain(message.fromAddress), campaignId: message.campaignId, stream: message.stream };
  const byEmail = new Map(
    recipients.map((email) => {
      const domain = recipientDomain(email);
      return [email, providers?.get(domain) ?? providerOfDomain(domain) ?? "other"] as const;
    }),
  );
  return {
    providerStatements: counted ? recipientProviderStatements(db, message.id, byEmail) : [],
    count: (emails: string[], statuses: readonly string[], counts: RollupCounts) =>
      counted ? recipientRollupStatements(db, key, counts, { messageId: message.id, emails, statuses }) : [],
  };
}

const pendingStatuses = ["queued", "deferred", "unknown"] as const;

// What each recipient transition adds to the rollups, and from which statuses it counts. Every final transport
// outcome is also one `sent` (the denominator of the delivery and bounce rates).
const transitionRollups = {
  sent: { from: pendingStatuses, counts: { sent: 1, delivered: 1 } },
  bounced: { from: pendingStatuses, counts: { sent: 1, hard_bounces: 1 } },
  failed: { from: pendingStatuses, counts: { sent: 1, failed: 1 } },
  // A soft bounce is counted on a recipient's first deferral, not on each retry.
  deferred: { from: ["queued"], counts: { soft_bounces: 1 } },
} satisfies Record<string, { from: readonly string[]; counts: RollupCounts }>;

/** Turns the SMTP outcome for the pending recipients into state changes, refunds, suppressions and events. */
export function recordOutcome(
  ctx: Ctx,
  message: MessageRow,
  pending: string[],
  outcome: SendOutcome,
  final = false,
  providers?: ProvidersByDomain,
): Disposition {
  const { env, db } = ctx;
  const attempt = message.attempts + 1;
  // Recipients the server did not answer for individually share the outcome of the whole transaction. A failed
  // transaction delivered to nobody, whatever RCPT said.
  const individual = new Map((outcome.perRecipient ?? []).filter((result) => outcome.ok || !result.ok).map((result) => [result.recipient, result]));
  const perRecipient: RecipientOutcome[] = pending.map(
    (recipient) =>
      individual.get(recipient) ??
      (outcome.ok
        ? { recipient, ok: true, code: outcome.code, response: outcome.response }
        : {
            recipient,
            ok: false,
            kind: outcome.kind,
            stage: outcome.stage,
            code: outcome.code,
            enhanced: outcome.enhanced,
            response: outcome.response,
          }),
  );
  const accepted = perRecipient.filter((r) => r.ok).map((r) => r.recipient);
  const rejected = perRecipient.filter((r): r is Extract<RecipientOutcome, { ok: false }> => !r.ok);
  const { retryBaseSeconds: baseSeconds, maxAttempts } = config(env).send;
  const canRetry = !final && attempt < maxAttempts;
  const bounced = rejected.filter((r) => r.kind === "permanent");
  // A temporary refusal becomes final once the attempts are used up.
  const deferred = canRetry ? rejected.filter((r) => r.kind === "temporary") : [];
  const failed = canRetry ? [] : rejected.filter((r) => r.kind === "temporary");

  const rollups = messageRollups(ctx, message, pending, providers);
  const statements: D1PreparedStatement[] = [...rollups.providerStatements];
  const events: EventInput[] = [];
  // A provider that names each recipient's copy (Cloudflare Email Sending) confirms delivery later, by an event: its
  // hand-off is counted as sent only, and as delivered when the event comes.
  const asyncDelivery = perRecipient.some((result) => result.ok && result.providerMessageId !== undefined);
  const setRecipients = (emails: string[], status: keyof typeof transitionRollups, response: string) => {
    if (emails.length === 0) return;
    const { from, counts } = status === "sent" && asyncDelivery ? { from: pendingStatuses, counts: { sent: 1 } } : transitionRollups[status];
    statements.push(...rollups.count(emails, from, counts));
    statements.push(
      statement(
        db,
        sql`UPDATE message_recipients SET status = ${status}, smtp_response = ${response}, updated_at = ${sqlNow}
         WHERE message_id = ${message.id} AND email IN (SELECT value FROM json_each(${JSON.stringify(emails)})) AND status IN ('queued', 'deferred', 'unknown')`,
      ),
    );
  };
  // A campaign message (one recipient) was not charged when it was accepted: its campaign reserved a credit for it,
  // which its outcome turns into a charge (sent) or gives back (bounced, failed). Campaign mail emits the spec's
  // per-recipient events (`bounced`), not the relay.* events of API and SMTP messages.
  const campaignId = message.source === "campaign" ? message.campaignId : null;
  // An outcome written after the cron marked the claim `unknown` and the campaign was settled: the settlement released
  // this recipient's credit with the rest, so charging or releasing it now would take from another campaign's hold.
  const unsettled = sql`EXISTS (SELECT 1 FROM campaigns WHERE id = ${campaignId} AND completed_at IS NULL)`;
  const refund = (email: string, why: string) => {
    if (message.testMode) return;
    if (campaignId) {
      statements.push(
        ...releaseStatements(
          db,
          { accountId: message.accountId, amount: 1, referenceId: recipientReference(campaignId, message.id), note: why },
          unsettled,
        ),
      );
      return;
    }
    statements.push(
      ...refundStatements(db, { accountId: message.accountId, balance: "send", amount: 1, referenceId: `${message.id}:${email}`, note: why }),
    );
  };

  if (accepted.length > 0) {
    const response = perRecipient.find((r) => r.ok)?.response ?? outcome.response;
    setRecipients(accepted, "sent", response);
    for (const result of perRecipient) {
      if (!result.ok || !result.providerMessageId) continue;
      statements.push(
        statement(
          db,
          sql`UPDATE message_recipients SET provider_message_id = ${result.providerMessageId} WHERE message_id = ${message.id} AND email = ${result.recipient}`,
        ),
      );
    }
    if (campaignId) {
      statements.push(
        ...chargeFromReservationStatements(
          db,
          {
            accountId: message.accountId,
            amount: accepted.length,
            referenceId: recipientReference(campaignId, message.id),
            note: "campaign recipient sent",
          },
          unsettled,
        ),
      );
    } else {
      events.push({
        accountId: message.accountId,
        type: "relay.sent",
        subjectId: message.id,
        dedupeKey: `relay.sent:${message.id}:${attempt}`,
        data: eventData(message, { recipients: accepted, smtp_response: response }),
      });
    }
  }
  for (const rejection of bounced) {
    setRecipients([rejection.recipient], "bounced", rejection.response);
    refund(rejection.recipient, "permanent failure");
    // 5.1.x: the mailbox or domain does not exist; sending there again would only hurt the sender's reputation.
    // Only when the refusal is about this recipient: its own RCPT reply, or a transaction it was alone in (a 5.1.x
    // to MAIL FROM is about the sender).
    const stage = rejection.stage ?? "rcpt";
    const aboutRecipient = stage === "rcpt" || ((stage === "data" || stage === "message") && pending.length === 1);
    if (aboutRecipient && rejection.enhanced?.startsWith("5.1.")) {
      statements.push(
        ...suppressionStatements(db, {
          accountId: message.accountId,
          email: rejection.recipient,
          reason: "bounce",
          scope: "all",
          sourceMessageId: message.id,
        }),
      );
    }
    const type = campaignId ? "bounced" : "relay.bounced";
    events.push({
      accountId: message.accountId,
      type,
      subjectId: message.id,
      dedupeKey: `${type}:${message.id}:${rejection.recipient}`,
      data: eventData(message, {
        recipient: rejection.recipient,
        bounce_type: bounceType(rejection),
        smtp_code: rejection.code,
        enhanced_code: rejection.enhanced ?? null,
        smtp_response: rejection.response,
      }),
    });
  }
  setRecipients(
    deferred.map((r) => r.recipient),
    "deferred",
    deferred[0]?.response ?? "",
  );
  for (const rejection of failed) {
    setRecipients([rejection.recipient], "failed", rejection.response);
    refund(rejection.recipient, "delivery failed after retries");
  }
  if (failed.length > 0 && !campaignId) {
    events.push({
      accountId: message.accountId,
      type: "relay.failed",
      subjectId: message.id,
      dedupeKey: `relay.failed:${message.id}`,
      data: eventData(message, { recipients: failed.map((r) => r.recipient), attempts: attempt, smtp_response: failed[0]!.response }),
    });
  }

  // The message's status follows all its recipients, including those an earlier attempt already sent.
  statements.push(
    statement(
      db,
      sql`UPDATE messages SET attempts = ${attempt}, smtp_response = ${outcome.response}, subject = ${message.subject}, raw_key = ${message.rawKey},
         sent_at = CASE WHEN ${accepted.length > 0 ? 1 : 0} THEN COALESCE(sent_at, ${sqlNow}) ELSE sent_at END,
         status = ${statusOfRecipients(message.id)}, updated_at = ${sqlNow}
       WHERE id = ${message.id}`,
    ),
  );
  for (const event of events) statements.push(eventStatement(db, event));
  return { statements, events, retryDelaySeconds: deferred.length > 0 ? baseSeconds * 2 ** (attempt - 1) : undefined };
}

/**
 * A campaign message not sent after all (its contact unsubscribed or was suppressed since the audience was
 * materialised, or its campaign was cancelled): the recipient and message take `status`, the credit goes back.
 */
export function recordSkipped(
  ctx: Ctx,
  message: MessageRow,
  pending: string[],
  status: "suppressed" | "cancelled",
  reason: string,
  providers?: ProvidersByDomain,
): Disposition {
  const { db } = ctx;
  // A recipient skipped as suppressed is counted in the reports; one skipped because its campaign was cancelled is not.
  const rollups = status === "suppressed" ? messageRollups(ctx, message, pending, providers) : undefined;
  const statements: D1PreparedStatement[] = [
    ...(rollups ? [...rollups.providerStatements, ...rollups.count(pending, ["queued", "deferred"], { suppressed: 1 })] : []),
    statement(
      db,
      sql`UPDATE message_recipients SET status = ${status}, smtp_response = ${reason}, updated_at = ${sqlNow}
       WHERE message_id = ${message.id} AND status IN ('queued', 'deferred')`,
    ),
    statement(db, sql`UPDATE messages SET status = ${status}, smtp_response = ${reason}, updated_at = ${sqlNow} WHERE id = ${message.id}`),
  ];
  if (message.campaignId && pending.length > 0) {
    statements.push(
      ...releaseStatements(db, {
        accountId: message.accountId,
        amount: pending.length,
        referenceId: recipientReference(message.campaignId, message.id),
        note: reason,
      }),
    );
  }
  return { statements, events: [] };
}

/**
 * Test mode (sk_test_ keys): nothing leaves the system. The recipient's local part picks the outcome, as with
 * SES's mailbox simulator: `bounced@…` bounces (5.1.1), `complained@…` is delivered then complains, anything else
 * is delivered. Suppression lists are not touched.
 */
export function simulate(ctx: Ctx, message: MessageRow, pending: string[]): Disposition {
  const { db } = ctx;
  const statements: D1PreparedStatement[] = [];
  const events: EventInput[] = [];
  const localPart = (email: string) => email.slice(0, email.lastIndexOf("@")).toLowerCase();
  const bounced = pending.filter((email) => localPart(email) === "bounced");
  const delivered = pending.filter((email) => localPart(email) !== "bounced");
  const event = (type: EventInput["type"], key: string, extra: Record<string, unknown>) =>
    events.push({
      accountId: message.accountId,
      type,
      subjectId: message.id,
      dedupeKey: `${type}:${message.id}${key}`,
      data: eventData(message, { ...extra, test: true }),
    });

  if (delivered.length > 0) {
    statements.push(
      statement(
        db,
        sql`UPDATE message_recipients SET status = 'delivered', smtp_response = '250 2.0.0 simulated'
          WHERE message_id = ${message.id} AND email IN (SELECT value FROM json_each(${JSON.stringify(delivered)}))`,
      ),
    );
    event("relay.sent", ":1", { recipients: delivered, smtp_response: "250 2.0.0 simulated" });
    for (const email of delivered) event("relay.delivered", `:${email}`, { recipient: email });
    for (const email of delivered.filter((address) => localPart(address) === "complained"))
      event("relay.complained", `:${email}`, { recipient: email });
  }
  for (const email of bounced) {
    statements.push(
      statement(
        db,
        sql`UPDATE message_recipients SET status = 'bounced', smtp_response = '550 5.1.1 simulated bounce' WHERE message_id = ${message.id} AND email = ${email}`,
      ),
    );
    event("relay.bounced", `:${email}`, {
      recipient: email,
      bounce_type: "hard",
      smtp_code: 550,
      enhanced_code: "5.1.1",
      smtp_response: "550 5.1.1 simulated bounce",
    });
  }
  statements.push(
    statement(
      db,
      sql`UPDATE messages SET status = ${delivered.length > 0 ? "delivered" : "bounced"}, attempts = attempts + 1,
         smtp_response = ${delivered.length > 0 ? "250 2.0.0 simulated" : "550 5.1.1 simulated bounce"}, sent_at = ${sqlNow}, updated_at = ${sqlNow}
         WHERE id = ${message.id}`,
    ),
  );
  for (const item of events) statements.push(eventStatement(db, item));
  return { statements, events };
}
