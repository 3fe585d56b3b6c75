// Daily rollups (daily_stats): the rows reports read. A counted fact (a recipient sent, bounced, opened, clicked,
// unsubscribed…) adds to one row keyed by account × UTC day × sending domain × mailbox provider × campaign × stream, in the
// same D1 batch as the write that records the fact, so a report never scans messages or events and a rolled-back
// batch never leaves a count behind.

import { sql, type SQL } from "drizzle-orm";
import { sqlToday, statement, type AccountDb } from "../../db/client";
import type { messageStreams, providers } from "../../db/schema";

type MessageStream = (typeof messageStreams)[number];

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
  "replies",
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
  /** The message's stream: transactional and broadcast mail are reported apart. */
  stream: MessageStream;
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
export function rollupStatements(db: AccountDb, key: RollupKey, counts: RollupCounts, guard?: SQL): D1PreparedStatement[] {
  const columns = countedColumns(counts);
  if (columns.length === 0) return [];
  const values = sql.join(
    columns.map((column) => sql`${counts[column]!}`),
    sql`, `,
  );
  return [
    statement(
      db,
      sql`INSERT INTO daily_stats (account_id, day, domain, provider, campaign_id, stream, ${columnList(columns)})
        SELECT ${key.accountId}, ${sqlToday}, ${key.domain}, ${key.provider ?? "other"}, ${key.campaignId ?? ""}, ${key.stream}, ${values}
        WHERE ${guard ?? sql`1`}
        ${upsert(columns)}`,
    ),
  ];
}

/** The recipients of one message a rollup counts: those among `emails` whose status is one of `statuses`. */
export type CountedRecipients = { messageId: string; emails: readonly string[]; statuses: readonly string[] };

/**
 * Adds `counts` once per recipient of `recipients` at this point of the batch, to the row of each recipient's stored
 * provider. Placed before the statement that moves them out of `statuses`, it makes an outcome idempotent per
 * recipient: recorded twice, the second time finds none of them left to count.
 */
export function recipientRollupStatements(
  db: AccountDb,
  key: Omit<RollupKey, "provider">,
  counts: RollupCounts,
  recipients: CountedRecipients,
): D1PreparedStatement[] {
  const columns = countedColumns(counts);
  if (columns.length === 0 || recipients.emails.length === 0) return [];
  const provider = sql`COALESCE(provider, 'other')`;
  const values = sql.join(
    columns.map((column) => sql`${counts[column]!} * COUNT(*)`),
    sql`, `,
  );
  return [
    statement(
      db,
      sql`INSERT INTO daily_stats (account_id, day, domain, provider, campaign_id, stream, ${columnList(columns)})
        SELECT ${key.accountId}, ${sqlToday}, ${key.domain}, ${provider}, ${key.campaignId ?? ""}, ${key.stream}, ${values}
        FROM message_recipients
        WHERE message_id = ${recipients.messageId}
          AND email IN (SELECT value FROM json_each(${JSON.stringify(recipients.emails)}))
          AND status IN (SELECT value FROM json_each(${JSON.stringify(recipients.statuses)}))
        GROUP BY ${provider}
        ${upsert(columns)}`,
    ),
  ];
}

/**
 * Stores each recipient's mailbox provider unless it has one: the first outcome decides, so a recipient deferred
 * then sent is counted under one provider. `providers` is keyed by email.
 */
export function recipientProviderStatements(db: AccountDb, messageId: string, providers: ReadonlyMap<string, Provider>): D1PreparedStatement[] {
  if (providers.size === 0) return [];
  const byEmail = JSON.stringify(Object.fromEntries(providers));
  return [
    statement(
      db,
      sql`UPDATE message_recipients SET provider = (SELECT value FROM json_each(${byEmail}) WHERE key = message_recipients.email)
        WHERE message_id = ${messageId} AND provider IS NULL AND email IN (SELECT key FROM json_each(${byEmail}))`,
    ),
  ];
}

const countedColumns = (counts: RollupCounts) => rollupCounters.filter((column) => (counts[column] ?? 0) !== 0);

// Column names come from the fixed list of counters, never from input.
const columnList = (columns: readonly RollupCounter[]) => sql.raw(columns.join(", "));

const upsert = (columns: readonly RollupCounter[]) =>
  sql.raw(
    `ON CONFLICT (account_id, day, domain, provider, campaign_id, stream) DO UPDATE SET ${columns.map((column) => `${column} = ${column} + excluded.${column}`).join(", ")}`,
  );
