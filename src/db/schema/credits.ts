import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

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

/**
 * An account's cached balances, one row per account, beside its ledger: every change to them is written together
 * with a credit_ledger row in one D1 batch, so a charge and what it pays for stay one transaction in the account's
 * database and never touch the shared `accounts` table.
 */
export const accountBalances = sqliteTable("account_balances", {
  accountId: ownerAccount().primaryKey(),
  sendBalance: integer("send_balance").notNull().default(0),
  // Held for scheduled and sending campaigns: not available to other sends.
  sendReserved: integer("send_reserved").notNull().default(0),
  verifyBalance: integer("verify_balance").notNull().default(0),
  updatedAt: updatedAt(),
});
