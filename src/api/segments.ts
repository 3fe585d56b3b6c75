import { ContactSchema } from "./contacts";
import { serializeContactsWithTopics } from "../domain/contacts/contacts";
import {
  countSegment as countSegmentAudience,
  createSegment as addSegment,
  findSegment,
  listSegments as findSegments,
  SEGMENT_PREVIEW_SIZE,
  updateSegment as changeSegment,
  type SegmentRow,
} from "../domain/segments/segments";
import { SEGMENT_MAX_CONDITIONS } from "../domain/segments/conditions";
import { segmentChangeInput, segmentInput } from "../domain/segments/input";
import { notFound, validationError } from "../errors";
import { deleteSegmentOrThrow } from "../http/contacts";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { pageOf } from "../lib/pagination";

const SegmentSchema = z
  .object({
    id: z.string().openapi({ example: "seg_2hQ8mX4kL9cV1nT7pR3sZb" }),
    name: z.string(),
    match: z.enum(["all", "any"]),
    conditions: z.array(z.object({ field: z.string(), op: z.string(), value: z.unknown().optional() })),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Segment");

const SegmentCountSchema = z
  .object({
    count: z.number().int().openapi({ description: "Matching contacts a send would target: `subscribed` and not suppressed" }),
    contacts: z
      .array(ContactSchema)
      .optional()
      .openapi({ description: `With \`preview=1\`: the first ${SEGMENT_PREVIEW_SIZE} of them, newest first` }),
  })
  .openapi("SegmentCount");

function serializeSegment(row: SegmentRow) {
  return { id: row.id, name: row.name, match: row.match, conditions: row.conditions, created_at: row.createdAt, updated_at: row.updatedAt };
}

const route = (method: "get" | "post" | "patch" | "delete", path: string, summary: string) => ({ method, path, summary, tags: ["Segments"] });
const invalidConditions = "A field is invalid; bad conditions are listed as `conditions.<i>.field`, `.op` or `.value`";

const conditionRules = [
  `Up to ${SEGMENT_MAX_CONDITIONS} conditions \`{field, op, value}\`.`,
  "Text fields (`email`, `first_name`, `last_name`, `company`, `phone`, `country`) compare without ASCII case; `email` takes `eq`, `neq`, `in` (addresses) and `contains`, `starts_with`, `ends_with`; the other text fields also `exists`, `not_exists`.",
  "`status`: `eq`, `neq`, `in`. `created_at`: `gt`, `gte`, `lt`, `lte` (ISO 8601 date) and `within_days` (days).",
  "`custom_fields.<key>` (key: letters, digits, `_`, `-`): every operator but `not_in`; a number compares numerically (numeric strings too), a date as a date.",
  "`list`: `in` or `not_in` a list id or array of list ids of the account.",
  "`verification.result` (the contact's last check: `valid`, `invalid`, `risky`, `unknown`): `eq`, `neq`, `in`, `exists`, `not_exists` (never verified); `verification.checked_at`: as `created_at`, plus `exists`, `not_exists`.",
  "`neq` and `not_exists` match contacts without the field.",
].join(" ");

const listSegments = keyedRoute("contacts", {
  ...route("get", "/segments", "List segments"),
  request: { query: PaginationQuery },
  responses: { 200: jsonResponse(paginated(SegmentSchema, "SegmentList"), "Segments, newest first") },
});
const createSegment = keyedRoute(
  "contacts",
  {
    ...route("post", "/segments", "Create a segment"),
    description: `A saved audience, evaluated whenever it is used. ${conditionRules}`,
    request: { body: jsonBody(segmentInput) },
    responses: { 201: jsonResponse(SegmentSchema, "The segment"), 422: errorResponse(invalidConditions) },
  },
  { liveKeyOnly: "Creating a segment" },
);
const getSegment = keyedRoute("contacts", {
  ...route("get", "/segments/{id}", "One segment"),
  request: { params: IdParam("seg") },
  responses: { 200: jsonResponse(SegmentSchema, "The segment"), 404: errorResponse("No such segment") },
});
const updateSegment = keyedRoute(
  "contacts",
  {
    ...route("patch", "/segments/{id}", "Change a segment"),
    description: "Given `conditions` replace the old ones whole.",
    request: { params: IdParam("seg"), body: jsonBody(segmentChangeInput) },
    responses: { 200: jsonResponse(SegmentSchema, "The segment"), 404: errorResponse("No such segment"), 422: errorResponse(invalidConditions) },
  },
  { liveKeyOnly: "Changing a segment" },
);
const deleteSegment = keyedRoute(
  "contacts",
  {
    ...route("delete", "/segments/{id}", "Delete a segment"),
    request: { params: IdParam("seg") },
    responses: {
      200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"),
      404: errorResponse("No such segment"),
      409: errorResponse("A campaign that has not finished (draft, scheduled, sending) targets or excludes this segment"),
    },
  },
  { liveKeyOnly: "Deleting a segment" },
);
const countSegment = keyedRoute("contacts", {
  ...route("get", "/segments/{id}/count", "Count a segment's audience"),
  description:
    "The contacts a campaign to this segment would target now: matching contacts whose status is `subscribed` and whose address is not suppressed (unsubscribed, bounced and complained contacts are left out, as a send leaves them out).",
  request: {
    params: IdParam("seg"),
    query: z.object({
      preview: z
        .enum(["0", "1", "false", "true"])
        .optional()
        .openapi({ param: { name: "preview", in: "query" }, description: `\`1\`: also return the first ${SEGMENT_PREVIEW_SIZE} contacts` }),
    }),
  },
  responses: { 200: jsonResponse(SegmentCountSchema, "The audience's size"), 404: errorResponse("No such segment") },
});

export const segmentRoutes = createRouter()
  .openapi(listSegments, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const rows = await findSegments(c.var.ctx.db, c.get("auth").account.id, { cursor, limit });
    return c.json(pageOf(rows, limit, serializeSegment), 200);
  })
  .openapi(createSegment, async (c) => {
    const outcome = await addSegment(c.var.ctx.db, c.get("auth").account.id, c.req.valid("json"));
    if (outcome.kind === "invalid") throw validationError(outcome.errors);
    return c.json(serializeSegment(outcome.segment), 201);
  })
  .openapi(getSegment, async (c) => {
    const row = await findSegment(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!row) throw notFound("Segment");
    return c.json(serializeSegment(row), 200);
  })
  .openapi(updateSegment, async (c) => {
    const outcome = await changeSegment(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id, c.req.valid("json"));
    if (outcome.kind === "not_found") throw notFound("Segment");
    if (outcome.kind === "invalid") throw validationError(outcome.errors);
    return c.json(serializeSegment(outcome.segment), 200);
  })
  .openapi(deleteSegment, async (c) => {
    const { id } = c.req.valid("param");
    await deleteSegmentOrThrow(c.var.ctx.db, c.get("auth").account.id, id);
    return c.json({ id, deleted: true as const }, 200);
  })
  .openapi(countSegment, async (c) => {
    const preview = ["1", "true"].includes(c.req.valid("query").preview ?? "0");
    const outcome = await countSegmentAudience(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id, { preview });
    if (outcome.kind === "not_found") throw notFound("Segment");
    const contacts = outcome.contacts && (await serializeContactsWithTopics(c.var.ctx.db, c.get("auth").account.id, outcome.contacts));
    return c.json({ count: outcome.count, ...(contacts ? { contacts } : {}) }, 200);
  });
