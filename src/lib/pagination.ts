// Cursors as the API gives them out (base64 of created_at|id) and the list shape a page is answered in.

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
