// The rows an account owns (topics, templates, senders, forms, lists, segments, webhook endpoints, domains, ...) are
// all reached the same way from a route: by the account and the row's id, so that an id of another account is "not
// found", never another account's row. These are that one shape; a module whose find, update or delete does more
// (counts, joins, events, R2 objects) builds its query on `owned`.

import { and, eq, type InferSelectModel, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable, SQLiteUpdateSetSource } from "drizzle-orm/sqlite-core";
import type { Db } from "../db/client";

/** A table whose rows belong to one account each. */
type OwnedTable = SQLiteTable & { id: SQLiteColumn; accountId: SQLiteColumn };

/** The condition selecting the account's row `id` of `table`; `also`, when given, must hold too. */
export function owned(table: OwnedTable, accountId: string, id: string, also?: SQL): SQL {
  // `and` of defined conditions is never undefined.
  return and(eq(table.id, id), eq(table.accountId, accountId), also)!;
}

/** The account's row `id`, or undefined (no such row, or another account's). */
export async function findOwned<T extends OwnedTable>(db: Db, table: T, accountId: string, id: string): Promise<InferSelectModel<T> | undefined> {
  // drizzle's row type does not resolve for a generic table; every column is selected, so the row is the table's.
  return (await db
    .select()
    .from(table as OwnedTable)
    .where(owned(table, accountId, id))
    .get()) as InferSelectModel<T> | undefined;
}

/** Changes the account's row `id` (while `also` holds, when given) and returns it as changed; undefined if none was. */
export async function updateOwned<T extends OwnedTable>(
  db: Db,
  table: T,
  accountId: string,
  id: string,
  changes: SQLiteUpdateSetSource<T>,
  also?: SQL,
): Promise<InferSelectModel<T> | undefined> {
  // As above: `.returning()` is every column, which drizzle cannot tell for a generic table.
  return (await db
    .update(table)
    .set(changes)
    .where(owned(table, accountId, id, also))
    .returning()
    .get()) as InferSelectModel<T> | undefined;
}

/** Deletes the account's row `id`; false if the account has no such row. */
export async function deleteOwned(db: Db, table: OwnedTable, accountId: string, id: string): Promise<boolean> {
  const row = await db
    .delete(table)
    .where(owned(table, accountId, id))
    .returning({ id: table.id })
    .get();
  return row !== undefined;
}
