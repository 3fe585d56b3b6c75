import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import type { Scope } from "../../access";
import { createdAt, updatedAt } from "./util/columns";

export const accounts = sqliteTable(
  "accounts",
  {
    id: text("id").primaryKey(),
    name: text("name").notNull(),
    plan: text("plan").notNull().default("free"),
    features: text("features", { mode: "json" }).$type<string[]>().notNull(),
    dailySendLimit: integer("daily_send_limit").notNull(),
    rateLimitPerMinute: integer("rate_limit_per_minute").notNull(),
    // Plan limit: completed AI draft generations per calendar month (UTC).
    aiGenerationsPerMonth: integer("ai_generations_per_month").notNull().default(0),
    // Signing into the dashboard with an API key once the account has active members: the owner's choice (docs/dashboard.md).
    keySignIn: integer("key_sign_in", { mode: "boolean" }).notNull().default(false),
    // The owner's choice that every member signs in with a second factor (TOTP), set up before anything else.
    requireTotp: integer("require_totp", { mode: "boolean" }).notNull().default(false),
    // The binding of the account database that holds this account's rows (src/db/client.ts). Accounts made before
    // account databases existed stay in `DB` until the operator moves them.
    database: text("database").notNull().default("DB"),
    // While the operator moves the account (src/domain/accounts/move.ts): the database it is being copied to. Its writes
    // are refused until the move ends.
    movingTo: text("moving_to"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("accounts_database").on(t.database)],
);

// The account that owns the row, as a foreign key: every area's tables use it, so it is exported beside the table.
export const ownerAccount = () =>
  text("account_id")
    .notNull()
    .references(() => accounts.id);

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
