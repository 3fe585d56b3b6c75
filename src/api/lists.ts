import { contactAddress, type ContactAddress } from "../domain/contacts/email";
import {
  addMembersByAddress,
  addMembersById,
  createList as insertList,
  findList,
  listExists,
  listLists as findLists,
  removeMember as removeListMember,
  serializeList,
  updateList as changeList,
} from "../domain/contacts/lists";
import { listChangeInput, listInput, listMembersInput, MEMBERS_PER_REQUEST } from "../domain/contacts/input";
import { notFound, validationError, type FieldErrors } from "../errors";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { pageOf } from "../lib/pagination";
import { deleteListOrThrow } from "../http/contacts";

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

const AddMembersResultSchema = z
  .object({
    added: z.array(z.string()).openapi({ description: "Contact ids added to the list" }),
    already: z.array(z.string()).openapi({ description: "Contact ids that were already in the list" }),
    unknown: z.array(z.string()).openapi({ description: "Given contact ids that are not contacts of the account" }),
    created: z.array(z.string()).openapi({ description: "Contact ids created for addresses that were new (also in `added`)" }),
  })
  .openapi("AddListMembersResult");

const MemberParams = IdParam("lst").extend({
  contact_id: z
    .string()
    .min(1)
    .max(64)
    .openapi({ param: { name: "contact_id", in: "path" }, example: "con_3kTz9Qm1bX7cV2nL8pR4sD" }),
});

const createList = keyedRoute(
  "contacts",
  {
    method: "post",
    path: "/lists",
    tags: ["Lists"],
    summary: "Create a list",
    request: { body: jsonBody(listInput) },
    responses: { 201: jsonResponse(ListSchema, "The list") },
  },
  { liveKeyOnly: "Creating a list" },
);

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

const updateList = keyedRoute(
  "contacts",
  {
    method: "patch",
    path: "/lists/{id}",
    tags: ["Lists"],
    summary: "Rename a list or change its description",
    request: { params: IdParam("lst"), body: jsonBody(listChangeInput) },
    responses: { 200: jsonResponse(ListSchema, "The list"), 404: errorResponse("No such list") },
  },
  { liveKeyOnly: "Changing a list" },
);

const deleteList = keyedRoute(
  "contacts",
  {
    method: "delete",
    path: "/lists/{id}",
    tags: ["Lists"],
    summary: "Delete a list (its contacts stay)",
    request: { params: IdParam("lst") },
    responses: {
      200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"),
      404: errorResponse("No such list"),
      409: errorResponse("A campaign that has not finished (draft, scheduled, sending) targets or excludes this list"),
    },
  },
  { liveKeyOnly: "Deleting a list" },
);

const addMembers = keyedRoute(
  "contacts",
  {
    method: "post",
    path: "/lists/{id}/contacts",
    tags: ["Lists"],
    summary: "Add contacts to a list, by id or by address",
    description: `Up to ${MEMBERS_PER_REQUEST} per request. Addresses that are not contacts yet are created; existing contacts are not changed.`,
    request: { params: IdParam("lst"), body: jsonBody(listMembersInput) },
    responses: { 200: jsonResponse(AddMembersResultSchema, "What was added"), 404: errorResponse("No such list") },
  },
  { liveKeyOnly: "Adding contacts to a list" },
);

const removeMember = keyedRoute(
  "contacts",
  {
    method: "delete",
    path: "/lists/{id}/contacts/{contact_id}",
    tags: ["Lists"],
    summary: "Remove a contact from a list (the contact stays)",
    request: { params: MemberParams },
    responses: {
      200: jsonResponse(z.object({ list_id: z.string(), contact_id: z.string(), deleted: z.literal(true) }), "Removed"),
      404: errorResponse("No such list, or the contact is not in it"),
    },
  },
  { liveKeyOnly: "Removing a contact from a list" },
);

export const listRoutes = createRouter()
  .openapi(createList, async (c) => {
    const body = c.req.valid("json");
    const row = await insertList(c.var.ctx.db, c.get("auth").account.id, { name: body.name, description: body.description ?? null });
    if (!row) throw notFound("List");
    return c.json(serializeList(row), 201);
  })
  .openapi(listLists, async (c) => {
    const query = c.req.valid("query");
    const rows = await findLists(c.var.ctx.db, c.get("auth").account.id, { cursor: query.cursor, limit: query.limit });
    return c.json(pageOf(rows, query.limit, serializeList), 200);
  })
  .openapi(getList, async (c) => {
    const row = await findList(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!row) throw notFound("List");
    return c.json(serializeList(row), 200);
  })
  .openapi(updateList, async (c) => {
    const body = c.req.valid("json");
    const row = await changeList(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id, { name: body.name, description: body.description });
    if (!row) throw notFound("List");
    return c.json(serializeList(row), 200);
  })
  .openapi(deleteList, async (c) => {
    const { id } = c.req.valid("param");
    await deleteListOrThrow(c.var.ctx.db, c.get("auth").account.id, id);
    return c.json({ id, deleted: true as const }, 200);
  })
  .openapi(addMembers, async (c) => {
    const body = c.req.valid("json");
    const { id: listId } = c.req.valid("param");
    const accountId = c.get("auth").account.id;
    if (!(await listExists(c.var.ctx.db, accountId, listId))) throw notFound("List");

    if (body.emails) {
      const errors: FieldErrors = {};
      const addresses: ContactAddress[] = [];
      body.emails.forEach((email, index) => {
        const address = contactAddress(email);
        if ("error" in address) errors[`emails.${index}`] = [address.error];
        else addresses.push(address);
      });
      if (Object.keys(errors).length > 0) throw validationError(errors);
      return c.json(await addMembersByAddress(c.var.ctx.db, accountId, listId, addresses), 200);
    }
    return c.json(await addMembersById(c.var.ctx.db, accountId, listId, body.contact_ids ?? []), 200);
  })
  .openapi(removeMember, async (c) => {
    const { id: listId, contact_id: contactId } = c.req.valid("param");
    if (!(await removeListMember(c.var.ctx.db, c.get("auth").account.id, listId, contactId))) throw notFound("List membership");
    return c.json({ list_id: listId, contact_id: contactId, deleted: true as const }, 200);
  });
