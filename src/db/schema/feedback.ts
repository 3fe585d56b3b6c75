import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { createdAt } from "./util/columns";

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
