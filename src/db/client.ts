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
// in: today both open the `DB` binding, and some domain reads (delivery, warm-up, reputation, receiving) still reach
// `domains` through an account's handle; account databases give an account's rows their own.
// `statement()` below is the one way to put such a query into a `D1Database.batch` beside the ledger's statements.

import { is, SQL, sql, type SQLWrapper } from "drizzle-orm";
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import * as schema from "./schema";
import { logError } from "../lib/log";

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
 * The binding that holds an account's rows, as the operator API shows it (`database`). Every account's rows are in
 * `DB` today; this is where an account's own database will be chosen, and `accountDb` opens whatever it names.
 */
export const accountDatabaseName = (_account?: { id: string }) => "DB" as const;

/** The handle for an account's rows: the database `accountDatabaseName` names. */
export const accountDb = (env: Env, account?: { id: string }) => open(env[accountDatabaseName(account)]) as AccountDb;

/**
 * The databases that hold accounts' rows, for the crons and sweeps that visit every account (src/index.ts runs each
 * sweep of accounts' rows in every one of them).
 */
export const accountDatabases = (env: Env): AccountDb[] => [accountDb(env)];

/**
 * A context for work done for one account (or, without one, across every account in today's single database).
 * `work` is the invocation's ExecutionContext; without one (a queue batch or alarm whose caller awaits everything) a
 * promise handed to `waitUntil` runs on and its failure is logged.
 */
export const openCtx = (env: Env, work?: WaitUntil, account?: { id: string }): Ctx => ({
  env,
  db: accountDb(env, account),
  shared: sharedDb(env),
  waitUntil: (promise) =>
    work ? work.waitUntil(promise) : void promise.catch((error: unknown) => logError("background work failed", { error: String(error) })),
});

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
