// The one rule for reaching D1: an aggregate's queries live in its module under src/domain/<area>/ (contacts,
// domains, webhooks, verification jobs, suppressions, credits, ...), written with Drizzle (the query builder, or
// `sql` templates where SQLite features need them: json_each, ON CONFLICT … RETURNING). Routes and queue consumers
// call that module; they build no queries. Row types come from db/schema/<area>.ts (`typeof table.$inferSelect`).
//
// The handles are made here and nowhere else (`openCtx`, `accountDb`, `sharedDb`), once per request (requestCtx in
// src/middleware/request.ts, then the account's once a key, session or credential names it), queue batch, cron run,
// Durable Object call or workflow run, and passed down: a domain function takes the handle of the rows it reads, an
// `AccountDb` (one account's messages, contacts, campaigns, ledger and balances, ...) or the `SharedDb` (accounts, API
// keys and SMTP credentials, domains, members and sessions: what is found before the account is known), or a `Ctx`
// holding both beside `env`. They are distinct types so that a function's signature says which database its rows are
// in: `SharedDb` opens `DB`, an `AccountDb` the account database its account's directory row names
// (`accounts.database`; docs/scaling.md, "Account databases").
// `statement()` below is the one way to put such a query into a `D1Database.batch` beside the ledger's statements.

import { eq, is, SQL, sql, type SQLWrapper } from "drizzle-orm";
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import * as schema from "./schema";
import { accountMoving } from "../errors";
import { logError } from "../lib/log";
import { TtlCache } from "../lib/ttl-cache";

type Handle = DrizzleD1Database<typeof schema> & { $client: D1Database };
declare const rowsOf: unique symbol;

/** The handle for one account's rows. */
export type AccountDb = Handle & { readonly [rowsOf]: "account" };
/** The handle for the tables every account shares. */
export type SharedDb = Handle & { readonly [rowsOf]: "shared" };
/** Either handle, for helpers that work on any table (`statement`, pagination). */
export type Db = AccountDb | SharedDb;

/** Work that may finish after the response (or the queue batch's acknowledgement). */
export type WaitUntil = { waitUntil(promise: Promise<unknown>): void };

/**
 * What a request, queue batch, cron run or workflow step reaches the data and the bindings through, and hands work
 * that may outlive it to.
 */
export type Ctx = WaitUntil & { readonly env: Env; readonly db: AccountDb; readonly shared: SharedDb };

// Building a handle reads the whole schema (~90 µs, against ~1 µs without it; scripts/bench/drizzle-handle.ts), and a
// keyed request opens the shared and the account's handles more than once. A handle holds nothing of a request (its
// client is the isolate's binding), so one is kept per binding.
const handles = new WeakMap<D1Database, Handle>();
function open(d1: D1Database): Handle {
  let handle = handles.get(d1);
  if (!handle) {
    handle = drizzle(d1, { schema });
    handles.set(d1, handle);
  }
  return handle;
}

/** The shared tables' handle. */
export const sharedDb = (env: Env) => open(env.DB) as SharedDb;

/**
 * The binding name of a database that can hold accounts' rows: one of wrangler.toml's `ACCOUNT_DB_<n>`, or `DB`,
 * which keeps the accounts made before account databases existed until the operator moves them.
 */
export type DatabaseName = string;

const poolBinding = /^ACCOUNT_DB_(\d+)$/;
const bindings = (env: Env) => env as unknown as Record<string, unknown>;

/**
 * The account databases new accounts are placed in: wrangler.toml's `ACCOUNT_DB_<n>` bindings in order of `n`. A
 * deployment that declares none keeps every account in `DB`.
 */
export const poolDatabases = (env: Env): readonly DatabaseName[] => databasesOf(env).pool;

/** Every database that may hold accounts' rows: the pool and `DB` (accounts made before the pool, until moved). */
export const accountDatabaseNames = (env: Env): readonly DatabaseName[] => databasesOf(env).all;

// Read from the bindings once per `env` object (one per isolate), not on every handle opened.
const databaseLists = new WeakMap<Env, { pool: DatabaseName[]; all: DatabaseName[] }>();
function databasesOf(env: Env) {
  let lists = databaseLists.get(env);
  if (!lists) {
    const named = Object.keys(bindings(env))
      .filter((name) => poolBinding.test(name))
      .sort((a, b) => Number(poolBinding.exec(a)![1]) - Number(poolBinding.exec(b)![1]));
    const pool = named.length > 0 ? named : ["DB"];
    lists = { pool, all: [...new Set([...pool, "DB"])] };
    databaseLists.set(env, lists);
  }
  return lists;
}

/** Whether `name` is a database an account's rows can be in (a bound `ACCOUNT_DB_<n>`, or `DB`). */
export const isAccountDatabase = (env: Env, name: string): name is DatabaseName => accountDatabaseNames(env).includes(name);

/** The binding that holds an account's rows, as the operator API shows it (`database`): the directory's column. */
export const accountDatabaseName = (account: { database: string }): DatabaseName => account.database;

const names = new WeakMap<Handle, DatabaseName>();

/** The handle of the database `name` (a binding `isAccountDatabase` accepts). */
export function databaseHandle(env: Env, name: DatabaseName): AccountDb {
  const d1 = bindings(env)[name];
  if (!isAccountDatabase(env, name) || !d1) throw new Error(`${name} is not an account database bound to this Worker (wrangler.toml)`);
  const handle = open(d1 as D1Database);
  names.set(handle, name);
  return handle as AccountDb;
}

/** The handle for an account's rows: the database its directory row names. */
export const accountDb = (env: Env, account: { database: string }) => databaseHandle(env, accountDatabaseName(account));

/** Which database a handle opened by `accountDb`/`databaseHandle` reaches: what queue messages and tokens carry. */
export function databaseNameOf(db: AccountDb): DatabaseName {
  const name = names.get(db);
  if (!name) throw new Error("this handle was not opened for an account database");
  return name;
}

/**
 * The databases that hold accounts' rows, for the crons and sweeps that visit every account (src/index.ts runs each
 * sweep of accounts' rows in every one of them).
 */
export const accountDatabases = (env: Env): AccountDb[] => accountDatabaseNames(env).map((name) => databaseHandle(env, name));

/**
 * How long this isolate trusts where an account's rows are and whether they are being moved (`placementOf`). A move
 * waits longer than this after pausing the account (src/domain/accounts/move.ts), so by the time it copies, every
 * isolate has seen the pause.
 */
export const placementCacheTtlMs = 5_000;
type Placement = { database: DatabaseName; movingTo: string | null };
const placements = new TtlCache<Placement>(placementCacheTtlMs, 10_000);

/** The directory's word on an account's database and move (`DB`, cached in the isolate); undefined for no account. */
export async function placementOf(env: Env, accountId: string): Promise<Placement | undefined> {
  const hit = placements.get(accountId);
  if (hit) return hit;
  const row = await sharedDb(env)
    .select({ database: schema.accounts.database, movingTo: schema.accounts.movingTo })
    .from(schema.accounts)
    .where(eq(schema.accounts.id, accountId))
    .get();
  if (row) placements.set(accountId, row);
  return row;
}

/** Forgets this isolate's placement of an account: after a move pauses or flips it. */
export const forgetPlacement = (accountId: string) => placements.delete(accountId);

/**
 * Finds a row whose account is not known yet (a tracking token, a return path, a provider's message id) in the
 * database `hint` names first, then in the others: a hint is what a token or queue message carried when it was made,
 * and the account may have moved since (or a token made before account databases carries none). The row found is
 * checked against the directory (`placementOf`, `accountOf` naming its account): a row where the account no longer
 * is (a move's source before its rows are deleted, or its half-made copy) is not used; the account's own database is
 * asked instead. While the account is being moved this throws the 503 `account_moving`, so a route answers "retry
 * later" and a queue retries its message: a write now would be left behind by the move.
 */
export async function findInAccountDatabases<T>(
  env: Env,
  hint: DatabaseName | undefined,
  find: (db: AccountDb) => Promise<T | undefined>,
  accountOf: (found: T) => string,
): Promise<{ db: AccountDb; database: DatabaseName; found: T } | undefined> {
  const all = accountDatabaseNames(env);
  const order = hint && all.includes(hint) ? [hint, ...all.filter((name) => name !== hint)] : all;
  for (const name of order) {
    const found = await find(databaseHandle(env, name));
    if (found === undefined) continue;
    const placement = await placementOf(env, accountOf(found));
    if (!placement) return undefined;
    if (placement.movingTo !== null) throw accountMoving();
    if (placement.database === name) return { db: databaseHandle(env, name), database: name, found };
    const owner = databaseHandle(env, placement.database);
    const there = await find(owner);
    return there === undefined ? undefined : { db: owner, database: placement.database, found: there };
  }
  return undefined;
}

/**
 * A short, URL- and address-safe tag for a database, for tokens that must stay short (a VERP local part has 64
 * characters): `ACCOUNT_DB_3` is `3`; `DB` has none. `databaseOfTag` reads it back (undefined for anything else).
 */
export const databaseTag = (name: DatabaseName): string => poolBinding.exec(name)?.[1] ?? "";
export const databaseOfTag = (env: Env, tag: string | undefined): DatabaseName | undefined => {
  if (tag === undefined || !/^\d{1,4}$/.test(tag)) return undefined;
  const name = `ACCOUNT_DB_${Number(tag)}`;
  return isAccountDatabase(env, name) ? name : undefined;
};

// Work that has not found its account yet reaches no account's rows: a query through this handle is a routing bug
// (it would otherwise read `DB`, where new accounts' rows are not), and says so rather than finding nothing.
const unrouted = new Proxy(
  {},
  {
    get(_target, property) {
      throw new Error(`no account database chosen (reading ${String(property)}): find the account or its database first`);
    },
  },
) as AccountDb;

/**
 * A context for work done for one account, or, without one, for work that finds its account (or its database) from
 * what it was given and then opens that account's context; until then `db` refuses every query.
 * `work` is the invocation's ExecutionContext; without one (a queue batch or alarm whose caller awaits everything) a
 * promise handed to `waitUntil` runs on and its failure is logged.
 */
export const openCtx = (env: Env, work?: WaitUntil, account?: { database: string }): Ctx => ({
  env,
  db: account ? accountDb(env, account) : unrouted,
  shared: sharedDb(env),
  waitUntil: (promise) =>
    work ? work.waitUntil(promise) : void promise.catch((error: unknown) => logError("background work failed", { error: String(error) })),
});

/** The same work's context for the account database `name` (a queue batch's messages name theirs). */
export const inDatabase = (ctx: Ctx, name: DatabaseName): Ctx => ({ ...ctx, db: databaseHandle(ctx.env, name) });

type ToSql = SQLWrapper & { toSQL(): { sql: string; params: unknown[] } };

const dialect = new SQLiteAsyncDialect();

/**
 * A Drizzle query or `sql` template as a raw D1 statement, so it can share one `D1Database.batch` (one round trip,
 * one transaction) with other statements. Drizzle's own batch cannot bind a `sql` template that has parameters.
 */
export function statement(db: Db, query: ToSql | SQL): D1PreparedStatement {
  const { sql, params } = is(query, SQL) ? dialect.sqlToQuery(query) : query.toSQL();
  return db.$client.prepare(sql).bind(...params);
}

/** Statements run as one D1 batch: one round trip, one transaction. */
export const batch = <T = Record<string, unknown>>(db: Db, statements: D1PreparedStatement[]) => db.$client.batch<T>(statements);

/** The current time as the schema's timestamps store it (ISO 8601 UTC with milliseconds), computed by SQLite. */
export const sqlNow = sql`strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`;

/** The current UTC day (`YYYY-MM-DD`), as the daily rollups key their rows, computed by SQLite. */
export const sqlToday = sql`strftime('%Y-%m-%d', 'now')`;

/** `column IN (values)` with the values bound as ONE JSON array: any number of ids stays under D1's 100 parameters. */
export function inJsonArray(column: SQLWrapper, values: readonly unknown[]): SQL {
  return sql`${column} IN (SELECT value FROM json_each(${JSON.stringify(values)}))`;
}
