// The audit log: every change to an account by a person, a key or the operator (docs/api.md, "Audit log"). Writes
// are recorded once, where requests pass (src/middleware/audit.ts for the API, the dashboard's session middleware),
// under an action named from the route itself (`actionOf`), so a new route is logged without anyone remembering to.

import type { AccountDb } from "../../db/client";
import { and, eq, gte, lt, lte, or, sql } from "drizzle-orm";
import { auditLog } from "../../db/schema";
import { newId } from "../../lib/ids";
import { keysetPage } from "../pagination";
import type { Actor } from "./actor";

export type AuditEntry = typeof auditLog.$inferSelect;

export type AuditRecord = {
  accountId: string;
  action: string;
  actor: Actor;
  target?: { type: string; id: string | undefined };
  via: AuditEntry["via"];
  ip?: string | null;
  userAgent?: string | null;
};

export async function recordAudit(db: AccountDb, record: AuditRecord): Promise<void> {
  await db.insert(auditLog).values({
    id: newId("aud"),
    accountId: record.accountId,
    action: record.action,
    actorType: record.actor.type,
    actorId: record.actor.id,
    actorName: record.actor.name,
    targetType: record.target?.type ?? null,
    targetId: record.target?.id ?? null,
    via: record.via,
    ip: record.ip ?? null,
    // a header is the client's to fill: kept short
    userAgent: record.userAgent?.slice(0, 300) ?? null,
  });
}

export function serializeAudit(entry: AuditEntry) {
  return {
    id: entry.id,
    action: entry.action,
    actor: { type: entry.actorType, id: entry.actorId, name: entry.actorName },
    target: entry.targetType ? { type: entry.targetType, id: entry.targetId } : null,
    via: entry.via,
    ip: entry.ip,
    user_agent: entry.userAgent,
    created_at: entry.createdAt,
  };
}

type AuditFilter = { actor?: string; action?: string; from?: string; to?: string };

/** A page of the account's log, newest first (`limit + 1` rows, for pageOf); `actor` is an actor's id or name. */
export function listAudit(db: AccountDb, accountId: string, page: { cursor?: string; limit: number } & AuditFilter): Promise<AuditEntry[]> {
  const keyset = keysetPage(auditLog, page.cursor);
  return db
    .select()
    .from(auditLog)
    .where(
      and(
        eq(auditLog.accountId, accountId),
        page.actor ? or(eq(auditLog.actorId, page.actor), eq(auditLog.actorName, page.actor)) : undefined,
        page.action ? eq(auditLog.action, page.action) : undefined,
        page.from ? gte(auditLog.createdAt, page.from) : undefined,
        page.to ? lte(auditLog.createdAt, page.to) : undefined,
        keyset.where,
      ),
    )
    .orderBy(...keyset.orderBy)
    .limit(page.limit + 1)
    .all();
}

const PURGED_PER_RUN = 10_000;

/** Entries older than `cutoff` (the retention window), oldest first, a bounded number a run. */
export async function purgeAuditLog(db: AccountDb, cutoff: string): Promise<number> {
  const deleted = await db
    .delete(auditLog)
    .where(
      sql`${auditLog.id} IN (SELECT ${auditLog.id} FROM ${auditLog} WHERE ${lt(auditLog.createdAt, cutoff)} ORDER BY ${auditLog.createdAt} LIMIT ${PURGED_PER_RUN})`,
    )
    .returning({ id: auditLog.id });
  return deleted.length;
}

// --- naming actions from routes ---------------------------------------------------------------------------------

/** Path words that are actions (`/campaigns/{id}/send`), as the log says them. */
const verbs: Record<string, string> = {
  send: "sent",
  cancel: "cancelled",
  rotate: "rotated",
  revoke: "revoked",
  verify: "verified",
  test: "tested",
  pause: "paused",
  resume: "resumed",
  trigger: "triggered",
  import: "imported",
  replay: "replayed",
  remove: "removed",
  delete: "deleted",
  clear: "cleared",
  upload: "uploaded",
  check: "checked",
  credits: "credits_added",
  "transfer-ownership": "ownership_transferred",
  settings: "settings_changed",
};

/** Resources whose path word is not their name. */
const resourceNames: Record<string, string> = {
  ai: "ai_request",
  inbound: "inbound_email",
  imports: "contact_import",
  verification: "verification",
  reputation: "reputation",
};

/** The API's and the dashboard's words for one thing, made one, and the names the log is read by. */
const renamed: Record<string, string> = {
  "domain.created": "domain.added",
  "api_key.deleted": "api_key.revoked",
  "member.created": "member.invited",
  "member.deleted": "member.removed",
  "member.updated": "member.role_changed",
  "suppression.created": "suppression.added",
  "suppression.deleted": "suppression.removed",
  "contact.imported": "contact_import.created",
};

const isParam = (segment: string) => segment.startsWith("{") || segment.startsWith(":");
const snake = (word: string) => word.replace(/-/g, "_");
const plural = (word: string) => /[^su]s$/.test(word);
const singular = (word: string) =>
  snake(resourceNames[word] ?? (word.endsWith("ies") ? `${word.slice(0, -3)}y` : plural(word) ? word.slice(0, -1) : word));
const byMethod: Record<string, string> = { POST: "created", PUT: "updated", PATCH: "updated", DELETE: "deleted" };

/** What a method does to a part of a resource: adds to or removes from its collections (a list's contacts), or sets it. */
function partDone(method: string, word: string): string {
  if (method === "DELETE") return "removed";
  return method === "POST" && plural(word) ? "added" : "updated";
}

/**
 * The action a write route records, from its method and path pattern (`{id}` or `:id`), after the base
 * (`/api/v1`, `/dashboard`, `/admin/v1`): the resource is the first word followed by an id (else the last word that
 * is not an action), and what is done is the method's (`created`, `updated`, `deleted`) or the path's own action
 * word, with the parts on the way: `POST /campaigns/{id}/send` → `campaign.sent`, `DELETE /lists/{id}/contacts/{c}`
 * → `list.contact_removed`, `POST /dashboard/api-keys/:id/revoke` → `api_key.revoked`.
 */
export function actionOf(method: string, path: string): string {
  const segments = path.split("/").filter(Boolean);
  const literal = (index: number) => segments[index] !== undefined && !isParam(segments[index]!);
  let at = segments.findIndex((segment, index) => !isParam(segment) && segments[index + 1] !== undefined && isParam(segments[index + 1]!));
  if (at < 0) at = segments.findLastIndex((segment) => !isParam(segment) && !(segment in verbs));
  const resource = singular(segments[at] ?? "account");
  const rest = segments.slice(at + 1).filter((_, index) => literal(at + 1 + index));
  const last = rest.at(-1);
  const trailingVerb = last !== undefined && last in verbs && literal(segments.length - 1) ? verbs[last] : undefined;
  const parts = (trailingVerb ? rest.slice(0, -1) : rest).map(singular);
  const lastPart = (trailingVerb ? rest.slice(0, -1) : rest).at(-1);
  // A dashboard form posts to the thing it changes (`POST /dashboard/contacts/:id`): an update.
  const ownDone = method === "POST" && isParam(segments.at(-1) ?? "") && lastPart === undefined ? "updated" : (byMethod[method] ?? "changed");
  const done = trailingVerb ?? (lastPart === undefined ? ownDone : partDone(method, lastPart));
  const action = `${resource}.${[...parts, done].join("_")}`;
  return renamed[action] ?? action;
}

/**
 * Routes whose names are not what they do, and writes that are not changes to the account: a sent message, a
 * verification and an automation run are their own record (GET /messages, /verify/{id}, /automations/{id}/runs),
 * and logging each would double the hot paths' writes.
 */
const routeActions: Record<string, string | false> = {
  "POST /api/v1/send": false,
  "POST /api/v1/send/batch": false,
  "POST /api/v1/verify": false,
  "POST /api/v1/automations/{id}/trigger": false,
  "POST /api/v1/ai/campaign": "ai_request.created",
  "POST /dashboard/security/totp": "member.totp_enabled",
  "POST /dashboard/security/totp/delete": "member.totp_disabled",
  "POST /dashboard/messages/test": false,
  "POST /dashboard/verification/check": false,
  "POST /dashboard/verification/upload": false,
  "POST /admin/v1/accounts/{id}/move": "account.moved",
};

/** The action a request to this route pattern records in the audit log, or undefined: a read, or not a change. */
export function auditedAction(method: string, path: string): string | undefined {
  if (method === "GET" || method === "HEAD" || method === "OPTIONS") return undefined;
  const declared = routeActions[`${method} ${path}`];
  if (declared !== undefined) return declared || undefined;
  return actionOf(method, path.replace(/^\/(api\/v1|admin\/v1|dashboard)(?=\/)/, ""));
}
