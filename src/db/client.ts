// The one rule for reaching D1: an aggregate's queries live in its module under src/domain/<area>/ (contacts,
// domains, webhooks, verification jobs, suppressions, credits, ...), written with Drizzle (the query builder, or
// `sql` templates where SQLite features need them: json_each, ON CONFLICT … RETURNING). Routes and queue consumers
// call that module; they build no queries. Row types come from db/schema/ (`typeof table.$inferSelect`).
// `statement()` below is the one way to put such a query into a `D1Database.batch` beside the ledger's statements.

import { is, SQL, sql, type SQLWrapper } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";

type ToSql = SQLWrapper & { toSQL(): { sql: string; params: unknown[] } };

const dialect = new SQLiteAsyncDialect();

/**
 * A Drizzle query or `sql` template as a raw D1 statement, so it can share one `D1Database.batch` (one round trip,
 * one transaction) with other statements. Drizzle's own batch cannot bind a `sql` template that has parameters.
 */
export function statement(d1: D1Database, query: ToSql | SQL): D1PreparedStatement {
  const { sql, params } = is(query, SQL) ? dialect.sqlToQuery(query) : query.toSQL();
  return d1.prepare(sql).bind(...params);
}

/** The current time as the schema's timestamps store it (ISO 8601 UTC with milliseconds), computed by SQLite. */
export const sqlNow = sql`strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`;

/** The current UTC day (`YYYY-MM-DD`), as the daily rollups key their rows, computed by SQLite. */
export const sqlToday = sql`strftime('%Y-%m-%d', 'now')`;

/** `column IN (values)` with the values bound as ONE JSON array: any number of ids stays under D1's 100 parameters. */
export function inJsonArray(column: SQLWrapper, values: readonly unknown[]): SQL {
  return sql`${column} IN (SELECT value FROM json_each(${JSON.stringify(values)}))`;
}
