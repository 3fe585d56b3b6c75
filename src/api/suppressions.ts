import {
  addSuppression as suppress,
  listSuppressions as findSuppressions,
  removeSuppression as unsuppress,
  defaultScope,
  suppressionReasons,
  suppressionScopes,
  type SuppressionPosition,
  type SuppressionRow,
} from "../domain/suppressions/suppressions";
import { suppressionInput } from "../domain/suppressions/input";
import { notFound, validationError } from "../errors";
import { createRouter, errorResponse, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { decodeCursor, encodeCursor, invalidCursorMessage } from "../lib/pagination";

const SuppressionSchema = z
  .object({
    email: z
      .string()
      .openapi({ example: "jane@example.com", description: "Trimmed and lower-cased as a whole: every spelling of the mailbox is suppressed" }),
    reason: z.enum(suppressionReasons),
    scope: z.enum(suppressionScopes).openapi({
      description: "Which mail it keeps away: `all` streams, only `broadcast` (an unsubscribe), or only `transactional`",
    }),
    source_message_id: z.string().nullable().openapi({ description: "The message that bounced or was complained about" }),
    created_at: Timestamp,
  })
  .openapi("Suppression");

const EmailParam = z.object({
  email: z
    .string()
    .min(1)
    .max(320)
    .openapi({ param: { name: "email", in: "path" }, example: "jane@example.com", description: "URL-encoded; compared as lower-cased" }),
});

const listSuppressions = keyedRoute("send", {
  method: "get",
  path: "/suppressions",
  tags: ["Suppressions"],
  summary: "The suppression list, newest first",
  description:
    "Suppressed addresses are skipped (and not charged) by every send of the stream their scope covers; entries for " +
    "broadcast mail or all mail make contacts of the address `unsubscribed` (or bounced, complained).",
  request: {
    query: PaginationQuery.extend({
      email: z
        .string()
        .max(320)
        .optional()
        .openapi({ param: { name: "email", in: "query" }, description: "Only this address (an entry per scope)" }),
      scope: z
        .enum(suppressionScopes)
        .optional()
        .openapi({ param: { name: "scope", in: "query" }, description: "Only entries of this scope" }),
    }),
  },
  responses: { 200: jsonResponse(paginated(SuppressionSchema, "SuppressionPage"), "A page of entries") },
});

const addSuppression = keyedRoute(
  "send",
  {
    method: "post",
    path: "/suppressions",
    tags: ["Suppressions"],
    summary: "Suppress an address",
    description:
      "Idempotent: an address already on the list in that scope keeps its first entry (200). Unless the scope is " +
      "`transactional`, contacts of the address become `unsubscribed`.",
    request: { body: jsonBody(suppressionInput) },
    responses: {
      200: jsonResponse(SuppressionSchema, "Already suppressed; the existing entry"),
      201: jsonResponse(SuppressionSchema, "Suppressed"),
    },
  },
  { liveKeyOnly: "Adding a suppression" },
);

const removeSuppression = keyedRoute(
  "send",
  {
    method: "delete",
    path: "/suppressions/{email}",
    tags: ["Suppressions"],
    summary: "Allow mail to an address again",
    description:
      "Removes the address's entries (only the one of `?scope=` when given); the answer shows the widest removed. " +
      "Contacts of the address keep their status; resubscribe one with `PATCH /contacts/{id}`.",
    request: {
      params: EmailParam,
      query: z.object({
        scope: z
          .enum(suppressionScopes)
          .optional()
          .openapi({ param: { name: "scope", in: "query" }, description: "Only this scope's entry" }),
      }),
    },
    responses: {
      200: jsonResponse(SuppressionSchema.extend({ deleted: z.literal(true) }), "Removed"),
      404: errorResponse("The address is not suppressed"),
    },
  },
  { liveKeyOnly: "Removing a suppression" },
);

const serializeSuppression = (row: SuppressionRow) => ({
  email: row.email,
  reason: row.reason,
  scope: row.scope,
  source_message_id: row.sourceMessageId,
  created_at: row.createdAt,
});

// Keyset on (created_at, email, scope); the email is URI-encoded in the cursor because `|` is legal in a local part,
// and the scope follows it after a space, which neither the encoding nor a scope contains.
function decodeSuppressionCursor(cursor: string | undefined): SuppressionPosition | undefined {
  if (!cursor) return undefined;
  // Its query schema refused a cursor that does not decode (isCursor).
  const position = decodeCursor(cursor)!;
  try {
    const [email = "", scope = "all"] = position.id.split(" ");
    const known = suppressionScopes.find((name) => name === scope);
    if (!known) throw new Error("unknown scope");
    return { createdAt: position.createdAt, email: decodeURIComponent(email), scope: known };
  } catch {
    throw validationError({ "query.cursor": [invalidCursorMessage] });
  }
}

export const suppressionRoutes = createRouter()
  .openapi(listSuppressions, async (c) => {
    const query = c.req.valid("query");
    const rows = await findSuppressions(
      c.var.ctx.db,
      c.get("auth").account.id,
      { email: query.email, scope: query.scope },
      { after: decodeSuppressionCursor(query.cursor), limit: query.limit },
    );
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    const hasMore = rows.length > query.limit;
    return c.json(
      {
        data: page.map(serializeSuppression),
        has_more: hasMore,
        next_cursor: hasMore && last ? encodeCursor({ createdAt: last.createdAt, id: `${encodeURIComponent(last.email)} ${last.scope}` }) : null,
      },
      200,
    );
  })
  .openapi(addSuppression, async (c) => {
    const body = c.req.valid("json");
    const scope = body.scope ?? defaultScope[body.reason];
    const { created, entry } = await suppress(c.var.ctx.db, c.get("auth").account.id, { email: body.email, reason: body.reason, scope });
    return c.json(serializeSuppression(entry), created ? 201 : 200);
  })
  .openapi(removeSuppression, async (c) => {
    const removed = await unsuppress(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").email, c.req.valid("query").scope);
    const row = suppressionScopes.map((scope) => removed.find((entry) => entry.scope === scope)).find((entry) => entry !== undefined);
    if (!row) throw notFound("Suppression");
    return c.json({ ...serializeSuppression(row), deleted: true as const }, 200);
  });
