import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

export const messageStreams = ["transactional", "broadcast"] as const;

export const messages = sqliteTable(
  "messages",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    source: text("source", { enum: ["api", "smtp", "campaign"] }).notNull(),
    // Campaign messages start `scheduled` (materialised, waiting for the fan-out to enqueue them) and end `cancelled`
    // when their campaign is cancelled before they were sent.
    status: text("status", {
      enum: ["scheduled", "queued", "sending", "sent", "delivered", "deferred", "bounced", "failed", "suppressed", "unknown", "cancelled"],
    }).notNull(),
    fromAddress: text("from_address").notNull(),
    fromName: text("from_name"),
    domainId: text("domain_id").notNull(),
    replyTo: text("reply_to"),
    subject: text("subject").notNull(),
    tags: text("tags", { mode: "json" }).$type<string[]>().notNull(),
    metadata: text("metadata", { mode: "json" }).$type<Record<string, string>>().notNull(),
    // What the consumer renders from: inline JSON when small, else an R2 key (attachments, raw MIME from the relay).
    content: text("content"),
    contentKey: text("content_key"),
    /** R2 key of the signed bytes as last sent (GET /messages/{id}/raw); null until a delivery attempt built them. */
    rawKey: text("raw_key"),
    creditsCharged: integer("credits_charged").notNull(),
    testMode: integer("test_mode", { mode: "boolean" }).notNull().default(false),
    attempts: integer("attempts").notNull().default(0),
    smtpResponse: text("smtp_response"),
    // Set when a consumer claims the message for a delivery attempt (status `sending`); the cron finds stale claims.
    claimedAt: text("claimed_at"),
    // A message held back past its domain's warm-up cap: not sent before this time (the next UTC day).
    nextAttemptAt: text("next_attempt_at"),
    // A scheduled send (status `scheduled`, no campaign): not sent before this time. A delayed queue message or the
    // cron hands it to the consumer, whose claim checks the time (docs/sending.md, "Scheduled sends").
    scheduledAt: text("scheduled_at"),
    // The campaign a `source: campaign` message belongs to (one message per recipient).
    campaignId: text("campaign_id"),
    // Transactional mail (receipts, resets) and broadcast mail (campaigns, newsletters) are kept apart: each has its
    // own suppressions, and only broadcast mail carries one-click List-Unsubscribe unless asked (docs/streams.md).
    stream: text("stream", { enum: messageStreams }).notNull().default("transactional"),
    // The subscription topic broadcast mail is about: its unsubscribe link leaves that topic only.
    topicId: text("topic_id"),
    // A transactional message that asked for List-Unsubscribe (`unsubscribe: true`).
    listUnsubscribe: integer("list_unsubscribe", { mode: "boolean" }).notNull().default(false),
    // Open pixel / click rewriting applied when the message is built for delivery (campaigns default on, API off).
    trackOpens: integer("track_opens", { mode: "boolean" }).notNull().default(false),
    trackClicks: integer("track_clicks", { mode: "boolean" }).notNull().default(false),
    createdAt: createdAt(),
    sentAt: text("sent_at"),
    updatedAt: updatedAt(),
  },
  (t) => [
    index("messages_account_created").on(t.accountId, t.createdAt),
    index("messages_account_status").on(t.accountId, t.status),
    index("messages_status_updated").on(t.status, t.updatedAt),
    // The fan-out's pages (status scheduled) and the campaign's counters and completion check (count per status).
    index("messages_campaign_status").on(t.campaignId, t.status),
    // The cron's due scheduled sends.
    index("messages_status_scheduled").on(t.status, t.scheduledAt),
  ],
);

export const messageRecipients = sqliteTable(
  "message_recipients",
  {
    messageId: text("message_id")
      .notNull()
      .references(() => messages.id),
    email: text("email").notNull(),
    accountId: text("account_id").notNull(),
    status: text("status", {
      enum: ["queued", "sent", "delivered", "deferred", "bounced", "failed", "suppressed", "complained", "unknown", "cancelled"],
    }).notNull(),
    smtpResponse: text("smtp_response"),
    // Mailbox provider of the address (gmail, microsoft, yahoo, apple, other), set when its outcome is recorded:
    // the reports' provider dimension, reused by the tracking events of the same recipient.
    provider: text("provider"),
    // Engagement (tracking): first human open and click, and how many of each (machine opens are not counted here).
    openedAt: text("opened_at"),
    clickedAt: text("clicked_at"),
    opens: integer("opens").notNull().default(0),
    clicks: integer("clicks").notNull().default(0),
    // The provider's id for this recipient's copy (Cloudflare Email Sending sends one copy per recipient): its
    // delivery events name it.
    providerMessageId: text("provider_message_id"),
    updatedAt: updatedAt(),
  },
  (t) => [
    primaryKey({ columns: [t.messageId, t.email] }),
    index("message_recipients_account_email").on(t.accountId, t.email),
    index("message_recipients_provider_message").on(t.providerMessageId),
  ],
);

export const messageTags = sqliteTable(
  "message_tags",
  {
    messageId: text("message_id").notNull(),
    accountId: text("account_id").notNull(),
    tag: text("tag").notNull(),
  },
  (t) => [primaryKey({ columns: [t.messageId, t.tag] }), index("message_tags_account_tag").on(t.accountId, t.tag)],
);

export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    accountId: text("account_id").notNull(),
    key: text("key").notNull(),
    route: text("route").notNull(),
    requestHash: text("request_hash").notNull(),
    responseStatus: integer("response_status"),
    responseBody: text("response_body"),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.route, t.key] }), index("idempotency_keys_created").on(t.createdAt)],
);
