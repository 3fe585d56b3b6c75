// The plans' monthly verification credits (spec, Limits: the free plan gives 100 a month). The cron grants each
// account of a plan with credits its month's grant once, whenever it first runs in that calendar month (UTC); an
// account created mid-month gets it on the next run. The ledger's unique references make a repeated or concurrent
// run a no-op, so this task needs no lock.

import { type Ctx, batch } from "../../db/client";
import { and, asc, gt, inArray, sql } from "drizzle-orm";
import { config } from "../../config";
import { accounts } from "../../db/schema";
import { monthlyGrantedGuard, monthlyGrantStatements } from "./ledger";

/** Accounts per D1 batch (six statements each). */
const ACCOUNTS_PER_BATCH = 50;
/** Batches per cron run: the rest are granted on the next runs, 15 minutes apart. */
const MAX_BATCHES_PER_RUN = 40;

/** The calendar month (UTC) of `now`, as YYYY-MM. */
export const monthOf = (now: Date) => now.toISOString().slice(0, 7);

/** Grants this month's credits to every account of a plan that has some and has not had them yet. */
export async function grantMonthlyCredits(ctx: Ctx, now: Date): Promise<void> {
  const { env, db } = ctx;
  const amounts = config(env).monthlyVerifyCredits;
  const plans = Object.keys(amounts).filter((plan) => (amounts[plan] ?? 0) > 0);
  if (plans.length === 0) return;
  const month = monthOf(now);
  let after = "";
  for (let round = 0; round < MAX_BATCHES_PER_RUN; round++) {
    const due = await db
      .select({ id: accounts.id, plan: accounts.plan })
      .from(accounts)
      .where(and(inArray(accounts.plan, plans), gt(accounts.id, after), sql`NOT ${monthlyGrantedGuard(sql`${accounts.id}`, month)}`))
      .orderBy(asc(accounts.id))
      .limit(ACCOUNTS_PER_BATCH);
    if (due.length === 0) break;
    await batch(
      db,
      due.flatMap((account) => monthlyGrantStatements(db, account.id, month, amounts[account.plan]!)),
    );
    after = due.at(-1)!.id;
    if (due.length < ACCOUNTS_PER_BATCH) break;
  }
}
