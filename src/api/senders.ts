import {
  createSender as addSender,
  deleteSender as removeSender,
  findSender,
  listSenders as findSenders,
  updateSender as changeSender,
  type SenderRow,
} from "../domain/campaigns/senders";
import { senderChangeInput, senderInput } from "../domain/campaigns/input";
import { notFound } from "../errors";
import { orRefuse } from "../http/refusals";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { pageOf } from "../lib/pagination";

const SenderSchema = z
  .object({
    id: z.string().openapi({ example: "snd_4fK9pQ2mZ7xB1vL8tR3cWd" }),
    name: z.string(),
    email: z.string(),
    reply_to: z.string().nullable(),
    domain_id: z.string().openapi({ description: "The verified domain the address is on" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Sender");

function serializeSender(row: SenderRow) {
  return {
    id: row.id,
    name: row.name,
    email: row.email,
    reply_to: row.replyTo,
    domain_id: row.domainId,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

const route = (method: "get" | "post" | "patch" | "delete", path: string, summary: string) => ({ method, path, summary, tags: ["Senders"] });
const unverified = "The address is not on a verified sending domain of the account (`errors.email`), or a field is invalid";

const listSenders = keyedRoute("campaigns", {
  ...route("get", "/senders", "List senders"),
  request: { query: PaginationQuery },
  responses: { 200: jsonResponse(paginated(SenderSchema, "SenderList"), "Senders, newest first") },
});
const createSender = keyedRoute(
  "campaigns",
  {
    ...route("post", "/senders", "Create a sender"),
    description: "The name and address campaigns are sent from. The address must be on a verified sending domain of the account.",
    request: { body: jsonBody(senderInput) },
    responses: { 201: jsonResponse(SenderSchema, "The sender"), 422: errorResponse(unverified) },
  },
  { liveKeyOnly: "Creating a sender" },
);
const getSender = keyedRoute("campaigns", {
  ...route("get", "/senders/{id}", "One sender"),
  request: { params: IdParam("snd") },
  responses: { 200: jsonResponse(SenderSchema, "The sender"), 404: errorResponse("No such sender") },
});
const updateSender = keyedRoute(
  "campaigns",
  {
    ...route("patch", "/senders/{id}", "Change a sender"),
    description: "The address's domain (the new address, or the current one) is checked again: it must still be verified.",
    request: { params: IdParam("snd"), body: jsonBody(senderChangeInput) },
    responses: { 200: jsonResponse(SenderSchema, "The sender"), 404: errorResponse("No such sender"), 422: errorResponse(unverified) },
  },
  { liveKeyOnly: "Changing a sender" },
);
const deleteSender = keyedRoute(
  "campaigns",
  {
    ...route("delete", "/senders/{id}", "Delete a sender"),
    description: "Campaigns that name a deleted sender are refused when sent, until they are given another.",
    request: { params: IdParam("snd") },
    responses: { 200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"), 404: errorResponse("No such sender") },
  },
  { liveKeyOnly: "Deleting a sender" },
);

export const senderRoutes = createRouter()
  .openapi(listSenders, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const rows = await findSenders(c.var.ctx.db, c.get("auth").account.id, { cursor, limit });
    return c.json(pageOf(rows, limit, serializeSender), 200);
  })
  .openapi(createSender, async (c) => {
    const body = c.req.valid("json");
    const { sender } = orRefuse(
      await addSender(c.var.ctx, c.get("auth").account.id, { name: body.name, email: body.email, replyTo: body.reply_to ?? null }),
    );
    return c.json(serializeSender(sender), 201);
  })
  .openapi(getSender, async (c) => {
    const row = await findSender(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!row) throw notFound("Sender");
    return c.json(serializeSender(row), 200);
  })
  .openapi(updateSender, async (c) => {
    const body = c.req.valid("json");
    const outcome = orRefuse(
      await changeSender(c.var.ctx, c.get("auth").account.id, c.req.valid("param").id, {
        name: body.name,
        email: body.email,
        replyTo: body.reply_to,
      }),
    );
    if (outcome.kind === "not_found") throw notFound("Sender");
    return c.json(serializeSender(outcome.sender), 200);
  })
  .openapi(deleteSender, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await removeSender(c.var.ctx.db, c.get("auth").account.id, id))) throw notFound("Sender");
    return c.json({ id, deleted: true as const }, 200);
  });
