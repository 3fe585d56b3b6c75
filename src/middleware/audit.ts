// Recording writes in the audit log, once per request where requests pass: keyedRoute adds `auditWrites` to every
// API write route, and the dashboard's session middleware calls `recordDashboardChange` after every form post. Only
// a change that succeeded (status below 400) is recorded; reads never are.

import { accountDb, type AccountDb } from "../db/client";
import { findAccount } from "../domain/accounts/accounts";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { routePath } from "hono/route";
import { actorOf, operatorActor, type Actor } from "../domain/audit/actor";
import { auditedAction, recordAudit, type AuditRecord } from "../domain/audit/audit";
import { logError } from "../lib/log";
import type { AppEnv, AuthContext } from "../types";

const idPattern = /^[a-z]+_[0-9A-Za-z]{10,}$/;

/** Where the request came from. */
export const origin = (c: Context) => ({ ip: c.req.header("CF-Connecting-IP") ?? null, userAgent: c.req.header("User-Agent") ?? null });

/** What the change was made to: the route's first path parameter, else the id of what it created (in its JSON answer or its redirect). */
async function targetId(c: Context): Promise<string | undefined> {
  const param = Object.values(c.req.param() as Record<string, string>)[0];
  if (param) return param;
  const location = c.res.headers.get("Location");
  if (location) return location.split(/[/?]/).findLast((segment) => idPattern.test(segment));
  if (!c.res.headers.get("Content-Type")?.startsWith("application/json")) return undefined;
  const body: unknown = await c.res
    .clone()
    .json()
    .catch(() => undefined);
  const id = typeof body === "object" && body !== null ? (body as { id?: unknown }).id : undefined;
  return typeof id === "string" ? id : undefined;
}

/** Writes the entry; a failure is logged rather than failing a change that has already been made. */
export async function record(db: AccountDb, entry: AuditRecord): Promise<void> {
  try {
    await recordAudit(db, entry);
  } catch (error) {
    logError("audit log entry not written", { account_id: entry.accountId, action: entry.action, error: String(error) });
  }
}

async function recordChange(c: Context<AppEnv>, db: AccountDb, accountId: string, actor: Actor, action: string, via: AuditRecord["via"]) {
  if (c.res.status >= 400) return;
  await record(db, {
    accountId,
    action,
    actor,
    target: { type: action.split(".")[0]!, id: await targetId(c) },
    via,
    ...origin(c),
  });
}

/** The middleware of an API write route: records `action` once the route has answered with success. */
export const auditWrites = (action: string) =>
  createMiddleware<AppEnv>(async (c, next) => {
    await next();
    const auth = c.get("auth");
    await recordChange(c, c.var.ctx.db, auth.account.id, actorOf(auth), action, "api");
  });

/** The middleware of an operator route on one account (`/accounts/{id}…`, or the account it creates). */
export const auditOperator = (action: string) =>
  createMiddleware<AppEnv>(async (c, next) => {
    await next();
    const accountId = await targetId(c);
    if (c.res.status >= 400 || !accountId?.startsWith("acc_")) return;
    // The operator's requests name the account but are not made in its context: the entry goes to its database.
    const account = await findAccount(c.var.ctx.shared, accountId);
    if (account) await recordChange(c, accountDb(c.env, account), accountId, operatorActor, action, "operator");
  });

/** After a dashboard form post has been answered: records it under the action its route names. */
export async function recordDashboardChange(c: Context, auth: AuthContext): Promise<void> {
  const action = auditedAction(c.req.method, routePath(c));
  if (action) await recordChange(c, c.var.ctx.db, auth.account.id, actorOf(auth), action, "dashboard");
}
