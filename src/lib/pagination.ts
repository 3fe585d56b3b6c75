import type { Db } from "../db/client";
import { and, desc, eq, lt, or, sql, type InferSelectModel, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";

export type Position = { createdAt: string; id: string };

export function encodeCursor(position: Position): string {
  return btoa(`${position.createdAt}|${position.id}`).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The position a cursor names, or undefined for one no page gave out: the edges refuse those (`isCursor`). */
export function decodeCursor(cursor: string): Position | undefined {
  try {
    const [createdAt, id, extra] = atob(cursor.replace(/-/g, "+").replace(/_/g, "/")).split("|");
    if (createdAt && id && extra === undefined && !Number.isNaN(Date.parse(createdAt))) return { createdAt, id };
  } catch {
    // not base64: no page gave it out
  }
  return undefined;
}

export const isCursor = (cursor: string) => decodeCursor(cursor) !== undefined;
export const invalidCursorMessage = "Invalid cursor; pass next_cursor from the previous page";

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

/** Takes `limit + 1` fetched rows and returns the page in the API's list shape. */
export function pageOf<Row extends Position, Item>(rows: Row[], limit: number, serialize: (row: Row) => Item) {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  const hasMore = rows.length > limit;
  return {
    data: page.map(serialize),
    has_more: hasMore,
    next_cursor: hasMore && last ? encodeCursor(last) : null,
  };
}

/**
 * A list's date filter (YYYY-MM-DD, or an ISO timestamp with its offset; inclusive) as the UTC timestamp rows are
 * compared with: a day means its first (`start`) or last (`end`) millisecond.
 */
export const dateFilterBound = (value: string, end: "start" | "end") =>
  /^\d{4}-\d{2}-\d{2}$/.test(value) ? `${value}T${end === "start" ? "00:00:00.000" : "23:59:59.999"}Z` : new Date(value).toISOString();
