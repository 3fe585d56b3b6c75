import { Hono, type Context, type MiddlewareHandler } from "hono";
import { hasFeature } from "../domain/accounts/accounts";
import type { z } from "zod";
import { AppError, fieldErrors, validationError } from "../errors";
import type { Feature } from "../access";
import { areas, type AreaName } from "../domain/accounts/roles";
import { canSee } from "./layout";
import type { DashboardEnv } from "./session";

const isChange = (c: Context<DashboardEnv>) => c.req.method !== "GET" && c.req.method !== "HEAD";

/** Why the signed-in person or key may not do this here. */
function refusalOf(c: Context<DashboardEnv>, needs: AreaName): string {
  const { member } = c.get("auth");
  if (member)
    return member.role === "viewer" && isChange(c)
      ? "A viewer can look but not change anything"
      : `Your role (${member.role}) does not include this page`;
  const scope = areas[needs].scope;
  return scope === "full_access" ? "This page needs a full-access key" : `This page needs a key with the \`${scope}\` scope`;
}

/**
 * Refuses whoever's role or key's scopes (or account's plan) do not cover `area`, with the 403 the API gives; a request
 * that changes something needs a role that may change the area. `features` are those the matching API route requires
 * (all of them, as its requireFeatures does). A section names its own with section(); a route declares more beside
 * its path (a campaign's test email is also the `test_email` area's).
 */
export const needs =
  (area: AreaName, ...features: Feature[]): MiddlewareHandler<DashboardEnv> =>
  async (c, next) => {
    const auth = c.get("auth");
    if (!canSee(auth, area, isChange(c))) throw new AppError("scope_missing", refusalOf(c, area));
    const missing = features.filter((feature) => !hasFeature(auth.account, feature));
    if (missing.length > 0)
      throw new AppError("feature_disabled", `Your plan does not include: ${missing.join(", ")}. Ask the operator to enable it`);
    await next();
  };

/**
 * A section's pages with its area (and the plan features its API routes require) declared once, where it is mounted:
 * every route checks them before its handler runs, so no handler can forget. The check goes on each route rather than
 * on a path prefix, because sections share prefixes (/contacts/suppressions is the suppression list's, the receiving
 * form under /inbound the domains'): a route of one must not also need the other's area.
 */
export function section(pages: Hono<DashboardEnv>, area: AreaName, ...features: Feature[]): Hono<DashboardEnv> {
  const check = needs(area, ...features);
  const guarded = new Hono<DashboardEnv>();
  const checked = new Set<string>();
  for (const { method, path, handler } of pages.routes) {
    // A route with middleware of its own (needs, liveKeyOnly) is several entries: the section's check comes once, first.
    if (!checked.has(`${method} ${path}`)) guarded.on(method, path, check);
    checked.add(`${method} ${path}`);
    guarded.on(method, path, handler);
  }
  return guarded;
}

/** A form field as text ("" when absent or a file). */
export function field(form: Record<string, unknown>, name: string): string {
  const value = form[name];
  return typeof value === "string" ? value.trim() : "";
}

/** What the API's `liveKeyOnly` routes refuse a test key, refused here too: a test key cannot change live mail. */
export const liveKeyOnly =
  (what: string): MiddlewareHandler<DashboardEnv> =>
  async (c, next) => {
    if (c.get("auth").apiKey.mode !== "live") throw new AppError("live_key_required", `${what} needs a live key; test keys cannot change live mail`);
    await next();
  };

/** Field errors of a domain outcome as one sentence for the page. */
export const describeErrors = (errors: Record<string, string[]>) =>
  Object.entries(errors)
    .map(([path, messages]) => `${path}: ${messages.join(", ")}`)
    .join("; ");

/** A form parsed with the API's own request schema: what the API refuses is refused here, with its messages. */
export function parsedOrThrow<T>(schema: z.ZodType<T>, body: unknown, message: string): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw validationError(fieldErrors(parsed.error), message);
  return parsed.data;
}
