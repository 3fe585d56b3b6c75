import { index, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { createdAt } from "./util/columns";

export const suppressionScopes = ["all", "broadcast", "transactional"] as const;

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
