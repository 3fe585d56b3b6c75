import { listAudit, serializeAudit } from "../domain/audit/audit";
import { createRouter, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { dateFilterBound, pageOf } from "../lib/pagination";

const AuditEntrySchema = z
  .object({
    id: z.string().openapi({ example: "aud_2Zp8Qm0c2JYd7pG1rXw8Lk" }),
    action: z.string().openapi({ example: "member.invited", description: "`<what it was done to>.<what was done>`, named from the route" }),
    actor: z.object({
      type: z.enum(["member", "api_key", "operator"]),
      id: z.string().openapi({ description: "The member's or key's id; `operator` for the operator API" }),
      name: z.string().openapi({ example: "Default (sk_live_Ab3d…)", description: "A member's address, a key's name and prefix" }),
    }),
    target: z.object({ type: z.string(), id: z.string().nullable() }).nullable(),
    via: z.enum(["api", "dashboard", "operator"]),
    ip: z.string().nullable(),
    user_agent: z.string().nullable(),
    created_at: Timestamp,
  })
  .openapi("AuditEntry");

const dateBound = (name: string, description: string) =>
  z.iso
    .date()
    .or(z.iso.datetime({ offset: true }))
    .optional()
    .openapi({ param: { name, in: "query" }, description });

const AuditQuery = PaginationQuery.extend({
  actor: z
    .string()
    .max(320)
    .optional()
    .openapi({ param: { name: "actor", in: "query" }, description: "A member's id or address, a key's id, or `operator`" }),
  action: z
    .string()
    .max(100)
    .optional()
    .openapi({ param: { name: "action", in: "query" }, example: "member.signed_in" }),
  from: dateBound("from", "YYYY-MM-DD or an ISO timestamp (inclusive)"),
  to: dateBound("to", "YYYY-MM-DD (the whole day) or an ISO timestamp (inclusive)"),
});

const listRoute = keyedRoute("full_access", {
  method: "get",
  path: "/audit-log",
  tags: ["Audit log"],
  summary: "Who changed what, newest first",
  description:
    "Every successful write through the API, the dashboard or the operator API, and every dashboard sign-in, with who (member, API key or " +
    "operator), on what, when and from where. Sent mail, verifications and automation triggers are their own record and not repeated here. " +
    "Kept for RETENTION_DAYS.",
  request: { query: AuditQuery },
  responses: { 200: jsonResponse(paginated(AuditEntrySchema, "AuditLog"), "A page of entries") },
});

export const auditLogRoutes = createRouter().openapi(listRoute, async (c) => {
  const query = c.req.valid("query");
  const rows = await listAudit(c.var.ctx.db, c.get("auth").account.id, {
    ...query,
    from: query.from ? dateFilterBound(query.from, "start") : undefined,
    to: query.to ? dateFilterBound(query.to, "end") : undefined,
  });
  return c.json(pageOf(rows, query.limit, serializeAudit), 200);
});
