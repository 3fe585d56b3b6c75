import type { Context } from "hono";
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
 * Refuses an area the signed-in member's role or key's scopes (or the account's plan) do not cover, with the 403 the
 * API gives; a request that changes something needs a role that may change the area. `features` are those the
 * matching API route requires (all of them, as its requireFeatures does).
 */
export function requireSection(c: Context<DashboardEnv>, needs: AreaName, ...features: Feature[]): void {
  const auth = c.get("auth");
  if (!canSee(auth, needs, isChange(c))) throw new AppError("scope_missing", refusalOf(c, needs));
  const missing = features.filter((feature) => !hasFeature(auth.account, feature));
  if (missing.length > 0) throw new AppError("feature_disabled", `Your plan does not include: ${missing.join(", ")}. Ask the operator to enable it`);
}

/** A form field as text ("" when absent or a file). */
export function field(form: Record<string, unknown>, name: string): string {
  const value = form[name];
  return typeof value === "string" ? value.trim() : "";
}

/** What the API's `liveKeyOnly` routes refuse a test key, refused here too: a test key cannot change live mail. */
export function requireLiveKey(c: Context<DashboardEnv>, what: string): void {
  if (c.get("auth").apiKey.mode !== "live") throw new AppError("live_key_required", `${what} needs a live key; test keys cannot change live mail`);
}

/** The check every handler of a section starts with; one that makes a `change` (named in the refusal) also needs a live key. */
export const sectionGuard =
  (needs: AreaName, ...features: Feature[]) =>
  (c: Context<DashboardEnv>, change?: string): void => {
    requireSection(c, needs, ...features);
    if (change) requireLiveKey(c, change);
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
