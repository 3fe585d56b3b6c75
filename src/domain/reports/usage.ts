// Daily usage (usage_daily): what GET /usage reads. The credit columns are written by the ledger itself (one
// statement per entry, src/domain/credits/ledger.ts); API calls by the per-key RateLimiter object's flush; addresses
// verified where verification results are recorded. Emails sent come from the delivery rollups (daily_stats).

import { sql, type SQL } from "drizzle-orm";
import { sqlToday, statement, type Db } from "../../db/client";

export type UsageCounts = { api_calls?: number; verifications?: number };

/**
 * Adds `counts` to the account's row of `day` (UTC, default today). With `guard`, nothing is added unless it holds
 * at that point of the batch. Returns no statement when every count is zero.
 */
export function usageStatements(db: Db, accountId: string, counts: UsageCounts, options: { day?: string; guard?: SQL } = {}) {
  const apiCalls = counts.api_calls ?? 0;
  const verifications = counts.verifications ?? 0;
  if (apiCalls === 0 && verifications === 0) return [];
  return [
    statement(
      db,
      sql`INSERT INTO usage_daily (account_id, day, api_calls, verifications)
        SELECT ${accountId}, ${options.day ?? sqlToday}, ${apiCalls}, ${verifications}
        WHERE ${options.guard ?? sql`1`}
        ON CONFLICT (account_id, day) DO UPDATE SET api_calls = api_calls + excluded.api_calls, verifications = verifications + excluded.verifications`,
    ),
  ];
}
