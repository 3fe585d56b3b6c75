import { index, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { createdAt } from "./util/columns";

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
