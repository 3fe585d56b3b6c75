import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { messageStreams } from "./sending";

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
