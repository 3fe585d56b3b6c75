import { and, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { listMembers, lists } from "../db/schema";
import { addMembersByKeySql, contactUpsertSql, sqlStatement, type ContactUpsert } from "../domain/contacts/contacts";
import { contactAddress } from "../domain/contacts/email";
import { listSelection, serializeList } from "../domain/contacts/lists";
import { notFound, validationError, type FieldErrors } from "../errors";
import { newId, nowIso } from "../lib/ids";
import { createRouter, evenWithFieldErrors, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { keysetPage, pageOf } from "../lib/pagination";

const MEMBERS_PER_REQUEST = 1000;

const ListSchema = z
  .object({
    id: z.string().openapi({ example: "lst_5cN8qW2mZ7xB1vK4tR9pLd" }),
    name: z.string(),
    description: z.string().nullable(),
    contact_count: z.number().int().openapi({ description: "Contacts in the list, whatever their status" }),
    subscriber_count: z.number().int().openapi({ description: "Contacts in the list whose status is `subscribed`" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("List");

const CreateListSchema = z
  .object({
    name: z.string().trim().min(1).max(200),
    description: z.string().trim().max(1000).nullable().optional(),
  })
  .strict()
  .openapi("CreateList");

const UpdateListSchema = z
  .object({
    name: z.string().trim().min(1).max(200).optional(),
    description: z.string().trim().max(1000).nullable().optional(),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { message: "Send name or description" })
  .openapi("UpdateList");

const AddMembersSchema = z
  .object({
    contact_ids: z.array(z.string().min(1).max(64)).min(1).max(MEMBERS_PER_REQUEST).optional(),
    emails: z
      .array(z.string().max(320))
      .min(1)
      .max(MEMBERS_PER_REQUEST)
      .optional()
      .openapi({ description: "Addresses; each is created as a contact if new (stored `unsubscribed` if suppressed)" }),
  })
  .strict()
  .refine((body) => (body.contact_ids === undefined) !== (body.emails === undefined), { message: "Send either contact_ids or emails", ...evenWithFieldErrors })
  .openapi("AddListMembers");

const AddMembersResultSchema = z
  .object({
    added: z.array(z.string()).openapi({ description: "Contact ids added to the list" }),
    already: z.array(z.string()).openapi({ description: "Contact ids that were already in the list" }),
    unknown: z.array(z.string()).openapi({ description: "Given contact ids that are not contacts of the account" }),
    created: z.array(z.string()).openapi({ description: "Contact ids created for addresses that were new (also in `added`)" }),
  })
  .openapi("AddListMembersResult");

const MemberParams = IdParam("lst").extend({
  contact_id: z.string().min(1).max(64).openapi({ param: { name: "contact_id", in: "path" }, example: "con_3kTz9Qm1bX7cV2nL8pR4sD" }),
});

const createList = keyedRoute("contacts", {
  method: "post",
  path: "/lists",
  tags: ["Lists"],
  summary: "Create a list",
  request: { body: jsonBody(CreateListSchema) },
  responses: { 201: jsonResponse(ListSchema, "The list") },
});

const listLists = keyedRoute("contacts", {
  method: "get",
  path: "/lists",
  tags: ["Lists"],
  summary: "Lists with their contact and subscriber counts, newest first",
  request: { query: PaginationQuery },
  responses: { 200: jsonResponse(paginated(ListSchema, "ListPage"), "A page of lists") },
});

const getList = keyedRoute("contacts", {
  method: "get",
  path: "/lists/{id}",
  tags: ["Lists"],
  summary: "One list with its counts",
  request: { params: IdParam("lst") },
  responses: { 200: jsonResponse(ListSchema, "The list"), 404: errorResponse("No such list") },
});

const updateList = keyedRoute("contacts", {
  method: "patch",
  path: "/lists/{id}",
  tags: ["Lists"],
  summary: "Rename a list or change its description",
  request: { params: IdParam("lst"), body: jsonBody(UpdateListSchema) },
  responses: { 200: jsonResponse(ListSchema, "The list"), 404: errorResponse("No such list") },
});

const deleteList = keyedRoute("contacts", {
  method: "delete",
  path: "/lists/{id}",
  tags: ["Lists"],
  summary: "Delete a list (its contacts stay)",
  request: { params: IdParam("lst") },
  responses: { 200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"), 404: errorResponse("No such list") },
});

const addMembers = keyedRoute("contacts", {
  method: "post",
  path: "/lists/{id}/contacts",
  tags: ["Lists"],
  summary: "Add contacts to a list, by id or by address",
  description: `Up to ${MEMBERS_PER_REQUEST} per request. Addresses that are not contacts yet are created; existing contacts are not changed.`,
  request: { params: IdParam("lst"), body: jsonBody(AddMembersSchema) },
  responses: { 200: jsonResponse(AddMembersResultSchema, "What was added"), 404: errorResponse("No such list") },
});

const removeMember = keyedRoute("contacts", {
  method: "delete",
  path: "/lists/{id}/contacts/{contact_id}",
  tags: ["Lists"],
  summary: "Remove a contact from a list (the contact stays)",
  request: { params: MemberParams },
  responses: {
    200: jsonResponse(z.object({ list_id: z.string(), contact_id: z.string(), deleted: z.literal(true) }), "Removed"),
    404: errorResponse("No such list, or the contact is not in it"),
  },
});

export const listRoutes = createRouter()
  .openapi(createList, async (c) => {
    const body = c.req.valid("json");
    const db = drizzle(c.env.DB);
    const id = newId("lst");
    await db.insert(lists).values({ id, accountId: c.get("auth").account.id, name: body.name, description: body.description ?? null }).run();
    const row = await db.select(listSelection).from(lists).where(eq(lists.id, id)).get();
    if (!row) throw notFound("List");
    return c.json(serializeList(row), 201);
  })
  .openapi(listLists, async (c) => {
    const query = c.req.valid("query");
    const page = keysetPage({ createdAt: lists.createdAt, id: lists.id }, query.cursor);
    const rows = await drizzle(c.env.DB)
      .select(listSelection)
      .from(lists)
      .where(and(eq(lists.accountId, c.get("auth").account.id), page.where))
      .orderBy(...page.orderBy)
      .limit(query.limit + 1)
      .all();
    return c.json(pageOf(rows, query.limit, serializeList), 200);
  })
  .openapi(getList, async (c) => {
    const row = await drizzle(c.env.DB)
      .select(listSelection)
      .from(lists)
      .where(and(eq(lists.id, c.req.valid("param").id), eq(lists.accountId, c.get("auth").account.id)))
      .get();
    if (!row) throw notFound("List");
    return c.json(serializeList(row), 200);
  })
  .openapi(updateList, async (c) => {
    const body = c.req.valid("json");
    const db = drizzle(c.env.DB);
    const where = and(eq(lists.id, c.req.valid("param").id), eq(lists.accountId, c.get("auth").account.id));
    const [, rows] = await db.batch([
      db.update(lists).set({ name: body.name, description: body.description, updatedAt: nowIso() }).where(where),
      db.select(listSelection).from(lists).where(where),
    ]);
    const row = rows[0];
    if (!row) throw notFound("List");
    return c.json(serializeList(row), 200);
  })
  .openapi(deleteList, async (c) => {
    const { id } = c.req.valid("param");
    const accountId = c.get("auth").account.id;
    const db = drizzle(c.env.DB);
    const [, deleted] = await db.batch([
      db.delete(listMembers).where(sql`${listMembers.listId} IN (SELECT ${lists.id} FROM ${lists} WHERE ${lists.id} = ${id} AND ${lists.accountId} = ${accountId})`),
      db
        .delete(lists)
        .where(and(eq(lists.id, id), eq(lists.accountId, accountId)))
        .returning({ id: lists.id }),
    ]);
    if (deleted.length === 0) throw notFound("List");
    return c.json({ id, deleted: true as const }, 200);
  })
  .openapi(addMembers, async (c) => {
    const body = c.req.valid("json");
    const { id: listId } = c.req.valid("param");
    const accountId = c.get("auth").account.id;
    const db = drizzle(c.env.DB);
    const list = await db
      .select({ id: lists.id })
      .from(lists)
      .where(and(eq(lists.id, listId), eq(lists.accountId, accountId)))
      .get();
    if (!list) throw notFound("List");

    if (body.emails) {
      const errors: FieldErrors = {};
      const upserts = new Map<string, ContactUpsert>();
      body.emails.forEach((email, index) => {
        const address = contactAddress(email);
        if ("error" in address) errors[`emails.${index}`] = [address.error];
        else if (!upserts.has(address.key)) upserts.set(address.key, { id: newId("con"), address, fields: {} });
      });
      if (Object.keys(errors).length > 0) throw validationError(errors);
      const keys = [...upserts.keys()];
      // Create the new addresses, add every address's contact, then read back which contacts those are.
      const d1 = c.env.DB;
      const [created, added, members] = await d1.batch<{ id?: string; contact_id?: string }>([
        sqlStatement(d1, contactUpsertSql(accountId, [...upserts.values()], { columns: [], onExisting: "insert_only" })),
        sqlStatement(d1, addMembersByKeySql(accountId, listId, keys)),
        d1
          .prepare("SELECT id FROM contacts WHERE account_id = ?1 AND email_key IN (SELECT value FROM json_each(?2))")
          .bind(accountId, JSON.stringify(keys)),
      ]);
      const addedIds = new Set(added?.results.map((row) => row.contact_id));
      return c.json(
        {
          added: [...addedIds].filter((id): id is string => id !== undefined),
          already: (members?.results ?? []).map((row) => row.id).filter((id): id is string => id !== undefined && !addedIds.has(id)),
          unknown: [],
          created: (created?.results ?? []).map((row) => row.id).filter((id): id is string => id !== undefined),
        },
        200,
      );
    }

    const wanted = [...new Set(body.contact_ids ?? [])];
    const d1 = c.env.DB;
    const [added, known] = await d1.batch<{ id: string }>([
      d1
        .prepare(
          `INSERT INTO list_members (list_id, contact_id)
           SELECT ?1, c.id FROM contacts AS c WHERE c.account_id = ?2 AND c.id IN (SELECT value FROM json_each(?3))
             AND EXISTS (SELECT 1 FROM lists WHERE id = ?1 AND account_id = ?2)
           ON CONFLICT (list_id, contact_id) DO NOTHING RETURNING contact_id AS id`,
        )
        .bind(listId, accountId, JSON.stringify(wanted)),
      d1.prepare("SELECT id FROM contacts WHERE account_id = ?1 AND id IN (SELECT value FROM json_each(?2))").bind(accountId, JSON.stringify(wanted)),
    ]);
    const addedIds = new Set(added?.results.map((row) => row.id));
    const knownIds = new Set(known?.results.map((row) => row.id));
    return c.json(
      {
        added: wanted.filter((id) => addedIds.has(id)),
        already: wanted.filter((id) => knownIds.has(id) && !addedIds.has(id)),
        unknown: wanted.filter((id) => !knownIds.has(id)),
        created: [],
      },
      200,
    );
  })
  .openapi(removeMember, async (c) => {
    const { id: listId, contact_id: contactId } = c.req.valid("param");
    const removed = await drizzle(c.env.DB)
      .delete(listMembers)
      .where(
        and(
          eq(listMembers.listId, listId),
          eq(listMembers.contactId, contactId),
          sql`EXISTS (SELECT 1 FROM ${lists} WHERE ${lists.id} = ${listId} AND ${lists.accountId} = ${c.get("auth").account.id})`,
        ),
      )
      .returning({ contactId: listMembers.contactId })
      .all();
    if (removed.length === 0) throw notFound("List membership");
    return c.json({ list_id: listId, contact_id: contactId, deleted: true as const }, 200);
  });
