import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

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
