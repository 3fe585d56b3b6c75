import type { SQLWrapper } from "drizzle-orm";

type ToSql = SQLWrapper & { toSQL(): { sql: string; params: unknown[] } };

/**
 * A Drizzle query as a raw D1 statement, so it can share one `D1Database.batch` (one round trip, one transaction)
 * with the hand-written ledger statements.
 */
export function statement(d1: D1Database, query: ToSql): D1PreparedStatement {
  const { sql, params } = query.toSQL();
  return d1.prepare(sql).bind(...params);
}
