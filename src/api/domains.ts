import type { AccountDb, SharedDb } from "../db/client";
import {
  createDomain as addDomain,
  deleteDomain as removeDomain,
  findDomain,
  listDomains as findDomains,
  serializeDomain,
  verifyDomain,
} from "../domain/domains/domains";
import { notFound } from "../errors";
import { orRefuse } from "../http/refusals";
import { BOUNCE_RATE_LIMIT, COMPLAINT_RATE_LIMIT, domainRates } from "../domain/feedback/reputation";
import { setWarmup, warmupSentToday } from "../domain/feedback/warmup";
import type { DomainRow } from "../domain/domains/domains";
import { setReceiving } from "../domain/inbound/receiving";
import { domainChangeInput, domainInput, warmupInput } from "../domain/domains/input";
import { pageOf } from "../lib/pagination";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";

const DnsRecordSchema = z
  .object({
    type: z.enum(["TXT", "MX", "CNAME"]),
    name: z.string().openapi({ example: "mf202611._domainkey.example.com" }),
    value: z.string().openapi({ description: "Exactly what to publish (one value, even when longer than 255 characters)" }),
    purpose: z.enum(["dkim", "spf", "dmarc", "return_path", "dkim_ed25519", "inbound"]).openapi({
      description: "`inbound`: the domain's own MX for Email Routing, listed while receiving is on (reported, not required for sending)",
    }),
    status: z.enum(["pending", "verified", "failed", "not_found"]),
    found: z.array(z.string()).optional().openapi({ description: "What DNS answered at the last check" }),
  })
  .openapi("DnsRecord");

const WarmupSchema = z
  .object({
    status: z.enum(["off", "active", "paused", "completed"]).openapi({
      description:
        "`active`: today's cap applies; `paused` (by the account, or by a bounce/complaint rate over the limit): no cap; `completed`: the schedule ran out",
    }),
    schedule: z.array(z.number().int()).openapi({ description: "Recipients per UTC day, day 0 first", example: [50, 100, 200, 400] }),
    started_at: z.string().nullable().openapi({ description: "Day 0 (YYYY-MM-DD, UTC)", example: "2026-11-25" }),
    day: z.number().int().nullable().openapi({ description: "Today's day of the schedule" }),
    today_cap: z.number().int().nullable().openapi({ description: "Recipients allowed today; null when nothing limits the domain" }),
    sent_today: z.number().int().optional().openapi({ description: "Recipients let through today (GET /domains/{id} and the warmup routes)" }),
    paused_reason: z.string().nullable(),
  })
  .openapi("Warmup");

const ReputationSchema = z
  .object({
    status: z
      .enum(["ok", "held"])
      .openapi({ description: "`held`: new campaign sends from this domain are refused (403) until an operator clears it" }),
    reason: z.string().nullable(),
    held_at: Timestamp.nullable(),
    today: z
      .object({
        sent: z.number().int(),
        hard_bounces: z.number().int(),
        complaints: z.number().int(),
        bounce_rate: z.number(),
        complaint_rate: z.number(),
        bounce_rate_limit: z.number().openapi({ example: BOUNCE_RATE_LIMIT }),
        complaint_rate_limit: z.number().openapi({ example: COMPLAINT_RATE_LIMIT }),
      })
      .optional()
      .openapi({ description: "Today's (UTC) rates from the reports (GET /domains/{id} only)" }),
  })
  .openapi("DomainReputation");

const DomainSchema = z
  .object({
    id: z.string().openapi({ example: "dom_3k2J9sQ1vX8mN0aP4rT6yW" }),
    name: z.string().openapi({ example: "example.com" }),
    status: z.enum(["pending", "verified", "failed"]).openapi({
      description: "`pending` until DKIM and SPF are found; `failed` when a verified domain's records disappeared",
    }),
    dkim_selector: z.string(),
    records: z.array(DnsRecordSchema),
    last_checked_at: Timestamp.nullable(),
    verified_at: Timestamp.nullable(),
    warmup: WarmupSchema,
    reputation: ReputationSchema,
    receiving: z.boolean().openapi({ description: "Whether mail to the domain is received (docs/inbound.md): PATCH /domains/{id}" }),
    receiving_addresses: z
      .array(z.string())
      .nullable()
      .openapi({ description: "The local parts received (`support` also takes `support+tag`); null: every address (catch-all)" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Domain");

const listDomains = keyedRoute("domains", {
  method: "get",
  path: "/domains",
  tags: ["Domains"],
  summary: "List sending domains",
  request: { query: PaginationQuery },
  responses: { 200: jsonResponse(paginated(DomainSchema, "DomainList"), "Domains, newest first") },
});

const createDomain = keyedRoute(
  "domains",
  {
    method: "post",
    path: "/domains",
    tags: ["Domains"],
    summary: "Add a sending domain and get the DNS records to publish",
    description: "Generates an RSA-2048 DKIM key (the private key is stored encrypted). Publish `records`, then call verify.",
    request: { body: jsonBody(domainInput) },
    responses: { 201: jsonResponse(DomainSchema, "The domain, status `pending`"), 409: errorResponse("The account already has this domain") },
  },
  { liveKeyOnly: "Adding a sending domain" },
);

const getDomain = keyedRoute("domains", {
  method: "get",
  path: "/domains/{id}",
  tags: ["Domains"],
  summary: "One domain with its per-record check results",
  request: { params: IdParam("dom") },
  responses: { 200: jsonResponse(DomainSchema, "The domain"), 404: errorResponse("No such domain") },
});

const verify = keyedRoute("domains", {
  method: "post",
  path: "/domains/{id}/verify",
  tags: ["Domains"],
  summary: "Check the DNS records now",
  description: "Verified when the DKIM and SPF records are found; DMARC is reported but not required.",
  request: { params: IdParam("dom") },
  responses: { 200: jsonResponse(DomainSchema, "The domain after the check"), 404: errorResponse("No such domain") },
});

const deleteDomain = keyedRoute(
  "domains",
  {
    method: "delete",
    path: "/domains/{id}",
    tags: ["Domains"],
    summary: "Remove a sending domain",
    request: { params: IdParam("dom") },
    responses: { 200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Removed"), 404: errorResponse("No such domain") },
  },
  { liveKeyOnly: "Removing a sending domain" },
);

const patchDomain = keyedRoute(
  "domains",
  {
    method: "patch",
    path: "/domains/{id}",
    tags: ["Domains"],
    summary: "Turn receiving on or off, and choose the addresses received",
    description:
      "With receiving on, the domain's records include its MX for Cloudflare Email Routing (purpose `inbound`), checked on verify like the " +
      "others; mail for other addresses, or for a domain not receiving, is refused at SMTP time. A name is received by one account at most (409).",
    request: { params: IdParam("dom"), body: jsonBody(domainChangeInput) },
    responses: {
      200: jsonResponse(DomainSchema, "The domain as changed"),
      403: errorResponse("`domain_not_verified`: only a verified domain can receive"),
      404: errorResponse("No such domain"),
      409: errorResponse("Another account already receives this domain's mail"),
    },
  },
  { liveKeyOnly: "Changing a domain's receiving" },
);

const getWarmup = keyedRoute("domains", {
  method: "get",
  path: "/domains/{id}/warmup",
  tags: ["Domains"],
  summary: "The domain's warm-up schedule and today's use of it",
  request: { params: IdParam("dom") },
  responses: { 200: jsonResponse(WarmupSchema, "The warm-up"), 404: errorResponse("No such domain") },
});

const putWarmup = keyedRoute(
  "domains",
  {
    method: "put",
    path: "/domains/{id}/warmup",
    tags: ["Domains"],
    summary: "Start, change or pause the domain's warm-up",
    description:
      "While active, the domain sends at most the schedule's cap of recipients per UTC day; messages past it are not refused: they wait (status " +
      "`deferred`, `next_attempt_at` the next UTC midnight) and go out the next day, campaigns included. Status changes emit `warmup.status_changed`; " +
      "a day with a bounce rate over 5% or a complaint rate over 0.3% pauses it. Needs a live key.",
    request: { params: IdParam("dom"), body: jsonBody(warmupInput) },
    responses: { 200: jsonResponse(WarmupSchema, "The warm-up as set"), 404: errorResponse("No such domain") },
  },
  { liveKeyOnly: "Changing a warm-up" },
);

async function warmupOf(db: AccountDb, domain: DomainRow) {
  return { ...serializeDomain(domain).warmup, sent_today: await warmupSentToday(db, domain.id) };
}

async function ownedDomain(db: SharedDb, accountId: string, id: string) {
  const domain = await findDomain(db, accountId, id);
  if (!domain) throw notFound("Domain");
  return domain;
}

export const domainRoutes = createRouter()
  .openapi(listDomains, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const rows = await findDomains(c.var.ctx.shared, c.get("auth").account.id, { cursor, limit });
    return c.json(pageOf(rows, limit, serializeDomain), 200);
  })
  .openapi(createDomain, async (c) => {
    const outcome = orRefuse(await addDomain(c.var.ctx.shared, c.get("auth").account.id, c.req.valid("json").name, c.env));
    return c.json(serializeDomain(outcome.domain), 201);
  })
  .openapi(getDomain, async (c) => {
    const domain = await ownedDomain(c.var.ctx.shared, c.get("auth").account.id, c.req.valid("param").id);
    const [warmup, rates] = await Promise.all([warmupOf(c.var.ctx.db, domain), domainRates(c.var.ctx.db, domain)]);
    const serialized = serializeDomain(domain);
    const today = {
      sent: rates.sent,
      hard_bounces: rates.hardBounces,
      complaints: rates.complaints,
      bounce_rate: rates.bounceRate,
      complaint_rate: rates.complaintRate,
      bounce_rate_limit: BOUNCE_RATE_LIMIT,
      complaint_rate_limit: COMPLAINT_RATE_LIMIT,
    };
    return c.json({ ...serialized, warmup, reputation: { ...serialized.reputation, today } }, 200);
  })
  .openapi(getWarmup, async (c) =>
    c.json(await warmupOf(c.var.ctx.db, await ownedDomain(c.var.ctx.shared, c.get("auth").account.id, c.req.valid("param").id)), 200),
  )
  .openapi(putWarmup, async (c) => {
    const domain = await ownedDomain(c.var.ctx.shared, c.get("auth").account.id, c.req.valid("param").id);
    const input = c.req.valid("json");
    const updated = await setWarmup(c.var.ctx, domain, {
      enabled: input.enabled,
      schedule: input.schedule,
      preset: input.preset,
      startedAt: input.started_at,
    });
    return c.json(await warmupOf(c.var.ctx.db, updated), 200);
  })
  .openapi(patchDomain, async (c) => {
    const domain = await ownedDomain(c.var.ctx.shared, c.get("auth").account.id, c.req.valid("param").id);
    const input = c.req.valid("json");
    const changed = orRefuse(await setReceiving(c.var.ctx, domain, { receiving: input.receiving, addresses: input.receiving_addresses }));
    return c.json(serializeDomain(changed.domain), 200);
  })
  .openapi(verify, async (c) => {
    const domain = await ownedDomain(c.var.ctx.shared, c.get("auth").account.id, c.req.valid("param").id);
    return c.json(serializeDomain(await verifyDomain(c.var.ctx.shared, domain, c.env)), 200);
  })
  .openapi(deleteDomain, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await removeDomain(c.var.ctx.shared, c.get("auth").account.id, id))) throw notFound("Domain");
    return c.json({ id, deleted: true as const }, 200);
  });
