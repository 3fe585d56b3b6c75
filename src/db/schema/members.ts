import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { roles } from "../../access";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

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
