import { createMiddleware } from "hono/factory";
import type { Account } from "../domain/accounts/accounts";
import { authenticateApiKey, hasScope } from "../domain/accounts/api-keys";
import { AppError } from "../errors";
import { admitKey } from "../middleware/auth";
import type { AppEnv } from "../types";

/** Requests per second per key on the verification API (spec, Limits: standard plans). */
export const STANDARD_REQUESTS_PER_SECOND = 5;

/**
 * Enterprise plans are "customisable": their per-second rate is the account's own per-minute limit spread over the
 * minute (set by the operator), never below the standard 5.
 */
export function verifyRequestsPerSecond(account: Account): number {
  if (account.plan !== "enterprise") return STANDARD_REQUESTS_PER_SECOND;
  return Math.max(STANDARD_REQUESTS_PER_SECOND, Math.floor(account.rateLimitPerMinute / 60));
}

/**
 * The verification API's key: `?apikey=` (spec, Authentication 5), a key of the main API with the `verify` scope
 * (or full access). Limited per key per second in the RateLimiter object `verify:<key id>`, apart from the main
 * API's per-minute bucket.
 */
export const verifyApiKeyAuth = createMiddleware<AppEnv>(async (c, next) => {
  const presented = c.req.query("apikey");
  if (!presented) throw new AppError("unauthorized", "Missing API key: pass it as the `apikey` query parameter");
  const auth = await authenticateApiKey(c.var.ctx.shared, presented, (write) => c.executionCtx.waitUntil(write));
  if (!auth) throw new AppError("unauthorized", "Invalid API key: it does not exist, was revoked or was rotated");
  if (!hasScope(auth.apiKey, "verify")) throw new AppError("scope_missing", "This API key lacks the `verify` scope");
  await admitKey(c, auth, { name: `verify:${auth.apiKey.id}`, limit: verifyRequestsPerSecond(auth.account), windowSeconds: 1, per: "second" });
  await next();
});
