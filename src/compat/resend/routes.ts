// `{base}/compat/resend`: what the resend Node client (6.x) calls, answered in Resend's shapes. Point the client here
// with RESEND_BASE_URL (or `new Resend(key, { baseUrl })`); the key is a Mailforge API key. docs/migrating.md.

import { resendTag } from "../../domain/webhooks/formats/resend";
import type { Context } from "hono";
import { bearerToken } from "../../middleware/auth";
import { compatBodyLimit } from "../../middleware/request";
import { createApiKey, listApiKeys, revokeApiKey } from "../../domain/accounts/api-keys";
import { createDomain, deleteDomain, findDomain, listDomains, verifyDomain, type DomainRow } from "../../domain/domains/domains";
import { loadContent } from "../../domain/sending/content";
import { findMessage } from "../../domain/sending/messages";
import { batchLimit } from "../../domain/sending/accept";
import { cancelMessage, rescheduleMessage, type ScheduleRefusal } from "../../domain/sending/schedule";
import { AppError, notFound, validationError } from "../../errors";
import { orRefuse } from "../../http/refusals";
import { createRouter, IdParam, jsonBody, jsonResponse, PaginationQuery, z } from "../../lib/openapi";
import type { AppEnv } from "../../types";
import { acceptSends, checkSendRequests, indexedErrors, PeerError, peerErrorHandler, peerKeyAuth, peerRoute } from "../shared";
import {
  lastEvent,
  notSupported,
  renderResendError,
  resendDomainStatus,
  ResendEmailSchema,
  ResendErrorSchema,
  resendRecordKind,
  toSendRequest,
} from "./translate";

const peer = {
  security: { apiKey: [] },
  errors: jsonResponse(ResendErrorSchema, "An error as Resend gives it: `{statusCode, name, message}`"),
};
const tags = ["Resend compatibility"];
const idempotencyHeader = z.object({ "idempotency-key": z.string().min(1).max(256).optional() });
const EmailId = z.object({ id: z.string() }).openapi("ResendEmailId");
const ObjectId = (object: string) => z.object({ object: z.literal(object), id: z.string() });

const sendEmail = peerRoute(
  "send",
  {
    method: "post",
    path: "/emails",
    tags,
    summary: "Send an email (Resend's POST /emails)",
    description:
      "Sent through the same pipeline as POST /api/v1/send, in the transactional stream: charged, suppressed, limited and recorded the same way. " +
      "`tags` become Mailforge tags `name:value`; an `Idempotency-Key` replays the first answer for 24 h.",
    request: { body: jsonBody(ResendEmailSchema), headers: idempotencyHeader },
    responses: { 200: jsonResponse(EmailId, "Accepted") },
  },
  { ...peer, features: ["email_api", "smtp_relay"] },
);

const sendBatch = peerRoute(
  "send",
  {
    method: "post",
    path: "/emails/batch",
    tags,
    summary: "Send up to 100 emails (Resend's POST /emails/batch)",
    description:
      "`x-batch-validation: strict` (the default) accepts all or none; `permissive` sends the valid ones and lists the others in `errors`. " +
      "As on Resend, batch emails take no `attachments` and no `scheduled_at`.",
    request: {
      body: jsonBody(z.array(ResendEmailSchema).min(1).max(batchLimit).openapi("ResendBatch")),
      headers: idempotencyHeader.extend({ "x-batch-validation": z.enum(["strict", "permissive"]).optional() }),
    },
    responses: {
      200: jsonResponse(
        z.object({ data: z.array(EmailId), errors: z.array(z.object({ index: z.number().int(), message: z.string() })).optional() }),
        "Accepted, in the order sent",
      ),
    },
  },
  { ...peer, features: ["email_api", "smtp_relay"] },
);

const ResendEmailSchemaOut = z
  .object({
    object: z.literal("email"),
    id: z.string(),
    to: z.array(z.string()),
    cc: z.array(z.string()).nullable(),
    bcc: z.array(z.string()).nullable(),
    reply_to: z.array(z.string()).nullable(),
    from: z.string(),
    subject: z.string(),
    html: z.string().nullable(),
    text: z.string().nullable(),
    created_at: z.string(),
    scheduled_at: z.string().nullable(),
    last_event: z.string(),
    tags: z.array(z.object({ name: z.string(), value: z.string() })),
  })
  .openapi("ResendEmail");

const getEmail = peerRoute(
  "send",
  {
    method: "get",
    path: "/emails/{id}",
    tags,
    summary: "One email (Resend's GET /emails/{id})",
    request: { params: IdParam("msg") },
    responses: { 200: jsonResponse(ResendEmailSchemaOut, "The email") },
  },
  peer,
);

const updateEmail = peerRoute(
  "send",
  {
    method: "patch",
    path: "/emails/{id}",
    tags,
    summary: "Move a scheduled email (Resend's PATCH /emails/{id})",
    request: { params: IdParam("msg"), body: jsonBody(z.object({ scheduled_at: z.string() }).strict()) },
    responses: { 200: jsonResponse(ObjectId("email"), "Moved") },
  },
  peer,
);

const cancelEmail = peerRoute(
  "send",
  {
    method: "post",
    path: "/emails/{id}/cancel",
    tags,
    summary: "Cancel a scheduled email (Resend's POST /emails/{id}/cancel)",
    description: "Refunds its credits, as POST /api/v1/messages/{id}/cancel does.",
    request: { params: IdParam("msg") },
    responses: { 200: jsonResponse(ObjectId("email"), "Cancelled") },
  },
  peer,
);

const ResendRecordSchema = z.object({
  record: z.string(),
  name: z.string(),
  type: z.string(),
  ttl: z.string(),
  status: z.string(),
  value: z.string(),
});
const ResendDomainSchema = z
  .object({
    object: z.literal("domain"),
    id: z.string(),
    name: z.string(),
    status: z.string(),
    created_at: z.string(),
    region: z.string(),
    records: z.array(ResendRecordSchema),
  })
  .openapi("ResendDomain");

const listDomainsRoute = peerRoute(
  "domains",
  {
    method: "get",
    path: "/domains",
    tags,
    summary: "List domains (Resend's GET /domains)",
    request: { query: PaginationQuery.pick({ limit: true }) },
    responses: {
      200: jsonResponse(
        z.object({ object: z.literal("list"), has_more: z.boolean(), data: z.array(ResendDomainSchema.omit({ object: true, records: true })) }),
        "The domains, newest first",
      ),
    },
  },
  peer,
);

const createDomainRoute = peerRoute(
  "domains",
  {
    method: "post",
    path: "/domains",
    tags,
    summary: "Add a domain (Resend's POST /domains)",
    description: "`region`, `custom_return_path` and the tracking options are not supported (the answer says so).",
    request: {
      body: jsonBody(
        z
          .object({
            name: z.string(),
            region: z.string().optional(),
            custom_return_path: z.string().optional(),
            open_tracking: z.boolean().optional(),
            click_tracking: z.boolean().optional(),
          })
          .strict(),
      ),
    },
    responses: { 200: jsonResponse(ResendDomainSchema.omit({ object: true }), "The domain and the records to publish") },
  },
  { ...peer, liveKeyOnly: "Adding a sending domain" },
);

const getDomainRoute = peerRoute(
  "domains",
  {
    method: "get",
    path: "/domains/{id}",
    tags,
    summary: "One domain (Resend's GET /domains/{id})",
    request: { params: IdParam("dom") },
    responses: { 200: jsonResponse(ResendDomainSchema, "The domain") },
  },
  peer,
);

const verifyDomainRoute = peerRoute(
  "domains",
  {
    method: "post",
    path: "/domains/{id}/verify",
    tags,
    summary: "Check a domain's records now (Resend's POST /domains/{id}/verify)",
    request: { params: IdParam("dom") },
    responses: { 200: jsonResponse(ObjectId("domain"), "Checked; GET the domain for its status") },
  },
  peer,
);

const deleteDomainRoute = peerRoute(
  "domains",
  {
    method: "delete",
    path: "/domains/{id}",
    tags,
    summary: "Remove a domain (Resend's DELETE /domains/{id})",
    request: { params: IdParam("dom") },
    responses: { 200: jsonResponse(ObjectId("domain").extend({ deleted: z.literal(true) }), "Removed") },
  },
  { ...peer, liveKeyOnly: "Removing a sending domain" },
);

const listKeysRoute = peerRoute(
  "full_access",
  {
    method: "get",
    path: "/api-keys",
    tags,
    summary: "List API keys (Resend's GET /api-keys)",
    responses: {
      200: jsonResponse(
        z.object({
          object: z.literal("list"),
          has_more: z.boolean(),
          data: z.array(z.object({ id: z.string(), name: z.string(), created_at: z.string() })),
        }),
        "Active keys",
      ),
    },
  },
  peer,
);

const createKeyRoute = peerRoute(
  "full_access",
  {
    method: "post",
    path: "/api-keys",
    tags,
    summary: "Create an API key (Resend's POST /api-keys)",
    description: "`permission: sending_access` makes a key with the `send` scope; `domain_id` is not supported.",
    request: {
      body: jsonBody(
        z
          .object({
            name: z.string().trim().min(1).max(100),
            permission: z.enum(["full_access", "sending_access"]).optional(),
            domain_id: z.string().optional(),
          })
          .strict(),
      ),
    },
    responses: { 200: jsonResponse(z.object({ id: z.string(), token: z.string() }), "The key; `token` is shown only this once") },
  },
  peer,
);

const deleteKeyRoute = peerRoute(
  "full_access",
  {
    method: "delete",
    path: "/api-keys/{id}",
    tags,
    summary: "Revoke an API key (Resend's DELETE /api-keys/{id})",
    request: { params: IdParam("key") },
    responses: { 200: jsonResponse(ObjectId("api_key").extend({ deleted: z.literal(true) }), "Revoked") },
  },
  peer,
);

function scheduleError(refusal: ScheduleRefusal): AppError {
  if (refusal.kind === "not_found") return notFound("Email");
  if (refusal.kind === "live_key_required") return new AppError(refusal.kind, refusal.message);
  return new PeerError("validation_failed", refusal.reason);
}

const callerOf = (c: Context<AppEnv>) => ({ accountId: c.get("auth").account.id, mode: c.get("auth").apiKey.mode });

function resendRecords(domain: DomainRow) {
  return domain.records.map((record) => ({
    record: resendRecordKind[record.purpose],
    name: record.name,
    type: record.type,
    ttl: "Auto",
    status: record.status === "verified" ? "verified" : record.status === "failed" ? "failed" : "pending",
    value: record.value,
  }));
}

const domainSummary = (domain: DomainRow) => ({
  id: domain.id,
  name: domain.name,
  status: resendDomainStatus(domain.status),
  created_at: domain.createdAt,
  // Mailforge sends from wherever its Worker and smarthost are; Resend's clients expect a region.
  region: "us-east-1",
});

/** What Resend's dashboard would show of a key: its Mailforge scopes are not part of Resend's shape. */
const keySummary = (row: { id: string; name: string; createdAt: string }) => ({ id: row.id, name: row.name, created_at: row.createdAt });

export const resendRoutes = createRouter();
resendRoutes.onError(peerErrorHandler(renderResendError));
resendRoutes.use("*", compatBodyLimit);
resendRoutes.use(
  "*",
  peerKeyAuth({
    keyOf: (c) => bearerToken(c.req.header("Authorization")),
    missing: () => new PeerError("unauthorized", "Missing API key in the authorization header", "missing_api_key"),
    invalid: () => new PeerError("unauthorized", "API key is invalid", "invalid_api_key"),
    cachedRoute: (method, path) => method === "POST" && /\/emails(\/batch)?$/.test(path),
  }),
);

resendRoutes
  .openapi(sendEmail, async (c) => {
    const body = c.req.valid("json");
    const { requests, errors } = checkSendRequests([await toSendRequest(c.env, body)]);
    if (errors.size > 0) throw validationError(errors.get(0)!);
    const key = c.req.valid("header")["idempotency-key"];
    const { accepted, replayed } = await acceptSends(c, requests, {
      batch: false,
      ...(key ? { idempotency: { key, route: "POST /compat/resend/emails", body } } : {}),
    });
    if (replayed) c.header("Idempotent-Replayed", "true");
    return c.json({ id: accepted[0]!.id }, 200);
  })
  .openapi(sendBatch, async (c) => {
    const body = c.req.valid("json");
    const headers = c.req.valid("header");
    body.forEach((email, index) => {
      if (email.attachments !== undefined) throw notSupported(`\`${index}.attachments\` in a batch (as on Resend)`);
      if (email.scheduled_at !== undefined) throw notSupported(`\`${index}.scheduled_at\` in a batch (as on Resend)`);
    });
    const candidates = await Promise.all(body.map((email, index) => toSendRequest(c.env, email, `${index}.`)));
    const { requests, errors } = checkSendRequests(candidates);
    const permissive = headers["x-batch-validation"] === "permissive";
    if (errors.size > 0 && (!permissive || requests.length === 0)) throw validationError(indexedErrors(errors));
    const key = headers["idempotency-key"];
    const { accepted, replayed } = await acceptSends(c, requests, {
      batch: true,
      ...(key ? { idempotency: { key, route: "POST /compat/resend/emails/batch", body } } : {}),
    });
    if (replayed) c.header("Idempotent-Replayed", "true");
    const refused = [...errors].map(([index, fields]) => ({
      index,
      message: Object.entries(fields)
        .map(([field, messages]) => `\`${field}\`: ${messages.join("; ")}`)
        .join(" "),
    }));
    return c.json({ data: accepted.map(({ id }) => ({ id })), ...(permissive ? { errors: refused } : {}) }, 200);
  })
  .openapi(getEmail, async (c) => {
    const found = await findMessage(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!found) throw notFound("Email");
    const { message, recipients } = found;
    const content = await loadContent(c.env, message);
    const compose = content.kind === "compose" ? content : undefined;
    return c.json(
      {
        object: "email" as const,
        id: message.id,
        to: compose?.to ?? recipients.map((recipient) => recipient.email),
        cc: compose?.cc ?? null,
        bcc: compose?.bcc ?? null,
        reply_to: message.replyTo ? [message.replyTo] : null,
        from: message.fromName ? `${message.fromName} <${message.fromAddress}>` : message.fromAddress,
        subject: message.subject,
        html: compose?.html ?? null,
        text: compose?.text ?? null,
        created_at: message.createdAt,
        scheduled_at: message.scheduledAt,
        last_event: lastEvent(message.status, recipients),
        tags: message.tags.map(resendTag),
      },
      200,
    );
  })
  .openapi(updateEmail, async (c) => {
    const at = new Date(c.req.valid("json").scheduled_at);
    const outcome = await rescheduleMessage(c.var.ctx, callerOf(c), c.req.valid("param").id, at);
    if (outcome.kind === "invalid") throw validationError(outcome.errors);
    if (outcome.kind !== "rescheduled") throw scheduleError(outcome);
    return c.json({ object: "email" as const, id: outcome.message.id }, 200);
  })
  .openapi(cancelEmail, async (c) => {
    const outcome = await cancelMessage(c.var.ctx, callerOf(c), c.req.valid("param").id);
    if (outcome.kind !== "cancelled") throw scheduleError(outcome);
    return c.json({ object: "email" as const, id: outcome.message.id }, 200);
  })
  .openapi(listDomainsRoute, async (c) => {
    const { limit } = c.req.valid("query");
    const rows = await listDomains(c.var.ctx.shared, c.get("auth").account.id, { limit });
    return c.json({ object: "list" as const, has_more: rows.length > limit, data: rows.slice(0, limit).map(domainSummary) }, 200);
  })
  .openapi(createDomainRoute, async (c) => {
    const body = c.req.valid("json");
    if (body.region !== undefined) throw notSupported("`region`");
    if (body.custom_return_path !== undefined) throw notSupported("`custom_return_path` (the return path is the operator's BOUNCE_DOMAIN)");
    if (body.open_tracking !== undefined || body.click_tracking !== undefined) throw notSupported("Tracking options per domain");
    const { domain } = orRefuse(await createDomain(c.var.ctx.shared, c.get("auth").account.id, body.name, c.env));
    return c.json({ ...domainSummary(domain), records: resendRecords(domain) }, 200);
  })
  .openapi(getDomainRoute, async (c) => {
    const domain = await findDomain(c.var.ctx.shared, c.get("auth").account.id, c.req.valid("param").id);
    if (!domain) throw notFound("Domain");
    return c.json({ object: "domain" as const, ...domainSummary(domain), records: resendRecords(domain) }, 200);
  })
  .openapi(verifyDomainRoute, async (c) => {
    const domain = await findDomain(c.var.ctx.shared, c.get("auth").account.id, c.req.valid("param").id);
    if (!domain) throw notFound("Domain");
    await verifyDomain(c.var.ctx.shared, domain, c.env);
    return c.json({ object: "domain" as const, id: domain.id }, 200);
  })
  .openapi(deleteDomainRoute, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await deleteDomain(c.var.ctx.shared, c.get("auth").account.id, id))) throw notFound("Domain");
    return c.json({ object: "domain" as const, id, deleted: true as const }, 200);
  })
  .openapi(listKeysRoute, async (c) => {
    const rows = await listApiKeys(c.var.ctx.shared, c.get("auth").account.id);
    return c.json({ object: "list" as const, has_more: false, data: rows.map(keySummary) }, 200);
  })
  .openapi(createKeyRoute, async (c) => {
    const body = c.req.valid("json");
    if (body.domain_id !== undefined) throw notSupported("`domain_id` (keys limited to one domain)");
    const outcome = await createApiKey(c.var.ctx.shared, c.get("auth"), {
      name: body.name,
      ...(body.permission === "sending_access" ? { scopes: ["send" as const] } : {}),
    });
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    return c.json({ id: outcome.row.id, token: outcome.key }, 200);
  })
  .openapi(deleteKeyRoute, async (c) => {
    const outcome = await revokeApiKey(c.var.ctx.shared, c.get("auth"), c.req.valid("param").id);
    if (outcome.kind === "not_found") throw notFound("API key");
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    return c.json({ object: "api_key" as const, id: outcome.row.id, deleted: true as const }, 200);
  });

// Anything else Resend has (contacts, broadcasts, audiences, webhooks, …) is answered in its shape, never with /api/v1's.
resendRoutes.all("*", (c) => {
  throw new PeerError("not_found", `${c.req.method} ${c.req.path} is not supported by Mailforge's Resend compatibility (docs/migrating.md)`);
});
