import { eq, sql, type SQL } from "drizzle-orm";
import { sqlNow, statement, type AccountDb } from "../../db/client";
import { accountBalances, type creditLedger } from "../../db/schema";
import { newId } from "../../lib/ids";

/**
 * The credits ledger: the only code that changes an account's balances (account_balances, in the account's own
 * database beside the ledger, never the shared accounts table). Every change is a credit_ledger row written in the
 * same D1 batch (one transaction) as the balance update, and the ledger row comes first so its
 * unique (balance, kind, reference_id) index makes a retried charge or refund a no-op instead of a second one.
 */
export type BalanceKind = "send" | "verify";

const balanceColumn = { send: sql.raw("send_balance"), verify: sql.raw("verify_balance") } as const;
// What can be spent now: sending credits held for scheduled campaigns are not available to other sends.
const availableExpr = { send: sql.raw("(send_balance - send_reserved)"), verify: sql.raw("verify_balance") } as const;

const insertEntry = sql.raw("INSERT INTO credit_ledger (id, account_id, balance, kind, amount, reference_id, note, balance_after)");
const insertEntryOnce = sql.raw("INSERT OR IGNORE INTO credit_ledger (id, account_id, balance, kind, amount, reference_id, note, balance_after)");

type EntryKind = (typeof creditLedger.$inferSelect)["kind"];
const entryExists = (balance: BalanceKind, kind: EntryKind, referenceId: string | SQL) =>
  sql`EXISTS (SELECT 1 FROM credit_ledger WHERE balance = ${balance} AND kind = ${kind} AND reference_id = ${referenceId})`;

type UsageColumn =
  | "send_charged"
  | "send_refunded"
  | "send_reserved"
  | "send_released"
  | "verify_charged"
  | "verify_refunded"
  | "verify_granted"
  | "verify_expired";

/**
 * Adds the entry `entryId` to its account's day of usage_daily (GET /usage). Read from the entry row itself: only an
 * entry this batch wrote (its id is new) is counted, as much as it moved and on the day the ledger dates it, so usage
 * always matches the ledger.
 */
function usageStatement(db: AccountDb, entryId: string, column: UsageColumn) {
  const counter = sql.raw(column);
  return statement(
    db,
    sql`INSERT INTO usage_daily (account_id, day, ${counter})
      SELECT account_id, substr(created_at, 1, 10), ABS(amount) FROM credit_ledger WHERE id = ${entryId}
      ON CONFLICT (account_id, day) DO UPDATE SET ${counter} = ${counter} + excluded.${counter}`,
  );
}

export type LedgerChange = { accountId: string; balance: BalanceKind; amount: number; referenceId: string; note?: string };

export function topUpStatements(db: AccountDb, accountId: string, balance: BalanceKind, amount: number, note: string | null) {
  const column = balanceColumn[balance];
  return [
    statement(
      db,
      sql`${insertEntry} SELECT ${newId("led")}, account_id, ${balance}, 'top_up', ${amount}, NULL, ${note}, ${column} + ${amount} FROM account_balances WHERE account_id = ${accountId}`,
    ),
    statement(db, sql`UPDATE account_balances SET ${column} = ${column} + ${amount}, updated_at = ${sqlNow} WHERE account_id = ${accountId}`),
  ];
}

/**
 * Charges `amount` only when that much is available. Run these in the caller's batch; statements that must only
 * happen when the charge went through can be guarded with `chargedGuard`. The batch fails with a UNIQUE
 * constraint error if the reference was already charged. Several charges that must all go through or none (a batch
 * of sends) give the first `available` (their total) and the others `when` (the first one's `chargedGuard`).
 */
export function chargeStatements(db: AccountDb, change: LedgerChange, options: { available?: number; when?: SQL } = {}) {
  const column = balanceColumn[change.balance];
  const entryId = newId("led");
  return [
    statement(
      db,
      sql`${insertEntry} SELECT ${entryId}, account_id, ${change.balance}, 'charge', ${-change.amount}, ${change.referenceId}, ${change.note ?? null},
        ${column} - ${change.amount} FROM account_balances
        WHERE account_id = ${change.accountId} AND ${availableExpr[change.balance]} >= ${options.available ?? change.amount}${holding(options.when)}`,
    ),
    statement(
      db,
      sql`UPDATE account_balances SET ${column} = ${column} - ${change.amount}, updated_at = ${sqlNow}
        WHERE account_id = ${change.accountId} AND ${entryExists(change.balance, "charge", change.referenceId)}`,
    ),
    usageStatement(db, entryId, change.balance === "send" ? "send_charged" : "verify_charged"),
  ];
}

/** SQL condition true once `referenceId` has been charged, in this batch or before: guards what the charge pays for. */
export function chargedGuard(balance: BalanceKind, referenceId: string): SQL {
  return entryExists(balance, "charge", referenceId);
}

/** SQL condition true once `referenceId` has been refunded, in this batch or before. */
export function refundedGuard(balance: BalanceKind, referenceId: string): SQL {
  return entryExists(balance, "refund", referenceId);
}

/** What the account can spend now from this balance (0 for an unknown account). */
export async function availableCredits(db: AccountDb, accountId: string, balance: BalanceKind): Promise<number> {
  const row = await db
    .select({ available: sql<number>`${availableExpr[balance]}` })
    .from(accountBalances)
    .where(eq(accountBalances.accountId, accountId))
    .get();
  return row?.available ?? 0;
}

/**
 * Gives credits back; idempotent per reference (a second refund for the same reference changes nothing); only if
 * `when` holds (e.g. `chargedGuard`: never for a credit that was not charged).
 */
export function refundStatements(db: AccountDb, change: LedgerChange, when?: SQL) {
  const column = balanceColumn[change.balance];
  const entryId = newId("led");
  return [
    statement(
      db,
      sql`${insertEntryOnce} SELECT ${entryId}, account_id, ${change.balance}, 'refund', ${change.amount}, ${change.referenceId}, ${change.note ?? null},
        ${column} + ${change.amount} FROM account_balances WHERE account_id = ${change.accountId}${holding(when)}`,
    ),
    statement(
      db,
      sql`UPDATE account_balances SET ${column} = ${column} + ${change.amount}, updated_at = ${sqlNow}
        WHERE account_id = ${change.accountId} AND EXISTS (SELECT 1 FROM credit_ledger WHERE id = ${entryId})`,
    ),
    usageStatement(db, entryId, change.balance === "send" ? "send_refunded" : "verify_refunded"),
  ];
}

/** Holds sending credits (campaigns reserve at send time); fails when that much is not available. */
export function reserveStatements(db: AccountDb, change: Omit<LedgerChange, "balance">) {
  const entryId = newId("led");
  return [
    statement(
      db,
      sql`${insertEntry} SELECT ${entryId}, account_id, 'send', 'reservation', ${change.amount}, ${change.referenceId}, ${change.note ?? null}, send_balance
        FROM account_balances WHERE account_id = ${change.accountId} AND ${availableExpr.send} >= ${change.amount}`,
    ),
    statement(
      db,
      sql`UPDATE account_balances SET send_reserved = send_reserved + ${change.amount}, updated_at = ${sqlNow}
        WHERE account_id = ${change.accountId} AND ${entryExists("send", "reservation", change.referenceId)}`,
    ),
    usageStatement(db, entryId, "send_reserved"),
  ];
}

/** A caller's extra condition on a reservation change, evaluated in its batch (e.g. the holding campaign is not settled yet). */
const holding = (when: SQL | undefined) => (when === undefined ? sql`` : sql` AND ${when}`);

/** Returns reserved credits that will not be spent (a cancelled or finished campaign); once per reference; only if `when` holds. */
export function releaseStatements(db: AccountDb, change: Omit<LedgerChange, "balance">, when?: SQL) {
  const entryId = newId("led");
  return [
    statement(
      db,
      sql`${insertEntryOnce} SELECT ${entryId}, account_id, 'send', 'release', ${-change.amount}, ${change.referenceId}, ${change.note ?? null}, send_balance
        FROM account_balances WHERE account_id = ${change.accountId}${holding(when)}`,
    ),
    statement(
      db,
      sql`UPDATE account_balances SET send_reserved = MAX(0, send_reserved - ${change.amount}), updated_at = ${sqlNow}
        WHERE account_id = ${change.accountId} AND EXISTS (SELECT 1 FROM credit_ledger WHERE id = ${entryId})`,
    ),
    usageStatement(db, entryId, "send_released"),
  ];
}

/**
 * Spends reserved sending credits (a campaign recipient that was sent): the balance and the reserved amount both
 * drop by `amount`, so `available` does not change. Once per reference, like a refund; only if `when` holds.
 */
export function chargeFromReservationStatements(db: AccountDb, change: Omit<LedgerChange, "balance">, when?: SQL) {
  const entryId = newId("led");
  return [
    statement(
      db,
      sql`${insertEntryOnce} SELECT ${entryId}, account_id, 'send', 'charge', ${-change.amount}, ${change.referenceId}, ${change.note ?? null}, send_balance - ${change.amount}
        FROM account_balances WHERE account_id = ${change.accountId}${holding(when)}`,
    ),
    statement(
      db,
      sql`UPDATE account_balances SET send_balance = send_balance - ${change.amount}, send_reserved = MAX(0, send_reserved - ${change.amount}), updated_at = ${sqlNow}
        WHERE account_id = ${change.accountId} AND EXISTS (SELECT 1 FROM credit_ledger WHERE id = ${entryId})`,
    ),
    usageStatement(db, entryId, "send_charged"),
  ];
}

/** The first statement of charge/reserve writes the ledger row; it wrote nothing when the balance was short. */
export const wasApplied = (ledgerInsert: D1Result) => ledgerInsert.meta.changes === 1;

/** The ledger reference of an account's monthly verification grant: its grants sort together, by month. */
const monthlyGrantReference = (accountId: string | SQL, month: string) => sql`${"monthly_verify:"} || ${accountId} || ${`:${month}`}`;

/** SQL condition true once the account (an id, or a column) has had its grant for `month`. */
export const monthlyGrantedGuard = (accountId: string | SQL, month: string) =>
  entryExists("verify", "top_up", monthlyGrantReference(accountId, month));

/**
 * A plan's monthly verification credits for `month` (YYYY-MM), in one batch: first last grant's unused part expires
 * (an `adjustment` referenced like that grant), then `amount` is granted (a `top_up` referenced by the month). Free
 * credits are spent first, so what is unused is the last grant less the verifications charged (net of refunds)
 * since, and never more than the balance: bought credits are never taken. Both entries are unique per reference and
 * each balance update only follows the entry this batch wrote, so concurrent or repeated runs grant once.
 */
export function monthlyGrantStatements(db: AccountDb, accountId: string, month: string, amount: number) {
  const reference = monthlyGrantReference(accountId, month);
  const firstReference = monthlyGrantReference(accountId, "");
  const expiryId = newId("led");
  const grantId = newId("led");
  const notGrantedYet = sql`NOT ${monthlyGrantedGuard(accountId, month)}`;
  // The latest earlier grant and what is left of it: its amount plus the verify charges (negative) and refunds since.
  const unused = sql`SELECT last_grant.reference_id AS reference_id, MIN(balances.verify_balance, MAX(0, last_grant.amount + COALESCE((
        SELECT SUM(spent.amount) FROM credit_ledger AS spent WHERE spent.account_id = ${accountId} AND spent.balance = 'verify'
          AND spent.kind IN ('charge', 'refund') AND spent.created_at >= last_grant.created_at), 0))) AS credits, balances.verify_balance AS balance
      FROM account_balances AS balances, (SELECT reference_id, amount, created_at FROM credit_ledger WHERE balance = 'verify' AND kind = 'top_up'
          AND reference_id >= ${firstReference} AND reference_id < ${reference} ORDER BY reference_id DESC LIMIT 1) AS last_grant
      WHERE balances.account_id = ${accountId}`;
  return [
    statement(
      db,
      sql`${insertEntryOnce} SELECT ${expiryId}, ${accountId}, 'verify', 'adjustment', -credits, reference_id, 'unused monthly credits expired', balance - credits
        FROM (${unused}) WHERE credits > 0 AND ${notGrantedYet}`,
    ),
    statement(
      db,
      sql`UPDATE account_balances SET verify_balance = verify_balance + (SELECT amount FROM credit_ledger WHERE id = ${expiryId}), updated_at = ${sqlNow}
        WHERE account_id = ${accountId} AND EXISTS (SELECT 1 FROM credit_ledger WHERE id = ${expiryId})`,
    ),
    usageStatement(db, expiryId, "verify_expired"),
    statement(
      db,
      sql`${insertEntryOnce} SELECT ${grantId}, account_id, 'verify', 'top_up', ${amount}, ${reference}, ${`monthly credits ${month}`}, verify_balance + ${amount}
        FROM account_balances WHERE account_id = ${accountId}`,
    ),
    statement(
      db,
      sql`UPDATE account_balances SET verify_balance = verify_balance + ${amount}, updated_at = ${sqlNow}
        WHERE account_id = ${accountId} AND EXISTS (SELECT 1 FROM credit_ledger WHERE id = ${grantId})`,
    ),
    usageStatement(db, grantId, "verify_granted"),
  ];
}
