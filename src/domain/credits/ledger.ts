import { eq, sql, type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { accounts } from "../../db/schema";
import { newId } from "../../lib/ids";

/**
 * The credits ledger: the only code that changes an account's balances. Every change is a credit_ledger row
 * written in the same D1 batch (one transaction) as the balance update, and the ledger row comes first so its
 * unique (balance, kind, reference_id) index makes a retried charge or refund a no-op instead of a second one.
 */
export type BalanceKind = "send" | "verify";

const balanceColumn = { send: "send_balance", verify: "verify_balance" } as const;
// What can be spent now: sending credits held for scheduled campaigns are not available to other sends.
const availableExpr = { send: "send_balance - send_reserved", verify: "verify_balance" } as const;

const ledgerColumns = "id, account_id, balance, kind, amount, reference_id, note, balance_after";
const entryExists = "EXISTS (SELECT 1 FROM credit_ledger WHERE balance = ?1 AND kind = ?2 AND reference_id = ?3)";

export type LedgerChange = { accountId: string; balance: BalanceKind; amount: number; referenceId: string; note?: string };

export function topUpStatements(db: D1Database, accountId: string, balance: BalanceKind, amount: number, note: string | null) {
  const column = balanceColumn[balance];
  return [
    db
      .prepare(
        `INSERT INTO credit_ledger (${ledgerColumns}) SELECT ?1, id, ?2, 'top_up', ?3, NULL, ?4, ${column} + ?3 FROM accounts WHERE id = ?5`,
      )
      .bind(newId("led"), balance, amount, note, accountId),
    db
      .prepare(`UPDATE accounts SET ${column} = ${column} + ?1, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?2`)
      .bind(amount, accountId),
  ];
}

/**
 * Charges `amount` only when that much is available. Run these in the caller's batch; statements that must only
 * happen when the charge went through can be guarded with `chargedGuard`. The batch fails with a UNIQUE
 * constraint error if the reference was already charged.
 */
export function chargeStatements(db: D1Database, change: LedgerChange) {
  const column = balanceColumn[change.balance];
  return [
    db
      .prepare(
        `INSERT INTO credit_ledger (${ledgerColumns})
         SELECT ?1, id, ?2, 'charge', -?3, ?4, ?5, ${column} - ?3 FROM accounts WHERE id = ?6 AND ${availableExpr[change.balance]} >= ?3`,
      )
      .bind(newId("led"), change.balance, change.amount, change.referenceId, change.note ?? null, change.accountId),
    db
      .prepare(
        `UPDATE accounts SET ${column} = ${column} - ?4, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
         WHERE id = ?5 AND ${entryExists}`,
      )
      .bind(change.balance, "charge", change.referenceId, change.amount, change.accountId),
  ];
}

/** SQL condition true once `referenceId` has been charged, in this batch or before: guards what the charge pays for. */
export function chargedGuard(balance: BalanceKind, referenceId: string): SQL {
  return sql`EXISTS (SELECT 1 FROM credit_ledger WHERE balance = ${balance} AND kind = 'charge' AND reference_id = ${referenceId})`;
}

/** SQL condition true once `referenceId` has been refunded, in this batch or before. */
export function refundedGuard(balance: BalanceKind, referenceId: string): SQL {
  return sql`EXISTS (SELECT 1 FROM credit_ledger WHERE balance = ${balance} AND kind = 'refund' AND reference_id = ${referenceId})`;
}

/** What the account can spend now from this balance (0 for an unknown account). */
export async function availableCredits(d1: D1Database, accountId: string, balance: BalanceKind): Promise<number> {
  const row = await drizzle(d1)
    .select({ available: sql<number>`${sql.raw(availableExpr[balance])}` })
    .from(accounts)
    .where(eq(accounts.id, accountId))
    .get();
  return row?.available ?? 0;
}

/** Gives credits back; idempotent per reference (a second refund for the same reference changes nothing). */
export function refundStatements(db: D1Database, change: LedgerChange) {
  const column = balanceColumn[change.balance];
  const entryId = newId("led");
  return [
    db
      .prepare(
        `INSERT OR IGNORE INTO credit_ledger (${ledgerColumns})
         SELECT ?1, id, ?2, 'refund', ?3, ?4, ?5, ${column} + ?3 FROM accounts WHERE id = ?6`,
      )
      .bind(entryId, change.balance, change.amount, change.referenceId, change.note ?? null, change.accountId),
    db
      .prepare(
        `UPDATE accounts SET ${column} = ${column} + ?2, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
         WHERE id = ?3 AND EXISTS (SELECT 1 FROM credit_ledger WHERE id = ?1)`,
      )
      .bind(entryId, change.amount, change.accountId),
  ];
}

/** Holds sending credits (campaigns reserve at send time); fails when that much is not available. */
export function reserveStatements(db: D1Database, change: Omit<LedgerChange, "balance">) {
  return [
    db
      .prepare(
        `INSERT INTO credit_ledger (${ledgerColumns})
         SELECT ?1, id, 'send', 'reservation', ?2, ?3, ?4, send_balance FROM accounts WHERE id = ?5 AND send_balance - send_reserved >= ?2`,
      )
      .bind(newId("led"), change.amount, change.referenceId, change.note ?? null, change.accountId),
    db
      .prepare(
        `UPDATE accounts SET send_reserved = send_reserved + ?4, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
         WHERE id = ?5 AND ${entryExists}`,
      )
      .bind("send", "reservation", change.referenceId, change.amount, change.accountId),
  ];
}

/** Returns reserved credits that will not be spent (a cancelled or finished campaign); once per reference. */
export function releaseStatements(db: D1Database, change: Omit<LedgerChange, "balance">) {
  const entryId = newId("led");
  return [
    db
      .prepare(
        `INSERT OR IGNORE INTO credit_ledger (${ledgerColumns})
         SELECT ?1, id, 'send', 'release', -?2, ?3, ?4, send_balance FROM accounts WHERE id = ?5`,
      )
      .bind(entryId, change.amount, change.referenceId, change.note ?? null, change.accountId),
    db
      .prepare(
        `UPDATE accounts SET send_reserved = MAX(0, send_reserved - ?2), updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
         WHERE id = ?3 AND EXISTS (SELECT 1 FROM credit_ledger WHERE id = ?1)`,
      )
      .bind(entryId, change.amount, change.accountId),
  ];
}


/** The first statement of charge/reserve writes the ledger row; it wrote nothing when the balance was short. */
export const wasApplied = (ledgerInsert: D1Result) => ledgerInsert.meta.changes === 1;
