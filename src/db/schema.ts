import { sql } from "drizzle-orm";
import { roles } from "../access";
import type { Scope } from "../access";
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

// Timestamps are ISO 8601 UTC strings: they sort lexically, compare in SQL and go out in responses unchanged.
const createdAt = () => text("created_at").notNull().default(sql`(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`);
const updatedAt = () => text("updated_at").notNull().default(sql`(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`);
// The account that owns the row, as a foreign key.
const ownerAccount = () =>
  text("account_id")
    .notNull()
    .references(() => accounts.id);

export const accounts = sqliteTable("accounts", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  plan: text("plan").notNull().default("free"),
  features: text("features", { mode: "json" }).$type<string[]>().notNull(),
  dailySendLimit: integer("daily_send_limit").notNull(),
  rateLimitPerMinute: integer("rate_limit_per_minute").notNull(),
  // Plan limit: completed AI draft generations per calendar month (UTC).
  aiGenerationsPerMonth: integer("ai_generations_per_month").notNull().default(0),
  // Cached balances; every change to them is written together with a credit_ledger row in one D1 batch.
  sendBalance: integer("send_balance").notNull().default(0),
  sendReserved: integer("send_reserved").notNull().default(0),
  verifyBalance: integer("verify_balance").notNull().default(0),
  // Signing into the dashboard with an API key once the account has active members: the owner's choice (docs/dashboard.md).
  keySignIn: integer("key_sign_in", { mode: "boolean" }).notNull().default(false),
  // The owner's choice that every member signs in with a second factor (TOTP), set up before anything else.
  requireTotp: integer("require_totp", { mode: "boolean" }).notNull().default(false),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
});

export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    // First characters of the key, kept so the owner can recognise it; the key itself is never stored.
    prefix: text("prefix").notNull(),
    keyHash: text("key_hash").notNull(),
    scopes: text("scopes", { mode: "json" }).$type<Scope[] | null>(),
    mode: text("mode", { enum: ["live", "test"] })
      .notNull()
      .default("live"),
    createdAt: createdAt(),
    lastUsedAt: text("last_used_at"),
    revokedAt: text("revoked_at"),
  },
  (t) => [uniqueIndex("api_keys_key_hash").on(t.keyHash), index("api_keys_account").on(t.accountId)],
);

/**
 * Signed-in dashboard sessions. The cookie carries a random session id; its SHA-256 is the row's id, so a session
 * ends on the server (sign-out deletes the row) even for a copy of the cookie.
 */
export const dashboardSessions = sqliteTable(
  "dashboard_sessions",
  {
    id: text("id").primaryKey(),
    apiKeyId: text("api_key_id")
      .notNull()
      .references(() => apiKeys.id, { onDelete: "cascade" }),
    expiresAt: text("expires_at").notNull(),
    createdAt: createdAt(),
  },
  (t) => [index("dashboard_sessions_key_expiry").on(t.apiKeyId, t.expiresAt)],
);

/** The people of an account (docs/dashboard.md): invited until they first sign in, then active. */
export const members = sqliteTable(
  "members",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    // Lower-cased: sign-in looks members up by the address typed in.
    email: text("email").notNull(),
    role: text("role", { enum: roles }).notNull(),
    status: text("status", { enum: ["invited", "active"] })
      .notNull()
      .default("invited"),
    invitedBy: text("invited_by"),
    lastSignedInAt: text("last_signed_in_at"),
    // TOTP (RFC 6238): the secret AES-GCM encrypted (DKIM_ENCRYPTION_KEY), in use once confirmed with a first code;
    // the last time step accepted, so a code is not accepted twice; the unused recovery codes' SHA-256.
    totpSecret: text("totp_secret"),
    totpEnabledAt: text("totp_enabled_at"),
    totpLastStep: integer("totp_last_step"),
    recoveryCodes: text("recovery_codes", { mode: "json" }).$type<string[]>(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [uniqueIndex("members_account_email").on(t.accountId, t.email), index("members_email").on(t.email)],
);

/**
 * Mailed sign-in links and invitations. The row's id is the SHA-256 of the link's secret, so the table alone signs
 * nobody in; a sign-in's code is an HMAC of it, and the browser that asked is kept as the hash of its cookie.
 */
export const signInTokens = sqliteTable(
  "sign_in_tokens",
  {
    id: text("id").primaryKey(),
    memberId: text("member_id")
      .notNull()
      .references(() => members.id, { onDelete: "cascade" }),
    kind: text("kind", { enum: ["sign_in", "invitation"] }).notNull(),
    codeHash: text("code_hash"),
    browserHash: text("browser_hash"),
    expiresAt: text("expires_at").notNull(),
    usedAt: text("used_at"),
    createdAt: createdAt(),
  },
  (t) => [index("sign_in_tokens_member").on(t.memberId, t.kind), index("sign_in_tokens_expiry").on(t.expiresAt)],
);

/** A member's signed-in dashboard sessions, as dashboard_sessions are a key's: removing the member removes them. */
export const memberSessions = sqliteTable(
  "member_sessions",
  {
    id: text("id").primaryKey(),
    memberId: text("member_id")
      .notNull()
      .references(() => members.id, { onDelete: "cascade" }),
    expiresAt: text("expires_at").notNull(),
    createdAt: createdAt(),
  },
  (t) => [index("member_sessions_member_expiry").on(t.memberId, t.expiresAt)],
);

/**
 * Who changed what in an account, when and from where (docs/api.md, "Audit log"): one row per write request of the
 * API or the dashboard, per sign-in and per operator change. Kept RETENTION_DAYS, like messages.
 */
export const auditLog = sqliteTable(
  "audit_log",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    action: text("action").notNull(),
    actorType: text("actor_type", { enum: ["member", "api_key", "operator"] }).notNull(),
    actorId: text("actor_id").notNull(),
    actorName: text("actor_name").notNull(),
    targetType: text("target_type"),
    targetId: text("target_id"),
    via: text("via", { enum: ["api", "dashboard", "operator"] }).notNull(),
    ip: text("ip"),
    userAgent: text("user_agent"),
    createdAt: createdAt(),
  },
  (t) => [
    index("audit_log_account_created").on(t.accountId, t.createdAt),
    index("audit_log_account_action").on(t.accountId, t.action, t.createdAt),
    index("audit_log_account_actor").on(t.accountId, t.actorId, t.createdAt),
    index("audit_log_created").on(t.createdAt),
  ],
);

export const creditLedger = sqliteTable(
  "credit_ledger",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    balance: text("balance", { enum: ["send", "verify"] }).notNull(),
    kind: text("kind", { enum: ["top_up", "charge", "reservation", "release", "refund", "adjustment"] }).notNull(),
    // Signed change to the balance (reservations change the reserved amount instead).
    amount: integer("amount").notNull(),
    // What the entry is for (msg_…, vjob_…, cmp_…); unique per kind so a retried producer cannot charge or refund twice.
    referenceId: text("reference_id"),
    note: text("note"),
    balanceAfter: integer("balance_after").notNull(),
    createdAt: createdAt(),
  },
  (t) => [index("credit_ledger_account").on(t.accountId, t.createdAt), uniqueIndex("credit_ledger_reference").on(t.balance, t.kind, t.referenceId)],
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

export type DnsRecordCheck = {
  type: "TXT" | "MX" | "CNAME";
  name: string;
  value: string;
  purpose: "dkim" | "spf" | "dmarc" | "return_path" | "dkim_ed25519" | "inbound";
  status: "pending" | "verified" | "failed" | "not_found";
  found?: string[];
};

export const domains = sqliteTable(
  "domains",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    status: text("status", { enum: ["pending", "verified", "failed"] })
      .notNull()
      .default("pending"),
    dkimSelector: text("dkim_selector").notNull(),
    dkimPublicKey: text("dkim_public_key").notNull(),
    // AES-GCM ciphertext (DKIM_ENCRYPTION_KEY), never the clear key.
    dkimPrivateKey: text("dkim_private_key").notNull(),
    // A second, Ed25519 signature (RFC 8463) beside the RSA one, for receivers that prefer it; optional to publish.
    dkimEd25519PublicKey: text("dkim_ed25519_public_key"),
    dkimEd25519PrivateKey: text("dkim_ed25519_private_key"),
    records: text("records", { mode: "json" }).$type<DnsRecordCheck[]>().notNull(),
    lastCheckedAt: text("last_checked_at"),
    verifiedAt: text("verified_at"),
    // Warm-up (docs/deliverability.md): daily caps from `warmup_started_at` (a UTC day); past the last cap it completes.
    warmupStatus: text("warmup_status", { enum: ["off", "active", "paused", "completed"] })
      .notNull()
      .default("off"),
    warmupSchedule: text("warmup_schedule", { mode: "json" }).$type<number[]>(),
    warmupStartedAt: text("warmup_started_at"),
    warmupPausedReason: text("warmup_paused_reason"),
    // Reputation guard: `held` refuses new campaign sends from the domain until an operator clears it.
    reputationStatus: text("reputation_status", { enum: ["ok", "held"] })
      .notNull()
      .default("ok"),
    reputationReason: text("reputation_reason"),
    reputationHeldAt: text("reputation_held_at"),
    // Inbound mail (docs/inbound.md): whether the email() handler accepts mail for the domain, and for which local
    // parts (null: every address, a catch-all).
    receiving: integer("receiving", { mode: "boolean" }).notNull().default(false),
    receivingAddresses: text("receiving_addresses", { mode: "json" }).$type<string[]>(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    uniqueIndex("domains_account_name").on(t.accountId, t.name),
    index("domains_status").on(t.status),
    // One account at most receives a domain's mail: two accounts may both verify a name for sending.
    uniqueIndex("domains_receiving_name").on(t.name).where(sql`${t.receiving} = 1`),
  ],
);

export const templates = sqliteTable(
  "templates",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    subject: text("subject").notNull(),
    html: text("html"),
    text: text("text"),
    variables: text("variables", { mode: "json" }).$type<string[]>().notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("templates_account").on(t.accountId, t.createdAt)],
);

export const messageStreams = ["transactional", "broadcast"] as const;
export const suppressionScopes = ["all", "broadcast", "transactional"] as const;

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

export const events = sqliteTable(
  "events",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    type: text("type").notNull(),
    // The object the event is about (msg_…, vjob_…, cmp_…), for timelines.
    subjectId: text("subject_id"),
    // One fact, one event: a retried producer hits this unique key instead of minting a second id.
    dedupeKey: text("dedupe_key").notNull(),
    data: text("data", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    createdAt: createdAt(),
    // Outbox marker: set once the webhook deliveries for this event are enqueued; the cron retries the rest.
    dispatchedAt: text("dispatched_at"),
  },
  (t) => [
    uniqueIndex("events_dedupe").on(t.accountId, t.dedupeKey),
    index("events_undispatched").on(t.dispatchedAt, t.createdAt),
    index("events_account_created").on(t.accountId, t.createdAt),
    index("events_subject").on(t.subjectId),
  ],
);

export const suppressions = sqliteTable(
  "suppressions",
  {
    accountId: text("account_id").notNull(),
    email: text("email").notNull(),
    reason: text("reason", { enum: ["bounce", "complaint", "unsubscribe", "manual"] }).notNull(),
    // Which mail it keeps away: every stream (a hard bounce), broadcast only (an unsubscribe), or the stream a
    // complaint came from. One address may have an entry per scope.
    scope: text("scope", { enum: suppressionScopes }).notNull().default("all"),
    sourceMessageId: text("source_message_id"),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.email, t.scope] }), index("suppressions_account_created").on(t.accountId, t.createdAt)],
);

export const smtpCredentials = sqliteTable(
  "smtp_credentials",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    username: text("username").notNull(),
    passwordHash: text("password_hash").notNull(),
    // Inherited from the key that created it: a `test` credential's messages are simulated, never delivered.
    mode: text("mode", { enum: ["live", "test"] })
      .notNull()
      .default("live"),
    createdAt: createdAt(),
    lastUsedAt: text("last_used_at"),
    revokedAt: text("revoked_at"),
  },
  (t) => [uniqueIndex("smtp_credentials_username").on(t.username), index("smtp_credentials_account").on(t.accountId)],
);

/** The body a webhook endpoint receives: ours, or a peer's, so a handler written for that peer keeps working (docs/migrating.md). */
export const webhookFormats = ["mailforge", "resend", "postmark"] as const;

export const webhookEndpoints = sqliteTable(
  "webhook_endpoints",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    url: text("url").notNull(),
    description: text("description"),
    events: text("events", { mode: "json" }).$type<string[]>().notNull(),
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    // AES-GCM ciphertext; the clear secret is needed to sign, so it cannot be a one-way hash.
    secret: text("secret").notNull(),
    previousSecret: text("previous_secret"),
    previousSecretExpiresAt: text("previous_secret_expires_at"),
    failingSince: text("failing_since"),
    disabledReason: text("disabled_reason"),
    format: text("format", { enum: webhookFormats }).notNull().default("mailforge"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("webhook_endpoints_account").on(t.accountId)],
);

export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    id: text("id").primaryKey(),
    endpointId: text("endpoint_id").notNull(),
    accountId: text("account_id").notNull(),
    eventId: text("event_id").notNull(),
    eventType: text("event_type").notNull(),
    attempt: integer("attempt").notNull(),
    status: text("status", { enum: ["succeeded", "retrying", "failed"] }).notNull(),
    statusCode: integer("status_code"),
    responseSnippet: text("response_snippet"),
    durationMs: integer("duration_ms"),
    nextRetryAt: text("next_retry_at"),
    createdAt: createdAt(),
  },
  (t) => [
    index("webhook_deliveries_endpoint").on(t.endpointId, t.createdAt),
    uniqueIndex("webhook_deliveries_attempt").on(t.endpointId, t.eventId, t.attempt),
  ],
);

export const verificationJobs = sqliteTable(
  "verification_jobs",
  {
    id: text("id").primaryKey(),
    // The standalone verification API shows integer ids.
    seq: integer("seq").notNull(),
    accountId: ownerAccount(),
    // `contacts` (POST /contacts/verify) and `campaign` (a campaign's pre-send checks) write each result onto its contact.
    source: text("source", { enum: ["api", "batch", "contacts", "campaign"] }).notNull(),
    name: text("name"),
    // The campaign whose fan-out waits for this job; its completion wakes that campaign's progress object.
    campaignId: text("campaign_id"),
    status: text("status", { enum: ["pending", "processing", "completed", "failed"] }).notNull(),
    total: integer("total").notNull(),
    processed: integer("processed").notNull().default(0),
    chargeable: integer("chargeable").notNull().default(0),
    creditsCharged: integer("credits_charged").notNull().default(0),
    counts: text("counts", { mode: "json" }).$type<Record<string, number>>().notNull(),
    inputKey: text("input_key"),
    error: text("error"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
    completedAt: text("completed_at"),
  },
  (t) => [
    uniqueIndex("verification_jobs_seq").on(t.seq),
    index("verification_jobs_account").on(t.accountId, t.createdAt),
    // The cron's sweep for jobs whose queue message was lost.
    index("verification_jobs_status_updated").on(t.status, t.updatedAt),
  ],
);

export const verificationResults = sqliteTable(
  "verification_results",
  {
    jobId: text("job_id").notNull(),
    position: integer("position").notNull(),
    email: text("email").notNull(),
    result: text("result").notNull(),
    status: text("status").notNull(),
    detail: text("detail", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.position] })],
);

export const dnsCache = sqliteTable(
  "dns_cache",
  {
    name: text("name").notNull(),
    type: text("type").notNull(),
    answer: text("answer", { mode: "json" }).$type<unknown>().notNull(),
    expiresAt: integer("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.name, t.type] })],
);

export const contacts = sqliteTable(
  "contacts",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    email: text("email").notNull(),
    // Trimmed, domain lower-cased: the create-or-update key.
    emailKey: text("email_key").notNull(),
    firstName: text("first_name"),
    lastName: text("last_name"),
    company: text("company"),
    phone: text("phone"),
    country: text("country"),
    customFields: text("custom_fields", { mode: "json" }).$type<Record<string, string | number | boolean>>().notNull(),
    // `pending` until a double opt-in sign-up is confirmed: no campaign or automation mails it.
    status: text("status", { enum: ["subscribed", "unsubscribed", "bounced", "complained", "pending"] })
      .notNull()
      .default("subscribed"),
    // The consent record of a sign-up form: which form, when the address confirmed and from which IP.
    consentFormId: text("consent_form_id"),
    consentedAt: text("consented_at"),
    consentIp: text("consent_ip"),
    // Last open or click by this contact (tracking), for segments and re-engagement.
    lastActivityAt: text("last_activity_at"),
    // The last verification of the address (POST /contacts/verify or a campaign's pre-send checks): the result
    // (valid, invalid, risky, unknown), the engine status, and when; reused free while younger than VERIFY_FRESH_DAYS.
    verificationResult: text("verification_result", { enum: ["valid", "invalid", "risky", "unknown"] }),
    verificationStatus: text("verification_status"),
    verificationSubStatus: text("verification_sub_status"),
    verifiedAt: text("verified_at"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    uniqueIndex("contacts_account_email").on(t.accountId, t.emailKey),
    index("contacts_account_created").on(t.accountId, t.createdAt),
    // Suppressions are keyed by the fully lower-cased address; this finds every contact of one (bounce, complaint).
    index("contacts_account_email_lower").on(t.accountId, sql`lower(${t.emailKey})`),
  ],
);

// What an account's marketing mail is about ("Newsletter", "Product updates"): a contact subscribes to each, and an
// unsubscribe from one topic's mail leaves that topic only.
export const topics = sqliteTable(
  "topics",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    description: text("description"),
    // Whether a contact who never chose is subscribed (opt-out topic) or not (opt-in topic).
    defaultSubscribed: integer("default_subscribed", { mode: "boolean" }).notNull().default(true),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("topics_account").on(t.accountId, t.createdAt), uniqueIndex("topics_account_name").on(t.accountId, t.name)],
);

// A contact's own choice for a topic; no row means the topic's default.
export const contactTopics = sqliteTable(
  "contact_topics",
  {
    contactId: text("contact_id").notNull(),
    topicId: text("topic_id").notNull(),
    accountId: text("account_id").notNull(),
    subscribed: integer("subscribed", { mode: "boolean" }).notNull(),
    updatedAt: updatedAt(),
  },
  (t) => [primaryKey({ columns: [t.contactId, t.topicId] }), index("contact_topics_topic").on(t.topicId, t.subscribed)],
);

// A public sign-up form (POST {SITE_URL}/subscribe/<id>): the lists and topics it subscribes to, and with double
// opt-in the sender of its confirmation mail.
export const forms = sqliteTable(
  "forms",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    lists: text("lists", { mode: "json" }).$type<string[]>().notNull(),
    topics: text("topics", { mode: "json" }).$type<string[]>().notNull(),
    doubleOptIn: integer("double_opt_in", { mode: "boolean" }).notNull().default(true),
    senderId: text("sender_id"),
    redirectUrl: text("redirect_url"),
    fields: text("fields", { mode: "json" }).$type<string[]>().notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("forms_account").on(t.accountId, t.createdAt)],
);

export const lists = sqliteTable(
  "lists",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    description: text("description"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("lists_account").on(t.accountId, t.createdAt)],
);

export const listMembers = sqliteTable(
  "list_members",
  {
    listId: text("list_id").notNull(),
    contactId: text("contact_id").notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.listId, t.contactId] }), index("list_members_contact").on(t.contactId)],
);

export const contactImports = sqliteTable(
  "contact_imports",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    listId: text("list_id"),
    status: text("status", { enum: ["pending", "processing", "completed", "failed"] }).notNull(),
    mapping: text("mapping", { mode: "json" }).$type<Record<string, string>>().notNull(),
    inputKey: text("input_key").notNull(),
    // Byte offset in the CSV of the first record not yet imported: where the next chunk resumes.
    inputOffset: integer("input_offset").notNull().default(0),
    // `verify: true`: each chunk's addresses without a fresh result are checked by a verification job of their own.
    verify: integer("verify", { mode: "boolean" }).notNull().default(false),
    total: integer("total").notNull().default(0),
    processed: integer("processed").notNull().default(0),
    created: integer("created").notNull().default(0),
    updated: integer("updated").notNull().default(0),
    failed: integer("failed").notNull().default(0),
    error: text("error"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("contact_imports_account").on(t.accountId, t.createdAt), index("contact_imports_status_updated").on(t.status, t.updatedAt)],
);

export const contactImportErrors = sqliteTable(
  "contact_import_errors",
  {
    importId: text("import_id").notNull(),
    row: integer("row").notNull(),
    message: text("message").notNull(),
  },
  (t) => [primaryKey({ columns: [t.importId, t.row] })],
);

// A campaign's From: an address on one of the account's verified domains.
export const senders = sqliteTable(
  "senders",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    email: text("email").notNull(),
    replyTo: text("reply_to"),
    domainId: text("domain_id").notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("senders_account").on(t.accountId, t.createdAt)],
);

export type SegmentCondition = { field: string; op: string; value?: unknown };

// A saved audience: contacts matching all (or any) of the conditions, evaluated when used, never materialised.
export const segments = sqliteTable(
  "segments",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    match: text("match", { enum: ["all", "any"] }).notNull(),
    conditions: text("conditions", { mode: "json" }).$type<SegmentCondition[]>().notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("segments_account").on(t.accountId, t.createdAt)],
);

export const campaignStatuses = ["draft", "scheduled", "sending", "sent", "cancelled", "failed"] as const;
export const campaignVerificationModes = ["off", "skip_invalid", "valid_only"] as const;

// A campaign: content, audience (lists ∪ segments − exclude_lists) and its sending state. Its recipients are
// messages (`messages.campaign_id`), materialised when sending starts; counters are counted from them.
export const campaigns = sqliteTable(
  "campaigns",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    status: text("status", { enum: campaignStatuses }).notNull().default("draft"),
    senderId: text("sender_id"),
    subject: text("subject"),
    preheader: text("preheader"),
    html: text("html"),
    text: text("text"),
    templateId: text("template_id"),
    variables: text("variables", { mode: "json" }).$type<Record<string, string>>().notNull(),
    tags: text("tags", { mode: "json" }).$type<string[]>().notNull(),
    lists: text("lists", { mode: "json" }).$type<string[]>().notNull(),
    segments: text("segments", { mode: "json" }).$type<string[]>().notNull(),
    excludeLists: text("exclude_lists", { mode: "json" }).$type<string[]>().notNull(),
    trackOpens: integer("track_opens", { mode: "boolean" }).notNull().default(true),
    trackClicks: integer("track_clicks", { mode: "boolean" }).notNull().default(true),
    // The subscription topic: contacts who left it are not in the audience, and its unsubscribe link leaves it only.
    topicId: text("topic_id"),
    // Pre-send hygiene (docs/campaigns.md): `off`, or skip contacts whose address verified invalid (`skip_invalid`) or
    // anything but valid (`valid_only`); addresses without a fresh result are checked before the fan-out.
    verification: text("verification", { enum: campaignVerificationModes }).notNull().default("off"),
    // The verification job of those checks (null when every result was fresh or verification is off).
    verificationJobId: text("verification_job_id"),
    sendAt: text("send_at"),
    startedAt: text("started_at"),
    completedAt: text("completed_at"),
    // Credits held in the ledger (reference = campaign id) for the audience counted at POST /send.
    creditsReserved: integer("credits_reserved").notNull().default(0),
    error: text("error"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index("campaigns_account").on(t.accountId, t.createdAt),
    index("campaigns_account_status").on(t.accountId, t.status, t.createdAt),
    // The cron's sweep for campaigns whose fan-out stalled.
    index("campaigns_status_updated").on(t.status, t.updatedAt),
  ],
);

// An audience contact a campaign's pre-send verification left out, instead of a message: who, and why. `result` is
// the contact's verification result then (`unknown` also when it had none).
export const campaignSkips = sqliteTable(
  "campaign_skips",
  {
    campaignId: text("campaign_id").notNull(),
    contactId: text("contact_id").notNull(),
    accountId: text("account_id").notNull(),
    email: text("email").notNull(),
    result: text("result", { enum: ["invalid", "risky", "unknown"] }).notNull(),
    reason: text("reason").notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.campaignId, t.contactId] })],
);

export const providers = ["gmail", "microsoft", "yahoo", "apple", "other"] as const;

// Daily rollups that reports read instead of scanning messages or events. Every counted fact increments one row in
// the same D1 batch that records it (src/domain/reports/rollups.ts). `campaign_id` is '' for non-campaign mail and
// `domain` is the sending domain's name, so a report needs no join.
export const dailyStats = sqliteTable(
  "daily_stats",
  {
    accountId: text("account_id").notNull(),
    day: text("day").notNull(),
    domain: text("domain").notNull(),
    provider: text("provider", { enum: providers }).notNull(),
    campaignId: text("campaign_id").notNull(),
    // Transactional and broadcast mail are counted apart (GET /reports/overview?stream=).
    stream: text("stream", { enum: messageStreams }).notNull().default("transactional"),
    sent: integer("sent").notNull().default(0),
    delivered: integer("delivered").notNull().default(0),
    hardBounces: integer("hard_bounces").notNull().default(0),
    softBounces: integer("soft_bounces").notNull().default(0),
    opens: integer("opens").notNull().default(0),
    uniqueOpens: integer("unique_opens").notNull().default(0),
    machineOpens: integer("machine_opens").notNull().default(0),
    clicks: integer("clicks").notNull().default(0),
    uniqueClicks: integer("unique_clicks").notNull().default(0),
    unsubscribes: integer("unsubscribes").notNull().default(0),
    complaints: integer("complaints").notNull().default(0),
    failed: integer("failed").notNull().default(0),
    suppressed: integer("suppressed").notNull().default(0),
    // Received mail threaded to a message of this row (docs/inbound.md), auto-replies not counted.
    replies: integer("replies").notNull().default(0),
  },
  (t) => [
    primaryKey({ columns: [t.accountId, t.day, t.domain, t.provider, t.campaignId, t.stream] }),
    index("daily_stats_campaign").on(t.campaignId, t.day),
  ],
);

// Clicks per link of a campaign (the campaign report's `links`); unique = recipients who clicked that link.
export const campaignLinks = sqliteTable(
  "campaign_links",
  {
    campaignId: text("campaign_id").notNull(),
    url: text("url").notNull(),
    clicks: integer("clicks").notNull().default(0),
    uniqueClicks: integer("unique_clicks").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.campaignId, t.url] })],
);

// A campaign's messages the retention purge removed, per final status: GET /campaigns/{id} adds them to the messages
// still stored, so its counters read the same before and after a purge. Written in the purge's own D1 batch.
export const campaignPurgedMessages = sqliteTable(
  "campaign_purged_messages",
  {
    campaignId: text("campaign_id").notNull(),
    status: text("status").notNull(),
    total: integer("total").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.campaignId, t.status] })],
);

// Daily usage per account: API calls (flushed by the per-key RateLimiter object, not written per request) and the
// credit ledger's movements (written by the ledger in the batch of each entry), so GET /usage reads days, not rows.
export const usageDaily = sqliteTable(
  "usage_daily",
  {
    accountId: text("account_id").notNull(),
    day: text("day").notNull(),
    apiCalls: integer("api_calls").notNull().default(0),
    // Addresses verified (single, bulk and the standalone verification API), whether or not they were charged.
    verifications: integer("verifications").notNull().default(0),
    sendCharged: integer("send_charged").notNull().default(0),
    sendRefunded: integer("send_refunded").notNull().default(0),
    sendReserved: integer("send_reserved").notNull().default(0),
    sendReleased: integer("send_released").notNull().default(0),
    verifyCharged: integer("verify_charged").notNull().default(0),
    verifyRefunded: integer("verify_refunded").notNull().default(0),
    // A plan's monthly verification credits: granted, and last month's unused ones expired (docs/verification.md).
    verifyGranted: integer("verify_granted").notNull().default(0),
    verifyExpired: integer("verify_expired").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.day] })],
);

export const automationStatuses = ["active", "paused"] as const;

// An automation: ordered steps run per contact by one Workflows instance per run. `private_path` is the
// unguessable part of its no-key trigger URL ({SITE_URL}/hooks/automations/<path>); rotating it replaces the value.
export const automations = sqliteTable(
  "automations",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    status: text("status", { enum: automationStatuses }).notNull().default("active"),
    steps: text("steps", { mode: "json" }).$type<unknown[]>().notNull(),
    redirectUrl: text("redirect_url"),
    privatePath: text("private_path").notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("automations_account").on(t.accountId, t.createdAt), uniqueIndex("automations_private_path").on(t.privatePath)],
);

export const automationRunStatuses = ["running", "waiting", "completed", "failed", "cancelled"] as const;

// One run of an automation for one contact; its id is the Workflows instance id. `event_id` (the caller's, or the
// run id when none was given) is unique per automation, so a retried trigger finds its run instead of starting one.
export const automationRuns = sqliteTable(
  "automation_runs",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    automationId: text("automation_id").notNull(),
    contactId: text("contact_id").notNull(),
    email: text("email").notNull(),
    eventId: text("event_id").notNull(),
    status: text("status", { enum: automationRunStatuses }).notNull().default("running"),
    // The steps as they were when the run started, so editing the automation does not change a run under way.
    steps: text("steps", { mode: "json" }).$type<unknown[]>().notNull(),
    input: text("input", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    error: text("error"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
    completedAt: text("completed_at"),
  },
  (t) => [
    uniqueIndex("automation_runs_event").on(t.automationId, t.eventId),
    index("automation_runs_account").on(t.accountId, t.createdAt),
    index("automation_runs_automation").on(t.automationId, t.createdAt),
  ],
);

export const runStepStatuses = ["running", "completed", "skipped", "failed"] as const;

// What each step of a run did (start, finish, result), written by the workflow as it goes.
export const automationRunSteps = sqliteTable(
  "automation_run_steps",
  {
    runId: text("run_id").notNull(),
    index: integer("step_index").notNull(),
    type: text("type").notNull(),
    status: text("status", { enum: runStepStatuses }).notNull(),
    detail: text("detail", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    startedAt: text("started_at"),
    finishedAt: text("finished_at"),
  },
  (t) => [primaryKey({ columns: [t.runId, t.index] })],
);

export const aiRequestStatuses = ["queued", "running", "completed", "failed"] as const;

// A request for AI-generated campaign drafts: stored, generated from a queue, its variations saved as draft campaigns.
export const aiRequests = sqliteTable(
  "ai_requests",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    status: text("status", { enum: aiRequestStatuses }).notNull().default("queued"),
    input: text("input", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    result: text("result", { mode: "json" }).$type<Record<string, unknown>>(),
    campaignIds: text("campaign_ids", { mode: "json" }).$type<string[]>().notNull(),
    error: text("error"),
    inputTokens: integer("input_tokens"),
    outputTokens: integer("output_tokens"),
    attempts: integer("attempts").notNull().default(0),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
    completedAt: text("completed_at"),
  },
  (t) => [
    index("ai_requests_account").on(t.accountId, t.createdAt),
    // The monthly quota counts completed generations per account.
    index("ai_requests_account_completed").on(t.accountId, t.status, t.completedAt),
  ],
);

// Asynchronous delivery feedback as received (DSNs, ARF reports, Cloudflare Email Sending events, SES notifications):
// one row per report and recipient, keyed by a digest of its source's own id, so a report delivered twice is
// recorded once (soft bounces have no state change of their own to make them idempotent).
export const deliveryFeedback = sqliteTable(
  "delivery_feedback",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    messageId: text("message_id").notNull(),
    recipient: text("recipient").notNull(),
    kind: text("kind", { enum: ["delivered", "deferred", "bounced", "complained"] }).notNull(),
    bounceType: text("bounce_type", { enum: ["hard", "soft", "blocked"] }),
    source: text("source", { enum: ["dsn", "arf", "cloudflare", "ses"] }).notNull(),
    detail: text("detail"),
    createdAt: createdAt(),
  },
  (t) => [index("delivery_feedback_message").on(t.messageId)],
);

// Recipients a domain's warm-up let through per UTC day. `granted` is no longer written (each message now reserves on
// its own, src/domain/feedback/warmup.ts); dropping it takes a migration.
export const warmupUsage = sqliteTable(
  "warmup_usage",
  {
    domainId: text("domain_id").notNull(),
    day: text("day").notNull(),
    sent: integer("sent").notNull().default(0),
    granted: integer("granted").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.domainId, t.day] })],
);

export type InboundAttachment = {
  filename: string | null;
  content_type: string;
  size: number;
  content_id: string | null;
  disposition: "attachment" | "inline" | null;
};

/** The authentication results Email Routing added on top of the message, as it wrote them. */
export type InboundAuthentication = {
  spf: string | null;
  dkim: string | null;
  dmarc: string | null;
  /** The header's value as received (Authentication-Results, or ARC-Authentication-Results). */
  header: string | null;
  received_spf: string | null;
};

// Mail received on a receiving domain through the email() handler (docs/inbound.md): the raw bytes in R2
// (`raw_key`), each attachment beside it, the parsed fields here. Bodies too large for a row live in R2 (`body_key`).
// The id is derived from the envelope recipient and the Message-ID, so a redelivered message is stored once.
export const inboundEmails = sqliteTable(
  "inbound_emails",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    domainId: text("domain_id").notNull(),
    envelopeFrom: text("envelope_from").notNull(),
    envelopeTo: text("envelope_to").notNull(),
    fromHeader: text("from_header"),
    fromAddress: text("from_address"),
    toAddresses: text("to_addresses", { mode: "json" }).$type<string[]>().notNull(),
    ccAddresses: text("cc_addresses", { mode: "json" }).$type<string[]>().notNull(),
    replyTo: text("reply_to"),
    subject: text("subject"),
    date: text("date"),
    messageIdHeader: text("message_id_header"),
    inReplyTo: text("in_reply_to"),
    references: text("references", { mode: "json" }).$type<string[]>().notNull(),
    text: text("text"),
    html: text("html"),
    bodyKey: text("body_key"),
    attachments: text("attachments", { mode: "json" }).$type<InboundAttachment[]>().notNull(),
    size: integer("size").notNull(),
    rawKey: text("raw_key").notNull(),
    authentication: text("authentication", { mode: "json" }).$type<InboundAuthentication>().notNull(),
    autoSubmitted: text("auto_submitted"),
    // The message we sent that this mail answers (its In-Reply-To or References named our Message-ID), and its campaign.
    inReplyToMessageId: text("in_reply_to_message_id"),
    campaignId: text("campaign_id"),
    createdAt: createdAt(),
  },
  (t) => [
    index("inbound_emails_account_created").on(t.accountId, t.createdAt),
    index("inbound_emails_account_to").on(t.accountId, t.envelopeTo, t.createdAt),
    // The per-domain hourly cap counts over this.
    index("inbound_emails_domain_created").on(t.domainId, t.createdAt),
    // The retention purge's oldest-first pages.
    index("inbound_emails_created").on(t.createdAt),
  ],
);
