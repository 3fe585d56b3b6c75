// Keyset pages of the account's rows: the queries behind every list (the cursor's text is src/lib/pagination.ts's).
import { and, desc, eq, lt, or, sql, type InferSelectModel, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Db } from "../db/client";
import { decodeCursor } from "../lib/pagination";

/**
 * Newest first, keyset-paginated on (created_at, id): stable while rows are inserted. A cursor no page gave out
 * (refused at the edges, so only a caller that skipped `isCursor` passes one) reads as past the last row: an empty
 * page, never page one again, which a client following `next_cursor` would loop on.
 */
export function keysetPage(columns: { createdAt: SQLiteColumn; id: SQLiteColumn }, cursor: string | undefined) {
  let where: SQL | undefined;
  if (cursor) {
    const position = decodeCursor(cursor);
    if (!position) return { where: sql`0`, orderBy: [desc(columns.createdAt), desc(columns.id)] as const };
    where = or(lt(columns.createdAt, position.createdAt), and(eq(columns.createdAt, position.createdAt), lt(columns.id, position.id)));
  }
  return { where, orderBy: [desc(columns.createdAt), desc(columns.id)] as const };
}

type AccountTable = SQLiteTable & { accountId: SQLiteColumn; createdAt: SQLiteColumn; id: SQLiteColumn };

/** A page of the account's rows of `table`, newest first (`limit + 1` rows, for `pageOf`). */
export async function accountPage<T extends AccountTable>(
  db: Db,
  table: T,
  accountId: string,
  page: { cursor?: string; limit: number },
): Promise<InferSelectModel<T>[]> {
  const keyset = keysetPage(table, page.cursor);
  // drizzle's row type does not resolve for a generic table; every column is selected, so the row is the table's.
  return db
    .select()
    .from(table as AccountTable)
    .where(and(eq(table.accountId, accountId), keyset.where))
    .orderBy(...keyset.orderBy)
    .limit(page.limit + 1)
    .all() as Promise<InferSelectModel<T>[]>;
}
