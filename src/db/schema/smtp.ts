import { index, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt } from "./util/columns";

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
