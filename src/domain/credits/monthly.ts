// The plans' monthly verification credits (spec, Limits: the free plan gives 100 a month). The cron grants each
// account of a plan with credits its month's grant once, whenever it first runs in that calendar month (UTC); an
// account created mid-month gets it on the next run. The ledger's unique references make a repeated or concurrent
// run a no-op, so this task needs no lock.
//
// The grant is in each account's database, its plan in the directory (`DB`). Each account database is visited in
// turn: its part finds the accounts there without this month's grant whose directory copy names a plan with credits
// (one query, which finds none once the month's grants are done, so later runs cost one read per database); the
// shared part confirms each one's plan and database from the directory before it is granted.

import { type AccountDb, type Ctx, type SharedDb, accountDatabases, batch, databaseNameOf, inJsonArray } from "../../db/client";
import { and, asc, eq, gt, inArray, isNull, sql } from "drizzle-orm";
import { config } from "../../config";
import { accounts } from "../../db/schema";
import { monthlyGrantedGuard, monthlyGrantStatements } from "./ledger";

/** Accounts per D1 batch (six statements each). */
const ACCOUNTS_PER_BATCH = 50;
/** Batches per account database and cron run: the rest are granted on the next runs, 15 minutes apart. */
const MAX_BATCHES_PER_RUN = 40;

/** The calendar month (UTC) of `now`, as YYYY-MM. */
export const monthOf = (now: Date) => now.toISOString().slice(0, 7);

/** Grants this month's credits to every account of a plan that has some and has not had them yet. */
export async function grantMonthlyCredits(ctx: Ctx, now: Date): Promise<void> {
  const { env, shared } = ctx;
  const amounts = config(env).monthlyVerifyCredits;
  const plans = Object.keys(amounts).filter((plan) => (amounts[plan] ?? 0) > 0);
  if (plans.length === 0) return;
  for (const db of accountDatabases(env)) await grantInDatabase(shared, db, amounts, plans, monthOf(now));
}

async function grantInDatabase(shared: SharedDb, db: AccountDb, amounts: Record<string, number>, plans: string[], month: string) {
  const database = databaseNameOf(db);
  let after = "";
  for (let round = 0; round < MAX_BATCHES_PER_RUN; round++) {
    // In `DB` the accounts table is the directory itself: `database` picks the accounts whose rows are there.
    const due = await db
      .select({ id: accounts.id })
      .from(accounts)
      .where(
        and(
          eq(accounts.database, database),
          inArray(accounts.plan, plans),
          gt(accounts.id, after),
          sql`NOT ${monthlyGrantedGuard(sql`${accounts.id}`, month)}`,
        ),
      )
      .orderBy(asc(accounts.id))
      .limit(ACCOUNTS_PER_BATCH);
    if (due.length === 0) break;
    const directory = await shared
      .select({ id: accounts.id, plan: accounts.plan })
      .from(accounts)
      .where(
        and(
          inJsonArray(
            accounts.id,
            due.map((account) => account.id),
          ),
          eq(accounts.database, database),
          // One being moved gets its grant where it lands, on a later run.
          isNull(accounts.movingTo),
        ),
      );
    const granted = directory.filter((account) => (amounts[account.plan] ?? 0) > 0);
    if (granted.length > 0) {
      await batch(
        db,
        granted.flatMap((account) => monthlyGrantStatements(db, account.id, month, amounts[account.plan]!)),
      );
    }
    after = due.at(-1)!.id;
    if (due.length < ACCOUNTS_PER_BATCH) break;
  }
}
