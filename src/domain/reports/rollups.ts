// Daily rollups (daily_stats): the rows reports read. A counted fact (a recipient sent, bounced, opened, clicked,
// unsubscribed…) adds to one row keyed by account × UTC day × sending domain × mailbox provider × campaign, in the
// same D1 batch as the write that records the fact, so a report never scans messages or events and a rolled-back
// batch never leaves a count behind.

import { sql, type SQL } from "drizzle-orm";
import { statement } from "../../db/client";
import type { providers } from "../../db/schema";

export type Provider = (typeof providers)[number];

export const rollupCounters = [
  "sent",
  "delivered",
  "hard_bounces",
  "soft_bounces",
  "opens",
  "unique_opens",
  "machine_opens",
  "clicks",
  "unique_clicks",
  "unsubscribes",
  "complaints",
  "failed",
  "suppressed",
] as const;
export type RollupCounter = (typeof rollupCounters)[number];
export type RollupCounts = Partial<Record<RollupCounter, number>>;

export type RollupKey = {
  accountId: string;
  /** The sending domain's name (the From address's domain). */
  domain: string;
  /** Null (not known yet) is counted as `other`. */
  provider: Provider | null | undefined;
  campaignId: string | null | undefined;
};

/** The sending domain of a From address, lower-cased: the rollups' `domain`. */
export function sendingDomain(fromAddress: string): string {
  return fromAddress.slice(fromAddress.lastIndexOf("@") + 1).toLowerCase();
}

/**
 * Adds `counts` to today's (UTC) row of `key`. With `guard`, the row changes only when the condition holds at that
 * point of the batch: e.g. `unique_opens` only while no `opened` event exists yet, placed before the statement that
 * writes it. Returns no statement when every count is zero.
 */
export function rollupStatements(db: D1Database, key: RollupKey, counts: RollupCounts, guard?: SQL): D1PreparedStatement[] {
  const columns = rollupCounters.filter((column) => (counts[column] ?? 0) !== 0);
  if (columns.length === 0) return [];
  // Column names come from the fixed list above, never from input.
  const names = sql.raw(columns.join(", "));
  const values = sql.join(
    columns.map((column) => sql`${counts[column]!}`),
    sql`, `,
  );
  const updates = sql.raw(columns.map((column) => `${column} = ${column} + excluded.${column}`).join(", "));
  return [
    statement(
      db,
      sql`INSERT INTO daily_stats (account_id, day, domain, provider, campaign_id, ${names})
        SELECT ${key.accountId}, strftime('%Y-%m-%d', 'now'), ${key.domain}, ${key.provider ?? "other"}, ${key.campaignId ?? ""}, ${values}
        WHERE ${guard ?? sql`1`}
        ON CONFLICT (account_id, day, domain, provider, campaign_id) DO UPDATE SET ${updates}`,
    ),
  ];
}
