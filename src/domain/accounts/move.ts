// Moving an account's rows from one account database to another (POST /admin/v1/accounts/{id}/move). The directory
// row in `DB` says which database is the truth; a move is a sequence of steps each of which leaves that true:
//
//   1. pause: `accounts.moving_to` is set (a lease: `updated_at` is its heartbeat). Writes of the account are refused
//      from then on (503 / SMTP 451, `isPausedForMove`); the move then waits out the isolates' key and credential
//      caches, which may hold the row as it was before the pause.
//   2. work in flight (messages not final, campaigns sending, jobs running, webhook deliveries pending, ...) would be
//      stranded in the source by a copy: the move is refused instead, naming it, and the pause is lifted.
//   3. every database but the source is cleared of the account's rows (a partial copy of an interrupted move, or what
//      an interrupted move left behind after its flip), then the rows are copied, table by table, in bounded pages.
//   4. counts per table in the target must equal the source's; otherwise the copy is cleared and the pause lifted.
//   5. flip: `database` becomes the target and `moving_to` is cleared, in one compare-and-set on the directory row.
//   6. the source's rows are deleted, children first, in bounded batches.
//
// Before the flip the source is the truth and a retried move starts by clearing the target; after it the target is
// the truth and a retried move (or one to the same database) deletes what is left in the source. A crash leaves the
// account paused until its lease runs out and the operator retries.

import { and, eq, is, isNotNull, isNull, lte, or, sql, type SQL } from "drizzle-orm";
import { getTableConfig, SQLiteTable } from "drizzle-orm/sqlite-core";
import {
  accountDatabaseNames,
  batch,
  databaseHandle,
  inJsonArray,
  isAccountDatabase,
  placementCacheTtlMs,
  statement,
  type AccountDb,
  type DatabaseName,
  type SharedDb,
} from "../../db/client";
import * as schema from "../../db/schema";
import { accounts, domains } from "../../db/schema";
import { nowIso } from "../../lib/ids";
import { credentialCacheTtlMs } from "../smtp/credentials";
import { directoryCopyStatement, findAccount, forgetCachedAccount, type Account } from "./accounts";
import { apiKeyCacheTtlMs } from "./api-keys";

/** How long a move's lease on the account lasts without a heartbeat; a move renews it every 10 s while it works. */
export const moveLeaseMs = 60_000;

/**
 * Long enough for every isolate's cached key or credential (and the account row it holds), and its cached placement
 * of the account (what token lookups check, `placementOf`), to have been read again.
 */
export const moveSettleMs = Math.max(apiKeyCacheTtlMs, credentialCacheTtlMs, placementCacheTtlMs) + 1_000;

/** Rows read from the source per page: each page is one read and one batch of inserts. */
const pageRows = 200;
/** Rows one DELETE removes: a clean-up is a sequence of such statements, each its own round trip. */
const deleteRows = 1_000;
/** D1's limit of bound parameters in one statement. */
const maxParameters = 100;

// The tables that stay in `DB` whatever database an account's rows are in: the directory (accounts, keys, SMTP
// credentials, domains, members and their sessions) and what no account owns.
const directoryTables = new Set([
  "accounts",
  "api_keys",
  "dashboard_sessions",
  "smtp_credentials",
  "domains",
  "members",
  "sign_in_tokens",
  "member_sessions",
  "dns_cache",
]);

// Account tables without `account_id`: their rows belong to a parent row's account. `warmup_usage`'s parent is a
// domain, which is in the directory: its ids are read from `DB`.
const childTables: Record<string, { column: string; parent: string }> = {
  automation_run_steps: { column: "run_id", parent: "automation_runs" },
  campaign_links: { column: "campaign_id", parent: "campaigns" },
  campaign_purged_messages: { column: "campaign_id", parent: "campaigns" },
  contact_import_errors: { column: "import_id", parent: "contact_imports" },
  list_members: { column: "list_id", parent: "lists" },
  verification_results: { column: "job_id", parent: "verification_jobs" },
  warmup_usage: { column: "domain_id", parent: "domains" },
};

type MovedTable = { name: string; child?: { column: string; parent: string } };

let moved: MovedTable[] | undefined;

/**
 * The tables a move copies, in an order that inserts a row after the rows it references (parents before children,
 * `messages` before `message_recipients`). Every table of the schema must be one of: the directory, a table with
 * `account_id`, or a child listed above; a new table that is none of them stops every move until it is classified.
 */
export function movedTables(): MovedTable[] {
  if (moved) return moved;
  const tables = Object.values(schema as Record<string, unknown>)
    .filter((value): value is SQLiteTable => is(value, SQLiteTable))
    .map((table) => getTableConfig(table));
  const found = new Map<string, MovedTable & { references: string[] }>();
  for (const table of tables) {
    if (directoryTables.has(table.name)) continue;
    const child = childTables[table.name];
    if (!child && !table.columns.some((column) => column.name === "account_id")) {
      throw new Error(`${table.name} has no account_id and is not classified in src/domain/accounts/move.ts: a move would leave it behind`);
    }
    const references = table.foreignKeys.map((key) => getTableConfig(key.reference().foreignTable).name);
    found.set(table.name, { name: table.name, child, references: child ? [...references, child.parent] : references });
  }
  const ordered: MovedTable[] = [];
  const visit = (name: string) => {
    const table = found.get(name);
    if (!table || ordered.some((done) => done.name === name)) return;
    for (const reference of table.references) visit(reference);
    ordered.push({ name: table.name, child: table.child });
  };
  for (const name of [...found.keys()].sort()) visit(name);
  moved = ordered;
  return ordered;
}

/** Where a step of a move stands, for the tests that fail a move at each step (`MoveOptions.step`). */
export type MoveStep =
  | { step: "paused" }
  | { step: "cleared" }
  | { step: "copy"; table: string; rows: number }
  | { step: "copied" }
  | { step: "flipped" }
  | { step: "delete"; table: string };

export type MoveOptions = {
  /** Called as each step begins; a test throws from it to interrupt the move there, as a crash would. */
  step?: (at: MoveStep) => void | Promise<void>;
  /** How long the pause waits for cached account rows to expire (moveSettleMs). */
  settleMs?: number;
};

export type MoveOutcome =
  | { kind: "moved"; account: Account }
  | { kind: "not_found" }
  | { kind: "unknown_database" }
  | { kind: "same_database" }
  | { kind: "move_running"; movingTo: string; leaseEndsAt: string }
  | { kind: "work_in_flight"; work: string[] }
  | { kind: "changed_during_copy"; tables: string[] };

type AccountRows = { accountId: string; domainIds: string[] };

const named = (name: string) => sql.identifier(name);

/** The condition that selects the account's rows of `table`. */
function ownRows(table: MovedTable, rows: AccountRows): SQL {
  if (!table.child) return sql`${named("account_id")} = ${rows.accountId}`;
  const column = named(table.child.column);
  if (table.child.parent === "domains") return inJsonArray(column, rows.domainIds);
  return sql`${column} IN (SELECT ${named("id")} FROM ${named(table.child.parent)} WHERE ${named("account_id")} = ${rows.accountId})`;
}

/** How many of the account's rows each moved table holds in `db`: one round trip. */
async function countRows(db: AccountDb, rows: AccountRows): Promise<Map<string, number>> {
  return new Map([...(await spansOf(db, rows))].map(([table, span]) => [table, span.n]));
}

// The account's rows in one account database, and the lease the move holds on its directory row.
type Move = {
  shared: SharedDb;
  account: Account;
  source: DatabaseName;
  target: DatabaseName;
  rows: AccountRows;
  options: MoveOptions;
  /** When the lease was last renewed (ms). */
  renewedAt: number;
  /**
   * The `updated_at` this move last wrote: its lease's token. A second move that took over a lapsed lease (to the same
   * target) writes its own, so the first one's next write finds the row changed and stops.
   */
  stamp: string;
};

/** The directory row as this move left it: still in its source, moving to its target, with this move's stamp. */
const leased = (move: Move) =>
  and(eq(accounts.id, move.account.id), eq(accounts.database, move.source), eq(accounts.movingTo, move.target), eq(accounts.updatedAt, move.stamp));

// A renewal is a write to `DB`: made before a round trip only once this long has passed since the last, it still
// comes before any write of a move that stalled long enough to lose its lease.
const renewEveryMs = 10_000;

/**
 * Renews the move's lease when it is due (always with `now`); throws when another move has taken it over (its lease
 * had run out), so a move that stalled writes nothing more.
 */
async function heartbeat(move: Move, when: "due" | "now" = "due"): Promise<void> {
  if (when === "due" && Date.now() - move.renewedAt < renewEveryMs) return;
  const renewedAt = Date.now();
  const stamp = new Date(renewedAt).toISOString();
  const renewed = await move.shared.update(accounts).set({ updatedAt: stamp }).where(leased(move)).run();
  if (renewed.meta.changes !== 1) throw new Error(`the move of ${move.account.id} to ${move.target} lost its lease`);
  move.renewedAt = renewedAt;
  move.stamp = stamp;
}

/**
 * Deletes the account's rows from `db`, children first (each table's rows before the rows they reference), then its
 * directory copy unless `db` is `DB` (where the directory row is the record). Each statement removes at most
 * `deleteRows` rows; tables the first count finds empty cost nothing more. The number of rows deleted.
 */
async function deleteAccountRows(
  db: AccountDb,
  name: DatabaseName,
  rows: AccountRows,
  beforeEach: (table: string) => Promise<void>,
): Promise<number> {
  const counts = await countRows(db, rows);
  let deleted = 0;
  for (const table of [...movedTables()].reverse()) {
    if ((counts.get(table.name) ?? 0) === 0) continue;
    const name = named(table.name);
    const remove = statement(
      db,
      sql`DELETE FROM ${name} WHERE rowid IN (SELECT rowid FROM ${name} WHERE ${ownRows(table, rows)} LIMIT ${deleteRows})`,
    );
    for (;;) {
      await beforeEach(table.name);
      const result = await remove.run();
      deleted += result.meta.changes;
      if (result.meta.changes < deleteRows) break;
    }
  }
  if (name !== "DB") {
    await beforeEach("accounts");
    deleted += (await db.delete(accounts).where(eq(accounts.id, rows.accountId)).run()).meta.changes;
  }
  return deleted;
}

type Span = { n: number; low: number | null; high: number | null };

/** Where the account's rows of each table are in `db`: how many, and the lowest and highest rowid. One round trip. */
async function spansOf(db: AccountDb, rows: AccountRows): Promise<Map<string, Span>> {
  const tables = movedTables();
  const results = await batch<Span>(
    db,
    tables.map((table) =>
      statement(db, sql`SELECT count(*) AS n, min(rowid) AS low, max(rowid) AS high FROM ${named(table.name)} WHERE ${ownRows(table, rows)}`),
    ),
  );
  return new Map(tables.map((table, index) => [table.name, results[index]?.results[0] ?? { n: 0, low: null, high: null }]));
}

// Pages follow rowid. An account's few rows are read through its index, sorted per page; many are read by walking the
// table's rowids from its lowest to its highest, which reads the span once instead of sorting all of them per page.
const sortedPagesUpTo = 2_000;

/** Copies one table's rows of the account from the source to the target, a page of `pageRows` per round trip each. */
async function copyTable(move: Move, from: AccountDb, to: AccountDb, table: MovedTable, span: Span): Promise<void> {
  if (span.n === 0 || span.low === null || span.high === null) return;
  const name = named(table.name);
  const where = ownRows(table, move.rows);
  const read = (after: number) =>
    statement(
      from,
      span.n <= sortedPagesUpTo
        ? sql`SELECT rowid AS move_rowid, * FROM ${name} WHERE ${where} AND rowid > ${after} AND rowid <= ${span.high} ORDER BY rowid LIMIT ${pageRows}`
        : sql`SELECT rowid AS move_rowid, * FROM ${name} NOT INDEXED WHERE rowid > ${after} AND rowid <= ${span.high} AND ${where} ORDER BY rowid LIMIT ${pageRows}`,
    );
  let last = span.low - 1;
  for (;;) {
    await heartbeat(move);
    const [names, ...page] = await read(last).raw<unknown[]>({ columnNames: true });
    if (!names || page.length === 0) return;
    const columns = sql.join(
      names.slice(1).map((column) => named(column)),
      sql`, `,
    );
    const perStatement = Math.floor(maxParameters / (names.length - 1));
    const inserts: D1PreparedStatement[] = [];
    for (let start = 0; start < page.length; start += perStatement) {
      const values = page.slice(start, start + perStatement).map(
        (row) =>
          sql`(${sql.join(
            row.slice(1).map((value) => sql`${value}`),
            sql`, `,
          )})`,
      );
      inserts.push(statement(to, sql`INSERT INTO ${name} (${columns}) VALUES ${sql.join(values, sql`, `)}`));
    }
    await move.options.step?.({ step: "copy", table: table.name, rows: page.length });
    await batch(to, inserts);
    last = page.at(-1)![0] as number;
    if (page.length < pageRows) return;
  }
}

// Work the move would strand in the source: what a queue message, a Durable Object's alarm or a cron sweep will come
// back to by the database it was started in. Each query answers at most one row.
const inFlight: { what: string; query: (accountId: string, since: string) => SQL }[] = [
  {
    what: "messages queued, sending, deferred or scheduled",
    query: (id) => sql`SELECT 1 FROM messages WHERE account_id = ${id} AND status IN ('scheduled', 'queued', 'sending', 'deferred') LIMIT 1`,
  },
  {
    what: "campaigns scheduled or sending",
    query: (id) => sql`SELECT 1 FROM campaigns WHERE account_id = ${id} AND status IN ('scheduled', 'sending') LIMIT 1`,
  },
  {
    what: "verification jobs running",
    query: (id) => sql`SELECT 1 FROM verification_jobs WHERE account_id = ${id} AND status IN ('pending', 'processing') LIMIT 1`,
  },
  {
    what: "contact imports running",
    query: (id) => sql`SELECT 1 FROM contact_imports WHERE account_id = ${id} AND status IN ('pending', 'processing') LIMIT 1`,
  },
  {
    what: "automation runs running or waiting",
    query: (id) => sql`SELECT 1 FROM automation_runs WHERE account_id = ${id} AND status IN ('running', 'waiting') LIMIT 1`,
  },
  {
    what: "AI requests queued or running",
    query: (id) => sql`SELECT 1 FROM ai_requests WHERE account_id = ${id} AND status IN ('queued', 'running') LIMIT 1`,
  },
  {
    what: "events not yet dispatched to webhooks",
    query: (id) => sql`SELECT 1 FROM events WHERE account_id = ${id} AND dispatched_at IS NULL LIMIT 1`,
  },
  {
    // An event's first delivery is in the webhook queue until its attempt is recorded; a retrying delivery's next
    // attempt is, until a later attempt is.
    what: "webhook deliveries pending",
    query: (id, since) => sql`SELECT 1 WHERE EXISTS (
        SELECT 1 FROM webhook_deliveries AS d WHERE d.account_id = ${id} AND d.status = 'retrying'
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries AS n WHERE n.endpoint_id = d.endpoint_id AND n.event_id = d.event_id AND n.attempt > d.attempt))
      OR EXISTS (
        SELECT 1 FROM events AS e WHERE e.account_id = ${id} AND e.dispatched_at > ${since}
          AND EXISTS (SELECT 1 FROM webhook_endpoints AS w, json_each(w.events) AS subscribed
            WHERE w.account_id = ${id} AND w.enabled = 1 AND subscribed.value IN ('*', e.type))
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries AS d WHERE d.event_id = e.id))`,
  },
];

/** How long an event's first webhook delivery may take to be recorded before the move no longer waits for it. */
const firstDeliveryWindowMs = 15 * 60_000;

/** What the account has in flight in `db`, by name; empty when nothing would be stranded. */
async function workInFlight(db: AccountDb, accountId: string): Promise<string[]> {
  const since = new Date(Date.now() - firstDeliveryWindowMs).toISOString();
  const results = await batch(
    db,
    inFlight.map(({ query }) => statement(db, query(accountId, since))),
  );
  return inFlight.filter((_, index) => (results[index]?.results.length ?? 0) > 0).map(({ what }) => what);
}

/** Clears the account's rows from every account database but `keep`; the number of rows that were there. */
async function clearOthers(env: Env, keep: DatabaseName, rows: AccountRows, beforeEach: (table: string) => Promise<void>): Promise<number> {
  let deleted = 0;
  for (const name of accountDatabaseNames(env)) {
    if (name !== keep) deleted += await deleteAccountRows(databaseHandle(env, name), name, rows, beforeEach);
  }
  return deleted;
}

async function accountRowsOf(shared: SharedDb, accountId: string): Promise<AccountRows> {
  const owned = await shared.select({ id: domains.id }).from(domains).where(eq(domains.accountId, accountId)).all();
  return { accountId, domainIds: owned.map((row) => row.id) };
}

/** Lifts the pause an interrupted move left, once its lease has run out; whether it did. */
async function liftStalePause(shared: SharedDb, account: Account, leaseCutoff: string): Promise<boolean> {
  const lifted = await shared
    .update(accounts)
    .set({ movingTo: null, updatedAt: nowIso() })
    .where(and(eq(accounts.id, account.id), isNotNull(accounts.movingTo), lte(accounts.updatedAt, leaseCutoff)))
    .run();
  forgetCachedAccount(account.id);
  return lifted.meta.changes > 0;
}

/** Lifts the pause of a move that will not go on (the source is still the truth). */
async function unpause(move: Move): Promise<void> {
  await move.shared.update(accounts).set({ movingTo: null, updatedAt: nowIso() }).where(leased(move)).run();
  forgetCachedAccount(move.account.id);
}

/**
 * Moves the account's rows to the account database `target` (a binding `isAccountDatabase` accepts). Also finishes
 * a move interrupted after its flip: asked to move an account to the database it is already in, it deletes what is
 * left of it elsewhere, and only when there is nothing answers `same_database`.
 */
export async function moveAccount(env: Env, shared: SharedDb, accountId: string, target: string, options: MoveOptions = {}): Promise<MoveOutcome> {
  const found = await findAccount(shared, accountId);
  if (!found) return { kind: "not_found" };
  if (!isAccountDatabase(env, target)) return { kind: "unknown_database" };
  const leaseCutoff = new Date(Date.now() - moveLeaseMs).toISOString();
  if (found.movingTo !== null && found.updatedAt > leaseCutoff) {
    return { kind: "move_running", movingTo: found.movingTo, leaseEndsAt: new Date(Date.parse(found.updatedAt) + moveLeaseMs).toISOString() };
  }
  const rows = await accountRowsOf(shared, accountId);
  const noStep = async () => {};
  if (found.database === target) {
    // What an interrupted move left: after its flip, the source's rows; before it, a partial copy and the pause (a
    // move to where the account is abandons the interrupted one). The directory names `target`: nothing elsewhere
    // is the account's.
    const left = await clearOthers(env, target, rows, noStep);
    const unpaused = found.movingTo !== null && (await liftStalePause(shared, found, leaseCutoff));
    if (left === 0 && !unpaused) return { kind: "same_database" };
    return { kind: "moved", account: (await findAccount(shared, accountId)) ?? found };
  }

  // 1. The pause, taken as a lease: only one move of an account runs at a time.
  const stamp = nowIso();
  const paused = await shared
    .update(accounts)
    .set({ movingTo: target, updatedAt: stamp })
    .where(
      and(eq(accounts.id, accountId), eq(accounts.database, found.database), or(isNull(accounts.movingTo), lte(accounts.updatedAt, leaseCutoff))),
    )
    .returning({ id: accounts.id })
    .all();
  if (paused.length === 0) {
    const now = await findAccount(shared, accountId);
    if (!now) return { kind: "not_found" };
    return { kind: "move_running", movingTo: now.movingTo ?? target, leaseEndsAt: new Date(Date.parse(now.updatedAt) + moveLeaseMs).toISOString() };
  }
  const move: Move = { shared, account: found, source: found.database, target, rows, options, renewedAt: Date.now(), stamp };
  forgetCachedAccount(accountId);
  await new Promise((resolve) => setTimeout(resolve, options.settleMs ?? moveSettleMs));
  await heartbeat(move, "now");
  await options.step?.({ step: "paused" });

  // 2. Work in flight: refused rather than waited for (a scheduled message or a campaign may be days away).
  const from = databaseHandle(env, move.source);
  const work = await workInFlight(from, accountId);
  if (work.length > 0) {
    await unpause(move);
    return { kind: "work_in_flight", work };
  }

  // 3. Clear every other database (the target's partial copy of an interrupted move first of all), then copy.
  const beat = async () => heartbeat(move);
  // Proven again before anything is deleted: a move that stalled while another took over its lapsed lease (and may
  // have flipped the account to this very target) stops here instead of deleting what is now the truth.
  await heartbeat(move, "now");
  await clearOthers(env, move.source, rows, beat);
  await options.step?.({ step: "cleared" });
  const to = databaseHandle(env, target);
  await heartbeat(move);
  // The directory row as it is now (the operator's changes wait for the move, but one may have landed before the pause).
  const copy = directoryCopyStatement(to, { ...((await findAccount(shared, accountId)) ?? found), database: target, movingTo: null });
  if (copy.length > 0) await batch(to, copy);
  const spans = await spansOf(from, rows);
  for (const table of movedTables()) await copyTable(move, from, to, table, spans.get(table.name)!);
  await options.step?.({ step: "copied" });

  // 4. Counts: a write the pause did not cover (a click, a bounce report, inbound mail) shows here.
  const [before, after] = await Promise.all([countRows(from, rows), countRows(to, rows)]);
  const differ = [...before].filter(([table, n]) => after.get(table) !== n).map(([table]) => table);
  if (differ.length > 0) {
    await clearOthers(env, move.source, rows, beat);
    await unpause(move);
    return { kind: "changed_during_copy", tables: differ };
  }

  // 5. The flip: from here the target is the truth.
  const flipped = await shared
    .update(accounts)
    .set({ database: target, movingTo: null, updatedAt: nowIso() })
    .where(leased(move))
    .returning({ id: accounts.id })
    .all();
  if (flipped.length !== 1) throw new Error(`the move of ${accountId} to ${target} lost its lease before the flip`);
  forgetCachedAccount(accountId);
  await options.step?.({ step: "flipped" });

  // 6. The source's rows go.
  await deleteAccountRows(from, move.source, rows, async (table) => options.step?.({ step: "delete", table }));
  const account = await findAccount(shared, accountId);
  if (!account) throw new Error(`account ${accountId} disappeared during its move`);
  return { kind: "moved", account };
}

/** The databases running moves copy from or to (what the cron's sweeps leave alone meanwhile). */
export async function databasesOfMoves(shared: SharedDb): Promise<Set<DatabaseName>> {
  const rows = await shared
    .select({ database: accounts.database, movingTo: accounts.movingTo })
    .from(accounts)
    .where(isNotNull(accounts.movingTo))
    .all();
  return new Set(rows.flatMap((row) => [row.database, ...(row.movingTo ? [row.movingTo] : [])]));
}

/**
 * Whether the account's writes are paused for a move: the API answers them 503 with Retry-After, the relay 503 (the
 * bridge's 451). Read from the account row the request authenticated with, cached or not: a move waits out the caches.
 */
export const isPausedForMove = (account: Pick<Account, "movingTo">) => account.movingTo !== null;
