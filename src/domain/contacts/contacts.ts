// Contacts: create-or-update by address, custom fields, list memberships. Shared by the contacts and lists routes
// and the import consumer, so every path applies the same keys, caps and suppression rule.

import { and, eq, getTableColumns, sql, type SQL } from "drizzle-orm";
import type { DrizzleD1Database } from "drizzle-orm/d1";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import { contacts, lists } from "../../db/schema";
import type { ContactAddress } from "./email";

export const contactStatuses = ["subscribed", "unsubscribed", "bounced", "complained"] as const;

/** The contact's own text columns, named the same in the API and the table. */
export const contactTextFields = ["first_name", "last_name", "company", "phone", "country"] as const;
export type ContactTextField = (typeof contactTextFields)[number];
export const CONTACT_TEXT_MAX_LENGTH = 256;

export const CUSTOM_FIELDS_MAX_KEYS = 50;
export const CUSTOM_FIELDS_MAX_BYTES = 8 * 1024;
export const CUSTOM_FIELD_KEY_MAX_LENGTH = 64;

export type CustomFieldValue = string | number | boolean;
export type CustomFields = Record<string, CustomFieldValue>;
/** What a request sends: `null` removes a key. */
export type CustomFieldsPatch = Record<string, CustomFieldValue | null>;

export type ContactRow = typeof contacts.$inferSelect;

const nowSql = sql.raw(`strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`);

/** The ids of the contact's lists, oldest membership first, as one column of the contact's own row. */
// The outer column is spelled out: drizzle writes a single-table select's columns unqualified ("id").
const contactListIds = sql<string[]>`(SELECT json_group_array(list_id) FROM (SELECT m.list_id FROM list_members AS m
  WHERE m.contact_id = "contacts"."id" ORDER BY m.created_at, m.list_id))`.mapWith((value: string) => JSON.parse(value) as string[]);

/** Select shape of a contact as the API shows it: the row plus its list ids, in one query. */
export const contactSelection = { ...getTableColumns(contacts), lists: contactListIds };
export type ContactWithLists = ContactRow & { lists: string[] };

const dialect = new SQLiteAsyncDialect();

/**
 * A `sql` query as a D1 statement. Drizzle's own batch cannot bind raw SQL that has parameters, so statements
 * written as SQL join a batch through `D1Database.batch` instead.
 */
export function sqlStatement(d1: D1Database, query: SQL): D1PreparedStatement {
  const { sql: text, params } = dialect.sqlToQuery(query);
  return d1.prepare(text).bind(...params);
}

export type ContactSqlRow = Omit<ContactWithLists, "customFields" | "lists"> & { customFields: string; lists: string };

/** Reads contacts by a raw condition in a D1 batch: same row shape as `contactSelection`, mapped by `contactFromSql`. */
export function contactReadStatement(d1: D1Database, where: SQL): D1PreparedStatement {
  return sqlStatement(
    d1,
    sql`SELECT c.id, c.account_id AS accountId, c.email, c.email_key AS emailKey, c.first_name AS firstName, c.last_name AS lastName,
      c.company, c.phone, c.country, c.custom_fields AS customFields, c.status, c.created_at AS createdAt, c.updated_at AS updatedAt,
      (SELECT json_group_array(list_id) FROM (SELECT list_id FROM list_members WHERE contact_id = c.id ORDER BY created_at, list_id)) AS lists
      FROM contacts AS c WHERE ${where}`,
  );
}

export function contactFromSql(row: ContactSqlRow): ContactWithLists {
  return { ...row, customFields: JSON.parse(row.customFields) as CustomFields, lists: JSON.parse(row.lists) as string[] };
}

export function serializeContact(row: ContactWithLists) {
  return {
    id: row.id,
    email: row.email,
    first_name: row.firstName,
    last_name: row.lastName,
    company: row.company,
    phone: row.phone,
    country: row.country,
    custom_fields: row.customFields,
    status: row.status,
    lists: row.lists,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

export function mergeCustomFields(current: CustomFields, patch: CustomFieldsPatch): CustomFields {
  const merged: CustomFields = { ...current };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete merged[key];
    else merged[key] = value;
  }
  return merged;
}

const encoder = new TextEncoder();

/** Why custom fields are too big to store, or undefined. Applies to what the contact ends up with. */
export function customFieldsProblem(fields: CustomFieldsPatch): string | undefined {
  const keys = Object.keys(fields).length;
  if (keys > CUSTOM_FIELDS_MAX_KEYS) return `A contact holds at most ${CUSTOM_FIELDS_MAX_KEYS} custom fields (this would make ${keys})`;
  const bytes = encoder.encode(JSON.stringify(fields)).length;
  if (bytes > CUSTOM_FIELDS_MAX_BYTES) return `Custom fields are limited to ${CUSTOM_FIELDS_MAX_BYTES} bytes as JSON (this would make ${bytes})`;
  return undefined;
}

export type ContactUpsert = {
  /** A fresh id; kept only if the address is new to the account (compare with the returned id to tell). */
  id: string;
  address: ContactAddress;
  /** Text fields given; `null` clears one (API) or is left out (imports). */
  fields: Partial<Record<ContactTextField, string | null>>;
  customFields?: CustomFieldsPatch;
};

type UpsertOptions = {
  /** The text fields the statement writes; others are never touched on an existing contact. */
  columns: readonly ContactTextField[];
  /**
   * `overwrite`: a given value replaces the stored one, `null` included (the API: the caller said so).
   * `keep_blank`: a missing value keeps the stored one (imports: an empty cell means "no data", not "erase").
   * `insert_only`: an existing contact is left as it is (adding addresses to a list).
   */
  onExisting: "overwrite" | "keep_blank" | "insert_only";
  /** Merge patch for an existing contact's custom fields when it must keep its `null`s (single-contact API). */
  customFieldsPatch?: CustomFieldsPatch;
};

/**
 * One INSERT … SELECT over a bound JSON array of rows (so any number of rows costs two bound parameters, well
 * under D1's 100), creating each contact or updating it on (account, email_key). The suppression list is joined
 * in, so an address that is suppressed is stored `unsubscribed` in the same statement, and an existing subscribed
 * contact of such an address moves to `unsubscribed`. Returns the id of every row written.
 */
export function contactUpsertSql(accountId: string, rows: ContactUpsert[], options: UpsertOptions): SQL {
  const payload = rows.map((row) => ({
    id: row.id,
    email: row.address.email,
    key: row.address.key,
    sup: row.address.suppressionKey,
    ...row.fields,
    ...(row.customFields ? { custom_fields: row.customFields } : {}),
  }));
  const columns = options.columns.map((column) => sql.raw(column));
  const values = options.columns.map((column) => sql.raw(`r.value ->> '${column}'`));
  const insert = sql`INSERT INTO contacts (id, account_id, email, email_key, custom_fields, status${sql.join(
    columns.map((column) => sql`, ${column}`),
  )})
    SELECT r.value ->> 'id', ${accountId}, r.value ->> 'email', r.value ->> 'key',
      json_patch('{}', coalesce(r.value -> 'custom_fields', '{}')),
      CASE WHEN s.email IS NULL THEN 'subscribed' ELSE 'unsubscribed' END${sql.join(values.map((value) => sql`, ${value}`))}
    FROM json_each(${JSON.stringify(payload)}) AS r
    LEFT JOIN suppressions AS s ON s.account_id = ${accountId} AND s.email = r.value ->> 'sup'
    WHERE true`;
  if (options.onExisting === "insert_only") return sql`${insert} ON CONFLICT (account_id, email_key) DO NOTHING RETURNING id`;

  const sets: SQL[] = options.columns.map((column) =>
    options.onExisting === "overwrite"
      ? sql.raw(`${column} = excluded.${column}`)
      : sql.raw(`${column} = coalesce(excluded.${column}, contacts.${column})`),
  );
  if (options.customFieldsPatch) {
    sets.push(sql`custom_fields = json_patch(contacts.custom_fields, ${JSON.stringify(options.customFieldsPatch)})`);
  } else if (rows.some((row) => row.customFields)) {
    sets.push(sql`custom_fields = json_patch(contacts.custom_fields, excluded.custom_fields)`);
  }
  // excluded.status is 'unsubscribed' only when the address is suppressed; bounced and complained stay as they are.
  sets.push(sql`status = CASE WHEN excluded.status = 'unsubscribed' AND contacts.status = 'subscribed' THEN 'unsubscribed' ELSE contacts.status END`);
  sets.push(sql`updated_at = ${nowSql}`);
  return sql`${insert} ON CONFLICT (account_id, email_key) DO UPDATE SET ${sql.join(sets, sql`, `)} RETURNING id`;
}

/**
 * Adds the contacts with these keys to a list, skipping existing memberships. The list's ownership is re-checked
 * in the statement, so a list deleted meanwhile never gets members. Returns the contact ids newly added.
 */
export function addMembersByKeySql(accountId: string, listId: string, keys: string[]): SQL {
  // `IN (SELECT … json_each)` rather than a join: the planner then probes the (account_id, email_key) index once
  // per key, where a join may scan the account's contacts for every key.
  return sql`INSERT INTO list_members (list_id, contact_id)
    SELECT ${listId}, c.id FROM contacts AS c
    WHERE c.account_id = ${accountId} AND c.email_key IN (SELECT value FROM json_each(${JSON.stringify(keys)}))
      AND EXISTS (SELECT 1 FROM lists WHERE id = ${listId} AND account_id = ${accountId})
    ON CONFLICT (list_id, contact_id) DO NOTHING RETURNING contact_id`;
}

/** Adds one contact (by key) to several lists of the account. */
export function addToListsSql(accountId: string, key: string, listIds: string[]): SQL {
  return sql`INSERT INTO list_members (list_id, contact_id)
    SELECT l.id, c.id FROM lists AS l, contacts AS c
    WHERE l.id IN (SELECT value FROM json_each(${JSON.stringify(listIds)})) AND l.account_id = ${accountId}
      AND c.account_id = ${accountId} AND c.email_key = ${key}
    ON CONFLICT (list_id, contact_id) DO NOTHING`;
}

/** The subset of `listIds` that are lists of the account. */
export async function ownedListIds(db: DrizzleD1Database, accountId: string, listIds: string[]): Promise<Set<string>> {
  if (listIds.length === 0) return new Set();
  const rows = await db
    .select({ id: lists.id })
    .from(lists)
    .where(and(eq(lists.accountId, accountId), sql`${lists.id} IN (SELECT value FROM json_each(${JSON.stringify(listIds)}))`))
    .all();
  return new Set(rows.map((row) => row.id));
}
