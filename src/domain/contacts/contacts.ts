// Contacts: create-or-update by address, custom fields, list memberships. This module owns the contacts' queries;
// the contacts and lists routes and the import consumer all go through it, so every path applies the same keys,
// caps and suppression rule.

import { and, desc, eq, gt, getTableColumns, sql, type SQL } from "drizzle-orm";
import { inJsonArray, sqlNow, statement, type AccountDb, batch } from "../../db/client";
import { contacts, listMembers, lists, suppressions } from "../../db/schema";
import { owned } from "../owned";
import { topicSubscriptionsOf } from "../topics/topics";
import type { FieldErrors } from "../../errors";
import { keysetPage } from "../pagination";
import { newId } from "../../lib/ids";
import type { ContactAddress } from "./email";

export const contactStatuses = ["subscribed", "unsubscribed", "bounced", "complained", "pending"] as const;

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

/**
 * The placeholders a message to the contact can use, as flat strings (they are stored with a queued message):
 * `{{email}}`, `{{first_name|there}}` and the other text fields (empty when missing, so a fallback applies), and
 * each custom field as `{{custom_fields.<key>}}`. Campaigns and automation steps both render from this.
 */
export function contactVariables(contact: ContactRow): Record<string, string> {
  const variables: Record<string, string> = {
    email: contact.email,
    first_name: contact.firstName ?? "",
    last_name: contact.lastName ?? "",
    company: contact.company ?? "",
    phone: contact.phone ?? "",
    country: contact.country ?? "",
  };
  for (const [key, value] of Object.entries(contact.customFields)) variables[`custom_fields.${key}`] = String(value);
  return variables;
}

/** The ids of the contact's lists, oldest membership first, as one column of the contact's own row. */
// The outer column is spelled out: drizzle writes a single-table select's columns unqualified ("id").
const contactListIds = sql<string[]>`(SELECT json_group_array(list_id) FROM (SELECT m.list_id FROM list_members AS m
  WHERE m.contact_id = "contacts"."id" ORDER BY m.created_at, m.list_id))`.mapWith((value: string) => JSON.parse(value) as string[]);

/** Select shape of a contact as the API shows it: the row plus its list ids, in one query. */
const contactSelection = { ...getTableColumns(contacts), lists: contactListIds };
export type ContactWithLists = ContactRow & { lists: string[] };

type ContactSqlRow = Omit<ContactWithLists, "customFields" | "lists"> & { customFields: string; lists: string };

/** Reads contacts by a raw condition in a D1 batch: same row shape as `contactSelection`, mapped by `contactFromSql`. */
function contactReadStatement(db: AccountDb, where: SQL): D1PreparedStatement {
  return statement(
    db,
    sql`SELECT c.id, c.account_id AS accountId, c.email, c.email_key AS emailKey, c.first_name AS firstName, c.last_name AS lastName,
      c.company, c.phone, c.country, c.custom_fields AS customFields, c.status, c.consent_form_id AS consentFormId,
      c.consented_at AS consentedAt, c.consent_ip AS consentIp,
      c.verification_result AS verificationResult, c.verification_status AS verificationStatus,
      c.verification_sub_status AS verificationSubStatus, c.verified_at AS verifiedAt, c.created_at AS createdAt, c.updated_at AS updatedAt,
      (SELECT json_group_array(list_id) FROM (SELECT list_id FROM list_members WHERE contact_id = c.id ORDER BY created_at, list_id)) AS lists
      FROM contacts AS c WHERE ${where}`,
  );
}

function contactFromSql(row: ContactSqlRow): ContactWithLists {
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
    // Recorded by a sign-up form (docs/forms.md): the proof of consent a list's owner may be asked for.
    consent: row.consentFormId && row.consentedAt ? { form_id: row.consentFormId, at: row.consentedAt, ip: row.consentIp } : null,
    // The address's last check in this account (docs/contacts.md, "Verification"); null until one ran.
    verification:
      row.verificationResult && row.verifiedAt
        ? { result: row.verificationResult, status: row.verificationStatus, sub_status: row.verificationSubStatus, checked_at: row.verifiedAt }
        : null,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

/** Contacts as the API shows them: each with its subscription to every topic of the account (one more read for them all). */
export async function serializeContactsWithTopics(db: AccountDb, accountId: string, rows: ContactWithLists[]) {
  const topics = await topicSubscriptionsOf(
    db,
    accountId,
    rows.map((row) => row.id),
  );
  return rows.map((row) => ({ ...serializeContact(row), topics: topics.get(row.id) ?? {} }));
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
  sets.push(sql`updated_at = ${sqlNow}`);
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

/** Text fields present in a request; an empty string clears like `null`, a missing field is left alone. */
export function givenTextFields(input: Partial<Record<ContactTextField, string | null | undefined>>) {
  const fields: Partial<Record<ContactTextField, string | null>> = {};
  for (const field of contactTextFields) {
    const value = input[field];
    if (value !== undefined) fields[field] = value === "" ? null : value;
  }
  return fields;
}

const ownedListsWhere = (accountId: string, listIds: string[]) => and(eq(lists.accountId, accountId), inJsonArray(lists.id, listIds));

export type SaveContactInput = {
  address: ContactAddress;
  fields: Partial<Record<ContactTextField, string | null>>;
  customFields?: CustomFieldsPatch;
  /** Lists to add the contact to, as given (errors name their index). */
  listIds: string[];
};

export type SaveContactOutcome = { kind: "invalid"; errors: FieldErrors } | { kind: "saved"; created: boolean; contact: ContactWithLists };

/**
 * Creates the contact of this address or updates it: given fields replace the stored ones, custom fields merge,
 * lists are added. Unknown lists and custom fields that would outgrow their cap once merged are refused first.
 */
export async function saveContact(db: AccountDb, accountId: string, input: SaveContactInput): Promise<SaveContactOutcome> {
  const { address, fields, customFields } = input;
  const listIds = [...new Set(input.listIds)];

  // One round trip for what must be checked before writing: the lists exist here, and the merged custom fields fit.
  if (listIds.length > 0 || customFields) {
    const [existing, owned] = await db.batch([
      db
        .select({ customFields: contacts.customFields })
        .from(contacts)
        .where(and(eq(contacts.accountId, accountId), eq(contacts.emailKey, address.key))),
      db.select({ id: lists.id }).from(lists).where(ownedListsWhere(accountId, listIds)),
    ]);
    const errors: FieldErrors = {};
    const ownedIds = new Set(owned.map((list) => list.id));
    input.listIds.forEach((id, index) => {
      if (!ownedIds.has(id)) errors[`lists.${index}`] = ["No list with this id in your account"];
    });
    const problem = customFields && customFieldsProblem(mergeCustomFields(existing[0]?.customFields ?? {}, customFields));
    if (problem) errors.custom_fields = [problem];
    if (Object.keys(errors).length > 0) return { kind: "invalid", errors };
  }

  const upsert: ContactUpsert = { id: newId("con"), address, fields, ...(customFields ? { customFields } : {}) };
  const [written, , saved] = await batch(db, [
    statement(
      db,
      contactUpsertSql(accountId, [upsert], {
        columns: Object.keys(fields) as ContactTextField[],
        onExisting: "overwrite",
        ...(customFields ? { customFieldsPatch: customFields } : {}),
      }),
    ),
    statement(db, addToListsSql(accountId, address.key, listIds)),
    contactReadStatement(db, sql`c.account_id = ${accountId} AND c.email_key = ${address.key}`),
  ]);
  const row = saved?.results[0];
  if (!row) throw new Error("The contact was written but could not be read back");
  // A new address keeps the id minted here; an existing one returns its own.
  const writtenId = (written?.results[0] as { id: string } | undefined)?.id;
  return { kind: "saved", created: writtenId === upsert.id, contact: contactFromSql(row as ContactSqlRow) };
}

export type ContactFilters = {
  /** `email_key` of the address looked up. */
  emailKey?: string;
  status?: ContactRow["status"];
  /** ISO 8601; contacts created strictly after. */
  createdAfter?: string;
  listId?: string;
  /** Text found anywhere in the address or the full name, without case (ASCII letters). */
  search?: string;
};

/** A page of the account's contacts, newest first (`limit + 1` rows, for `pageOf`), or no such list. */
export async function listContacts(
  db: AccountDb,
  accountId: string,
  filters: ContactFilters,
  page: { cursor?: string; limit: number },
): Promise<{ kind: "list_not_found" } | { kind: "page"; rows: ContactWithLists[] }> {
  const conditions = [eq(contacts.accountId, accountId)];
  if (filters.emailKey !== undefined) conditions.push(eq(contacts.emailKey, filters.emailKey));
  if (filters.status) conditions.push(eq(contacts.status, filters.status));
  if (filters.createdAfter) conditions.push(gt(contacts.createdAt, filters.createdAfter));
  // instr, not LIKE: the searched text's % and _ are plain characters.
  if (filters.search)
    conditions.push(
      sql`(instr(lower(${contacts.email}), lower(${filters.search})) > 0 OR instr(lower(trim(coalesce(${contacts.firstName}, '') || ' ' || coalesce(${contacts.lastName}, ''))), lower(${filters.search})) > 0)`,
    );
  if (filters.listId)
    conditions.push(sql`${contacts.id} IN (SELECT ${listMembers.contactId} FROM ${listMembers} WHERE ${listMembers.listId} = ${filters.listId})`);
  const keyset = keysetPage({ createdAt: contacts.createdAt, id: contacts.id }, page.cursor);

  const [list, rows] = await db.batch([
    db
      .select({ id: lists.id })
      .from(lists)
      .where(owned(lists, accountId, filters.listId ?? "")),
    db
      .select(contactSelection)
      .from(contacts)
      .where(and(...conditions, keyset.where))
      .orderBy(...keyset.orderBy)
      .limit(page.limit + 1),
  ]);
  if (filters.listId && list.length === 0) return { kind: "list_not_found" };
  return { kind: "page", rows };
}

export async function findContact(db: AccountDb, accountId: string, contactId: string): Promise<ContactWithLists | undefined> {
  return db
    .select(contactSelection)
    .from(contacts)
    .where(owned(contacts, accountId, contactId))
    .get();
}

/** The first `limit` contacts matching a condition over `contacts`, newest first, as the API shows them: for a caller's batch. */
export function contactsMatchingQuery(db: AccountDb, where: SQL, limit: number) {
  return db.select(contactSelection).from(contacts).where(where).orderBy(desc(contacts.createdAt), desc(contacts.id)).limit(limit);
}

export type ContactPatch = {
  address?: ContactAddress;
  fields: Partial<Record<ContactTextField, string | null>>;
  customFields?: CustomFieldsPatch;
  status?: "subscribed" | "unsubscribed";
};

export type UpdateContactOutcome =
  | { kind: "not_found" }
  /** Another contact of the account has the new address. */
  | { kind: "address_taken" }
  | { kind: "invalid"; errors: FieldErrors }
  | { kind: "updated"; contact: ContactWithLists };

/**
 * Changes a contact. Rules: the new address must not belong to another contact; merged custom fields must fit;
 * a suppressed address (the new one, or the current one if unchanged) cannot be resubscribed, and a subscribed
 * contact whose address is suppressed is stored `unsubscribed`.
 */
export async function updateContact(db: AccountDb, accountId: string, contactId: string, patch: ContactPatch): Promise<UpdateContactOutcome> {
  const newAddress = patch.address;
  const where = owned(contacts, accountId, contactId);

  // One round trip: the contact, whoever holds the new address already, and whether either address is suppressed.
  const [found, holders, newSuppressed] = await db.batch([
    db
      .select({
        emailKey: contacts.emailKey,
        customFields: contacts.customFields,
        status: contacts.status,
        suppressed:
          sql<number>`EXISTS (SELECT 1 FROM suppressions AS s WHERE s.account_id = ${accountId} AND s.email = lower("contacts"."email_key"))`.mapWith(
            Number,
          ),
      })
      .from(contacts)
      .where(where),
    db
      .select({ id: contacts.id })
      .from(contacts)
      .where(and(eq(contacts.accountId, accountId), eq(contacts.emailKey, newAddress?.key ?? ""))),
    db
      .select({ email: suppressions.email })
      .from(suppressions)
      .where(and(eq(suppressions.accountId, accountId), eq(suppressions.email, newAddress?.suppressionKey ?? ""))),
  ]);
  const current = found[0];
  if (!current) return { kind: "not_found" };
  const addressChanges = newAddress !== undefined && newAddress.key !== current.emailKey;
  if (addressChanges && holders.some((holder) => holder.id !== contactId)) return { kind: "address_taken" };
  const suppressed = addressChanges ? newSuppressed.length > 0 : current.suppressed === 1;

  const errors: FieldErrors = {};
  const customFields = patch.customFields && mergeCustomFields(current.customFields, patch.customFields);
  const problem = customFields && customFieldsProblem(customFields);
  if (problem) errors.custom_fields = [problem];
  if (patch.status === "subscribed" && suppressed) {
    errors.status = ["The address is on the suppression list; remove it there (DELETE /suppressions/{email}) before resubscribing"];
  }
  if (Object.keys(errors).length > 0) return { kind: "invalid", errors };

  let status = patch.status ?? current.status;
  if (suppressed && status === "subscribed") status = "unsubscribed";
  const { fields } = patch;
  const [, saved] = await db.batch([
    db
      .update(contacts)
      .set({
        ...(newAddress ? { email: newAddress.email, emailKey: newAddress.key } : {}),
        firstName: fields.first_name,
        lastName: fields.last_name,
        company: fields.company,
        phone: fields.phone,
        country: fields.country,
        // Merged in SQL from the stored value, so a concurrent update of other keys is not lost.
        ...(patch.customFields ? { customFields: sql`json_patch(${contacts.customFields}, ${JSON.stringify(patch.customFields)})` } : {}),
        status,
        updatedAt: sql`(${sqlNow})`,
      })
      .where(where),
    db.select(contactSelection).from(contacts).where(where),
  ]);
  const contact = saved[0];
  return contact ? { kind: "updated", contact } : { kind: "not_found" };
}

/** Deletes a contact and its list memberships; false if the account has no such contact. */
export async function deleteContact(db: AccountDb, accountId: string, contactId: string): Promise<boolean> {
  const [, deleted] = await db.batch([
    db
      .delete(listMembers)
      .where(
        sql`${listMembers.contactId} IN (SELECT ${contacts.id} FROM ${contacts} WHERE ${contacts.id} = ${contactId} AND ${contacts.accountId} = ${accountId})`,
      ),
    db
      .delete(contacts)
      .where(owned(contacts, accountId, contactId))
      .returning({ id: contacts.id }),
  ]);
  return deleted.length > 0;
}
