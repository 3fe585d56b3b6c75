import { index, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { createdAt } from "./util/columns";

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
