import {
  createDomain as addDomain,
  deleteDomain as removeDomain,
  findDomain,
  listDomains as findDomains,
  normalizeDomainName,
  serializeDomain,
  verifyDomain,
} from "../domain/domains/domains";
import { AppError, notFound, validationError } from "../errors";
import { pageOf } from "../lib/pagination";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";

const DnsRecordSchema = z
  .object({
    type: z.enum(["TXT", "MX", "CNAME"]),
    name: z.string().openapi({ example: "mf202611._domainkey.example.com" }),
    value: z.string().openapi({ description: "Exactly what to publish (one value, even when longer than 255 characters)" }),
    purpose: z.enum(["dkim", "spf", "dmarc", "return_path", "dkim_ed25519"]),
    status: z.enum(["pending", "verified", "failed", "not_found"]),
    found: z.array(z.string()).optional().openapi({ description: "What DNS answered at the last check" }),
  })
  .openapi("DnsRecord");

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
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Domain");

const CreateDomainSchema = z
  .object({ name: z.string().max(253).openapi({ example: "example.com" }) })
  .strict()
  .openapi("CreateDomain");

const listDomains = keyedRoute("domains", {
  method: "get",
  path: "/domains",
  tags: ["Domains"],
  summary: "List sending domains",
  request: { query: PaginationQuery },
  responses: { 200: jsonResponse(paginated(DomainSchema, "DomainList"), "Domains, newest first") },
});

const createDomain = keyedRoute("domains", {
  method: "post",
  path: "/domains",
  tags: ["Domains"],
  summary: "Add a sending domain and get the DNS records to publish",
  description: "Generates an RSA-2048 DKIM key (the private key is stored encrypted). Publish `records`, then call verify.",
  request: { body: jsonBody(CreateDomainSchema) },
  responses: { 201: jsonResponse(DomainSchema, "The domain, status `pending`"), 409: errorResponse("The account already has this domain") },
});

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

const deleteDomain = keyedRoute("domains", {
  method: "delete",
  path: "/domains/{id}",
  tags: ["Domains"],
  summary: "Remove a sending domain",
  request: { params: IdParam("dom") },
  responses: { 200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Removed"), 404: errorResponse("No such domain") },
});

async function ownedDomain(d1: D1Database, accountId: string, id: string) {
  const domain = await findDomain(d1, accountId, id);
  if (!domain) throw notFound("Domain");
  return domain;
}

export const domainRoutes = createRouter()
  .openapi(listDomains, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const rows = await findDomains(c.env.DB, c.get("auth").account.id, { cursor, limit });
    return c.json(pageOf(rows, limit, serializeDomain), 200);
  })
  .openapi(createDomain, async (c) => {
    const name = normalizeDomainName(c.req.valid("json").name);
    if (!name) throw validationError({ name: ["Not a domain name this account can send from (e.g. example.com or mail.example.com)"] });
    const outcome = await addDomain(c.env.DB, c.get("auth").account.id, name, c.env);
    if (outcome.kind === "exists") {
      throw new AppError("conflict", `The domain ${name} is already on this account${outcome.id ? ` (${outcome.id})` : ""}`);
    }
    return c.json(serializeDomain(outcome.domain), 201);
  })
  .openapi(getDomain, async (c) => c.json(serializeDomain(await ownedDomain(c.env.DB, c.get("auth").account.id, c.req.valid("param").id)), 200))
  .openapi(verify, async (c) => {
    const domain = await ownedDomain(c.env.DB, c.get("auth").account.id, c.req.valid("param").id);
    return c.json(serializeDomain(await verifyDomain(c.env.DB, domain, c.env)), 200);
  })
  .openapi(deleteDomain, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await removeDomain(c.env.DB, c.get("auth").account.id, id))) throw notFound("Domain");
    return c.json({ id, deleted: true as const }, 200);
  });
