import { Hono } from "hono";
import { config } from "../config";
import { deleteInbound, downloadLinkValid, findInbound, findInboundById, listInbound } from "../domain/inbound/store";
import { errorBody, notFound } from "../errors";
import { attachmentResponse, downloadHeaders, inboundDetail, inboundSummary } from "../http/inbound";
import { pageOf } from "../lib/pagination";
import { createRouter, errorResponse, IdParam, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import type { AppEnv } from "../types";

const AttachmentSchema = z.object({
  index: z.number().int().openapi({ description: "`n` of GET /inbound/{id}/attachments/{n}" }),
  filename: z.string().nullable(),
  content_type: z.string(),
  size: z.number().int().openapi({ description: "Decoded size in bytes" }),
  content_id: z.string().nullable().openapi({ description: "For inline parts an HTML body names as `cid:`" }),
  disposition: z.enum(["attachment", "inline"]).nullable(),
});

const InboundSummarySchema = z
  .object({
    id: z.string().openapi({ example: "inb_4Qm0c2JYd7pG1rXw8LkN3e" }),
    domain_id: z.string(),
    envelope_from: z.string().openapi({ description: "MAIL FROM (empty for bounces)" }),
    envelope_to: z.string().openapi({ description: "RCPT TO: the receiving address" }),
    from: z.string().nullable().openapi({ description: "The From header, decoded", example: "Jane Doe <jane@example.org>" }),
    to: z.array(z.string()),
    cc: z.array(z.string()),
    subject: z.string().nullable(),
    date: z.string().nullable().openapi({ description: "The Date header as an ISO timestamp; null when absent or unreadable" }),
    size: z.number().int().openapi({ description: "The raw message's size in bytes" }),
    attachment_count: z.number().int(),
    auto_submitted: z
      .string()
      .nullable()
      .openapi({ description: "The Auto-Submitted header (auto-replied, auto-generated); null for a person's mail" }),
    in_reply_to_message_id: z.string().nullable().openapi({ description: "The message we sent that this mail replies to" }),
    campaign_id: z.string().nullable().openapi({ description: "That message's campaign" }),
    received_at: Timestamp,
  })
  .openapi("InboundEmailSummary");

const InboundSchema = InboundSummarySchema.extend({
  reply_to: z.string().nullable(),
  message_id: z.string().nullable().openapi({ description: "The Message-ID header" }),
  in_reply_to: z.string().nullable(),
  references: z.array(z.string()),
  text: z.string().nullable(),
  html: z.string().nullable().openapi({ description: "As received: untrusted; sanitise or sandbox it before showing it" }),
  attachments: z.array(AttachmentSchema),
  authentication: z
    .object({
      spf: z.string().nullable(),
      dkim: z.string().nullable(),
      dmarc: z.string().nullable(),
      header: z.string().nullable().openapi({ description: "The Authentication-Results header Email Routing added, as written" }),
      received_spf: z.string().nullable(),
    })
    .openapi({ description: "What Email Routing's checks said (pass, fail, none, …), shown as they are; null when it said nothing" }),
}).openapi("InboundEmail");

const ListQuery = PaginationQuery.extend({
  to: z
    .string()
    .max(320)
    .optional()
    .openapi({ param: { name: "to", in: "query" }, description: "A receiving address (the envelope recipient)" }),
  from: z
    .string()
    .max(320)
    .optional()
    .openapi({ param: { name: "from", in: "query" }, description: "The sender's address (the From header)" }),
  received_after: z.iso
    .date()
    .or(z.iso.datetime({ offset: true }))
    .optional()
    .openapi({ param: { name: "received_after", in: "query" }, description: "YYYY-MM-DD or an ISO timestamp (inclusive)" }),
  received_before: z.iso
    .date()
    .or(z.iso.datetime({ offset: true }))
    .optional()
    .openapi({ param: { name: "received_before", in: "query" }, description: "YYYY-MM-DD (the whole day) or an ISO timestamp (inclusive)" }),
});

const AttachmentParams = IdParam("inb").extend({
  n: z.coerce
    .number()
    .int()
    .min(0)
    .max(1000)
    // A coerced number takes any input as far as the generator can tell, so it would be an optional path parameter:
    // an invalid document (every path parameter is required).
    .openapi({ param: { name: "n", in: "path", required: true }, description: "The attachment's index", example: 0 }),
});

const notFoundDescription = "No such received message, or one deleted once past the retention window (RETENTION_DAYS)";

const listInboundRoute = keyedRoute("inbound", {
  method: "get",
  path: "/inbound",
  tags: ["Inbound"],
  summary: "List received mail",
  request: { query: ListQuery },
  responses: { 200: jsonResponse(paginated(InboundSummarySchema, "InboundEmailList"), "Received mail, newest first") },
});

const getInboundRoute = keyedRoute("inbound", {
  method: "get",
  path: "/inbound/{id}",
  tags: ["Inbound"],
  summary: "One received message, parsed",
  request: { params: IdParam("inb") },
  responses: { 200: jsonResponse(InboundSchema, "The message"), 404: errorResponse(notFoundDescription) },
});

const getRawRoute = keyedRoute("inbound", {
  method: "get",
  path: "/inbound/{id}/raw",
  tags: ["Inbound"],
  summary: "The received message's bytes, as they arrived",
  request: { params: IdParam("inb") },
  responses: {
    200: { description: "The raw message", content: { "message/rfc822": { schema: z.string().openapi({ format: "binary" }) } } },
    404: errorResponse(notFoundDescription),
  },
});

const getAttachmentRoute = keyedRoute("inbound", {
  method: "get",
  path: "/inbound/{id}/attachments/{n}",
  tags: ["Inbound"],
  summary: "One attachment of a received message, decoded",
  request: { params: AttachmentParams },
  responses: {
    200: {
      description: "The attachment, with its content type",
      content: { "application/octet-stream": { schema: z.string().openapi({ format: "binary" }) } },
    },
    404: errorResponse("No such message or attachment"),
  },
});

const deleteInboundRoute = keyedRoute(
  "inbound",
  {
    method: "delete",
    path: "/inbound/{id}",
    tags: ["Inbound"],
    summary: "Delete a received message, its raw bytes and attachments",
    request: { params: IdParam("inb") },
    responses: {
      200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"),
      404: errorResponse(notFoundDescription),
    },
  },
  { liveKeyOnly: "Deleting received mail" },
);

export const inboundRoutes = createRouter()
  .openapi(listInboundRoute, async (c) => {
    const { cursor, limit, to, from, received_after, received_before } = c.req.valid("query");
    const filters = { to, from, receivedAfter: received_after, receivedBefore: received_before };
    const rows = await listInbound(c.var.ctx.db, c.get("auth").account.id, filters, { cursor, limit });
    return c.json(pageOf(rows, limit, inboundSummary), 200);
  })
  .openapi(getInboundRoute, async (c) => {
    const row = await findInbound(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!row) throw notFound("Received message");
    return c.json(await inboundDetail(c.env, row), 200);
  })
  .openapi(getRawRoute, async (c) => {
    const row = await findInbound(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    const object = row ? await c.env.BLOBS.get(row.rawKey) : null;
    if (!row || !object) throw notFound("Received message");
    return c.body(object.body, 200, { ...downloadHeaders("message/rfc822", `${row.id}.eml`), "Content-Length": String(object.size) });
  })
  .openapi(getAttachmentRoute, async (c) => {
    const { id, n } = c.req.valid("param");
    const row = await findInbound(c.var.ctx.db, c.get("auth").account.id, id);
    const response = row ? await attachmentResponse(c.env, row, n) : undefined;
    if (!response) throw notFound("Attachment");
    return response;
  })
  .openapi(deleteInboundRoute, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await deleteInbound(c.var.ctx, c.get("auth").account.id, id))) throw notFound("Received message");
    return c.json({ id, deleted: true as const }, 200);
  });

// The links `email.received` webhooks carry: no key, the signature and its expiry are the credential. A forged,
// altered or expired link gets the same 404 as a missing file, and says nothing about any message.
export const inboundFileRoutes = new Hono<AppEnv>().get("/inbound-files/:id/:n{[0-9]{1,4}}", async (c) => {
  const id = c.req.param("id");
  const index = Number(c.req.param("n"));
  const valid = await downloadLinkValid(config(c.env), { id, index, expires: c.req.query("expires"), signature: c.req.query("signature") });
  const row = valid ? await findInboundById(c.env, c.req.query("db"), id) : undefined;
  const response = row ? await attachmentResponse(c.env, row, index) : undefined;
  return response ?? c.json(errorBody("not_found", "This download link is not valid or has expired"), 404);
});
