// Lists and their memberships. This module owns the lists' queries; the lists routes and the import call it.

import { and, eq, getTableColumns, sql } from "drizzle-orm";
import { inJsonArray, statement, type AccountDb, batch } from "../../db/client";
import { contacts, listMembers, lists } from "../../db/schema";
import { newId, nowIso } from "../../lib/ids";
import { keysetPage } from "../pagination";
import { addMembersByKeySql, contactUpsertSql, type ContactUpsert } from "./contacts";
import { owned } from "../owned";
import type { ContactAddress } from "./email";

// Counted per list in the same query as the lists themselves (correlated subqueries over the list_members
// primary key). Counting costs a read per member; counters kept in the row would drift with every upsert path.
// The outer column is spelled out: drizzle writes a single-table select's columns unqualified ("id"), which inside
// a subquery joining contacts would mean contacts.id.
const contactCount = sql<number>`(SELECT count(*) FROM list_members AS m WHERE m.list_id = "lists"."id")`.mapWith(Number);
const subscriberCount = sql<number>`(SELECT count(*) FROM list_members AS m JOIN contacts AS c ON c.id = m.contact_id
  WHERE m.list_id = "lists"."id" AND c.status = 'subscribed')`.mapWith(Number);

const listSelection = { ...getTableColumns(lists), contactCount, subscriberCount };
export type ListWithCounts = typeof lists.$inferSelect & { contactCount: number; subscriberCount: number };

export function serializeList(row: ListWithCounts) {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    contact_count: row.contactCount,
    subscriber_count: row.subscriberCount,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

export async function createList(
  db: AccountDb,
  accountId: string,
  input: { name: string; description: string | null },
): Promise<ListWithCounts | undefined> {
  const id = newId("lst");
  await db.insert(lists).values({ id, accountId, name: input.name, description: input.description }).run();
  return db.select(listSelection).from(lists).where(eq(lists.id, id)).get();
}

/** A page of the account's lists, newest first (`limit + 1` rows, for `pageOf`). */
export async function listLists(db: AccountDb, accountId: string, page: { cursor?: string; limit: number }): Promise<ListWithCounts[]> {
  const keyset = keysetPage({ createdAt: lists.createdAt, id: lists.id }, page.cursor);
  return db
    .select(listSelection)
    .from(lists)
    .where(and(eq(lists.accountId, accountId), keyset.where))
    .orderBy(...keyset.orderBy)
    .limit(page.limit + 1)
    .all();
}

export async function findList(db: AccountDb, accountId: string, listId: string): Promise<ListWithCounts | undefined> {
  return db
    .select(listSelection)
    .from(lists)
    .where(owned(lists, accountId, listId))
    .get();
}

/** Whether the account has this list. */
export async function listExists(db: AccountDb, accountId: string, listId: string): Promise<boolean> {
  const row = await db
    .select({ id: lists.id })
    .from(lists)
    .where(owned(lists, accountId, listId))
    .get();
  return row !== undefined;
}

/** Renames a list or changes its description (`undefined` leaves a field alone); undefined if there is no such list. */
export async function updateList(
  db: AccountDb,
  accountId: string,
  listId: string,
  change: { name?: string; description?: string | null },
): Promise<ListWithCounts | undefined> {
  const where = owned(lists, accountId, listId);
  const [, rows] = await db.batch([
    db.update(lists).set({ name: change.name, description: change.description, updatedAt: nowIso() }).where(where),
    db.select(listSelection).from(lists).where(where),
  ]);
  return rows[0];
}

/** Deletes a list and its memberships (the contacts stay); false if the account has no such list. */
export async function deleteList(db: AccountDb, accountId: string, listId: string): Promise<boolean> {
  const [, deleted] = await db.batch([
    db
      .delete(listMembers)
      .where(sql`${listMembers.listId} IN (SELECT ${lists.id} FROM ${lists} WHERE ${lists.id} = ${listId} AND ${lists.accountId} = ${accountId})`),
    db
      .delete(lists)
      .where(owned(lists, accountId, listId))
      .returning({ id: lists.id }),
  ]);
  return deleted.length > 0;
}

export type AddedMembers = { added: string[]; already: string[]; unknown: string[]; created: string[] };

/**
 * Adds addresses to a list, creating the contacts of new addresses (a suppressed one is stored `unsubscribed`);
 * existing contacts are not changed. Addresses with the same key are one contact.
 */
export async function addMembersByAddress(db: AccountDb, accountId: string, listId: string, addresses: ContactAddress[]): Promise<AddedMembers> {
  const byKey = new Map<string, ContactUpsert>();
  for (const address of addresses) if (!byKey.has(address.key)) byKey.set(address.key, { id: newId("con"), address, fields: {} });
  const upserts = [...byKey.values()];
  const keys = [...byKey.keys()];
  // Create the new addresses, add every address's contact, then read back which contacts those are.
  const [created, added, members] = await batch<{ id?: string; contact_id?: string }>(db, [
    statement(db, contactUpsertSql(accountId, upserts, { columns: [], onExisting: "insert_only" })),
    statement(db, addMembersByKeySql(accountId, listId, keys)),
    statement(
      db,
      db
        .select({ id: contacts.id })
        .from(contacts)
        .where(and(eq(contacts.accountId, accountId), inJsonArray(contacts.emailKey, keys))),
    ),
  ]);
  const addedIds = new Set(added?.results.map((row) => row.contact_id));
  return {
    added: [...addedIds].filter((id): id is string => id !== undefined),
    already: (members?.results ?? []).map((row) => row.id).filter((id): id is string => id !== undefined && !addedIds.has(id)),
    unknown: [],
    created: (created?.results ?? []).map((row) => row.id).filter((id): id is string => id !== undefined),
  };
}

/** Adds contacts of the account to a list by id; ids that are not the account's contacts come back `unknown`. */
export async function addMembersById(db: AccountDb, accountId: string, listId: string, contactIds: string[]): Promise<AddedMembers> {
  const wanted = [...new Set(contactIds)];
  const ids = JSON.stringify(wanted);
  const [added, known] = await batch<{ id: string }>(db, [
    statement(
      db,
      sql`INSERT INTO list_members (list_id, contact_id)
        SELECT ${listId}, c.id FROM contacts AS c WHERE c.account_id = ${accountId} AND c.id IN (SELECT value FROM json_each(${ids}))
          AND EXISTS (SELECT 1 FROM lists WHERE id = ${listId} AND account_id = ${accountId})
        ON CONFLICT (list_id, contact_id) DO NOTHING RETURNING contact_id AS id`,
    ),
    statement(
      db,
      db
        .select({ id: contacts.id })
        .from(contacts)
        .where(and(eq(contacts.accountId, accountId), sql`${contacts.id} IN (SELECT value FROM json_each(${ids}))`)),
    ),
  ]);
  const addedIds = new Set(added?.results.map((row) => row.id));
  const knownIds = new Set(known?.results.map((row) => row.id));
  return {
    added: wanted.filter((id) => addedIds.has(id)),
    already: wanted.filter((id) => knownIds.has(id) && !addedIds.has(id)),
    unknown: wanted.filter((id) => !knownIds.has(id)),
    created: [],
  };
}

/** Removes a contact from one of the account's lists; false if the list is not the account's or the contact not in it. */
export async function removeMember(db: AccountDb, accountId: string, listId: string, contactId: string): Promise<boolean> {
  const removed = await db
    .delete(listMembers)
    .where(
      and(
        eq(listMembers.listId, listId),
        eq(listMembers.contactId, contactId),
        sql`EXISTS (SELECT 1 FROM ${lists} WHERE ${lists.id} = ${listId} AND ${lists.accountId} = ${accountId})`,
      ),
    )
    .returning({ contactId: listMembers.contactId })
    .all();
  return removed.length > 0;
}
