import type { AccountDb } from "../db/client";
import { eventDataSchemas, eventTypes, type EventType } from "../domain/events/events";
import { sendTestEvent } from "../domain/webhooks/delivery";
import {
  createEndpoint,
  deleteEndpoint,
  findEndpoint,
  listDeliveries as findDeliveries,
  listEndpoints,
  previousSecretActive,
  updateEndpoint,
  type WebhookDeliveryRow,
  type WebhookEndpointRow,
} from "../domain/webhooks/endpoints";
import { webhookChangeInput, webhookInput, webhookTestInput } from "../domain/webhooks/input";
import { sampleEventData } from "../domain/webhooks/samples";
import { maskWebhookSecret } from "../domain/webhooks/signing";
import { notFound } from "../errors";
import { orRefuse } from "../http/refusals";
import { decryptSecret } from "../lib/crypto";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { pageOf } from "../lib/pagination";
import { config } from "../config";
import { keyReadsInbound } from "../domain/inbound/reply-words";
import type { AuthContext } from "../types";
import { webhookFormats } from "../db/schema";

const tags = ["Webhooks"];

const WebhookEndpointSchema = z
  .object({
    id: z.string().openapi({ example: "wh_7Hc2dWq9Lm0PzX4sN1bR5t" }),
    url: z.string(),
    description: z.string().nullable(),
    events: z.array(z.string()),
    enabled: z.boolean(),
    format: z.enum(webhookFormats).openapi({ description: "The body the endpoint receives: ours, or Resend's or Postmark's (docs/migrating.md)" }),
    disabled_reason: z.string().nullable().openapi({ description: "Why the service disabled the endpoint; null when enabled or disabled by you" }),
    failing_since: Timestamp.nullable().openapi({ description: "Start of the current run of failed deliveries; disabled after 5 days" }),
    secret: z.string().openapi({
      description: "The signing secret. In full (`whsec_` + base64) only in the response that issued it (create, rotate); masked elsewhere.",
      example: "whsec_…k3Qz",
    }),
    previous_secret_expires_at: Timestamp.nullable().openapi({ description: "After a rotation: until when the previous secret also signs" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("WebhookEndpoint");

const DeliverySchema = z
  .object({
    id: z.string().openapi({ example: "whd_2kQ8sLr5Nb0XcV7mJ3pT9a" }),
    event_id: z.string(),
    event_type: z.string(),
    attempt: z.number().int().openapi({ description: "1 for the first try, up to 7 (six retries)" }),
    status: z.enum(["succeeded", "retrying", "failed"]),
    status_code: z.number().int().nullable().openapi({ description: "null when no HTTP response came back" }),
    response_snippet: z.string().nullable().openapi({ description: "First 500 characters of the response, or what went wrong" }),
    duration_ms: z.number().int().nullable(),
    next_retry_at: Timestamp.nullable().openapi({ description: "When the next attempt is scheduled (status `retrying`)" }),
    created_at: Timestamp.openapi({ description: "When the attempt finished" }),
  })
  .openapi("WebhookDelivery");

/** The request body of every webhook, one variant per event type. */
export const WebhookEventSchema = z
  .discriminatedUnion(
    "type",
    eventTypes.map((type) =>
      z
        .object({
          id: z.string().openapi({ description: "Stable per event: de-duplicate by it", example: "evt_5Yh1cQm8Xr2LpW0dK7sN4b" }),
          type: z.literal(type),
          created_at: Timestamp,
          data: eventDataSchemas[type].openapi({ example: sampleEventData[type] }),
        })
        // Named variants (`RelayBouncedEvent`, …) let the document carry a discriminator on `type`.
        .openapi(`${type.replace(/(^|[._])(\w)/g, (_match, _separator, letter: string) => letter.toUpperCase())}Event`),
    ) as unknown as [z.ZodObject, ...z.ZodObject[]],
  )
  .openapi("WebhookEvent", {
    description:
      "POSTed as JSON to the endpoint. Signed in `X-Service-Signature: t=<unix>,v1=<hex>` (HMAC-SHA256 of `<t>.<raw body>` keyed with the secret) and in the Standard Webhooks headers `webhook-id`, `webhook-timestamp`, `webhook-signature`.",
  });

const TestResultSchema = z
  .object({
    ok: z.boolean().openapi({ description: "The endpoint answered 2xx" }),
    status_code: z.number().int().nullable(),
    duration_ms: z.number().int(),
    response_snippet: z.string().nullable(),
    event: WebhookEventSchema,
  })
  .openapi("WebhookTestResult");

const DeliveriesQuery = PaginationQuery.extend({
  status: z
    .enum(["succeeded", "retrying", "failed"])
    .optional()
    .openapi({ param: { name: "status", in: "query" } }),
  event_id: z
    .string()
    .max(64)
    .optional()
    .openapi({ param: { name: "event_id", in: "query" } }),
});

const notFoundResponse = { 404: errorResponse("No such webhook endpoint in this account") };

const listWebhooks = keyedRoute("webhooks", {
  method: "get",
  path: "/webhooks",
  tags,
  summary: "List webhook endpoints",
  request: { query: PaginationQuery },
  responses: { 200: jsonResponse(paginated(WebhookEndpointSchema, "WebhookEndpointList"), "Endpoints, newest first; secrets masked") },
});

const createWebhook = keyedRoute(
  "webhooks",
  {
    method: "post",
    path: "/webhooks",
    tags,
    summary: "Create a webhook endpoint",
    description: "Subscribing to `email.received` (by name or through `*`) needs a key with the `inbound` scope: it carries received mail.",
    request: { body: jsonBody(webhookInput) },
    responses: {
      201: jsonResponse(WebhookEndpointSchema, "The endpoint; `secret` is shown in full only this once"),
      503: errorResponse("The URL's host could not be resolved right now; try again"),
    },
  },
  { liveKeyOnly: "Creating a webhook endpoint" },
);

const getWebhook = keyedRoute("webhooks", {
  method: "get",
  path: "/webhooks/{id}",
  tags,
  summary: "Get a webhook endpoint",
  request: { params: IdParam("wh") },
  responses: { 200: jsonResponse(WebhookEndpointSchema, "The endpoint; secret masked"), ...notFoundResponse },
});

const updateWebhook = keyedRoute(
  "webhooks",
  {
    method: "patch",
    path: "/webhooks/{id}",
    tags,
    summary: "Update a webhook endpoint, or rotate its secret",
    description:
      "Changing an endpoint that receives `email.received` (by name or through `*`), or subscribing one to it, needs a key with the `inbound` scope.",
    request: { params: IdParam("wh"), body: jsonBody(webhookChangeInput) },
    responses: {
      200: jsonResponse(WebhookEndpointSchema, "The endpoint; `secret` in full when `rotate_secret` issued a new one"),
      ...notFoundResponse,
      503: errorResponse("The URL's host could not be resolved right now; try again"),
    },
  },
  { liveKeyOnly: "Changing a webhook endpoint" },
);

const deleteWebhook = keyedRoute(
  "webhooks",
  {
    method: "delete",
    path: "/webhooks/{id}",
    tags,
    summary: "Delete a webhook endpoint and its delivery log",
    description: "Deliveries already queued for it are dropped.",
    request: { params: IdParam("wh") },
    responses: { 200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"), ...notFoundResponse },
  },
  { liveKeyOnly: "Deleting a webhook endpoint" },
);

const testWebhook = keyedRoute("webhooks", {
  method: "post",
  path: "/webhooks/{id}/test",
  tags,
  summary: "Send a signed test event now",
  description:
    "Sends one event of the chosen type (default `relay.delivered`) with sample data, signed like every delivery, and reports what the endpoint answered. It is logged in the deliveries but never retried. Works on disabled endpoints, to check one before re-enabling it.",
  request: { params: IdParam("wh"), body: { ...jsonBody(webhookTestInput), required: false } },
  responses: { 200: jsonResponse(TestResultSchema, "What the endpoint answered"), ...notFoundResponse },
});

const listDeliveries = keyedRoute("webhooks", {
  method: "get",
  path: "/webhooks/{id}/deliveries",
  tags,
  summary: "Delivery log of a webhook endpoint",
  description: "Every attempt, newest first: one row per try, retries included.",
  request: { params: IdParam("wh"), query: DeliveriesQuery },
  responses: { 200: jsonResponse(paginated(DeliverySchema, "WebhookDeliveryList"), "Attempts, newest first"), ...notFoundResponse },
});

async function serializeEndpoint(row: WebhookEndpointRow, encryptionKey: string, revealSecret?: string) {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    events: row.events,
    enabled: row.enabled,
    format: row.format,
    disabled_reason: row.disabledReason,
    failing_since: row.failingSince,
    secret: revealSecret ?? maskWebhookSecret(await decryptSecret(row.secret, encryptionKey)),
    previous_secret_expires_at: previousSecretActive(row, Date.now()) ? row.previousSecretExpiresAt : null,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

function serializeDelivery(row: WebhookDeliveryRow) {
  return {
    id: row.id,
    event_id: row.eventId,
    event_type: row.eventType,
    attempt: row.attempt,
    status: row.status,
    status_code: row.statusCode,
    response_snippet: row.responseSnippet,
    duration_ms: row.durationMs,
    next_retry_at: row.nextRetryAt,
    created_at: row.createdAt,
  };
}

const webhookCaller = (auth: AuthContext) => ({ accountId: auth.account.id, readsInbound: keyReadsInbound(auth.apiKey) });

async function ownedEndpoint(db: AccountDb, accountId: string, id: string): Promise<WebhookEndpointRow> {
  const row = await findEndpoint(db, accountId, id);
  if (!row) throw notFound("Webhook endpoint");
  return row;
}

export const webhookRoutes = createRouter()
  .openapi(listWebhooks, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const rows = await listEndpoints(c.var.ctx.db, c.get("auth").account.id, { cursor, limit });
    const { data, ...rest } = pageOf(rows, limit, (row) => row);
    return c.json({ data: await Promise.all(data.map((row) => serializeEndpoint(row, config(c.env).encryptionKey))), ...rest }, 200);
  })
  .openapi(createWebhook, async (c) => {
    const body = c.req.valid("json");
    const outcome = orRefuse(await createEndpoint(c.var.ctx, webhookCaller(c.get("auth")), body));
    return c.json(await serializeEndpoint(outcome.endpoint, config(c.env).encryptionKey, outcome.secret), 201);
  })
  .openapi(getWebhook, async (c) => {
    const row = await ownedEndpoint(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    return c.json(await serializeEndpoint(row, config(c.env).encryptionKey), 200);
  })
  .openapi(updateWebhook, async (c) => {
    const { rotate_secret: rotateSecret, ...change } = c.req.valid("json");
    const outcome = orRefuse(await updateEndpoint(c.var.ctx, webhookCaller(c.get("auth")), c.req.valid("param").id, { ...change, rotateSecret }));
    if (outcome.kind === "not_found") throw notFound("Webhook endpoint");
    return c.json(await serializeEndpoint(outcome.endpoint, config(c.env).encryptionKey, outcome.secret), 200);
  })
  .openapi(deleteWebhook, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await deleteEndpoint(c.var.ctx.db, c.get("auth").account.id, id))) throw notFound("Webhook endpoint");
    return c.json({ id, deleted: true as const }, 200);
  })
  .openapi(testWebhook, async (c) => {
    const endpoint = await ownedEndpoint(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    // The body is optional: without one, c.req.valid("json") is empty and the default type applies.
    const type: EventType = webhookTestInput.parse(c.req.valid("json") ?? {}).type;
    const { event, result } = await sendTestEvent(c.var.ctx, endpoint, type);
    return c.json(
      {
        ok: result.ok,
        status_code: result.statusCode,
        duration_ms: result.durationMs,
        response_snippet: result.responseSnippet,
        event: { ...event, type },
      },
      200,
    );
  })
  .openapi(listDeliveries, async (c) => {
    const { limit, cursor, status, event_id: eventId } = c.req.valid("query");
    const rows = await findDeliveries(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id, { status, eventId }, { cursor, limit });
    if (!rows) throw notFound("Webhook endpoint");
    return c.json(pageOf(rows, limit, serializeDelivery), 200);
  });
