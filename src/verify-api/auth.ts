import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { createMiddleware } from "hono/factory";
import { apiKeys } from "../db/schema";
import type { Account } from "../domain/accounts/accounts";
import { authenticateApiKey, hasScope } from "../domain/accounts/api-keys";
import { AppError } from "../errors";
import type { AppEnv } from "../types";

/** Requests per second per key on the verification API (spec, Limits: standard plans). */
export const STANDARD_REQUESTS_PER_SECOND = 5;

// Same reasoning as the main API's key middleware: last_used_at is informational, one write a minute at most.
const lastUsedResolutionMs = 60_000;

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
  const auth = await authenticateApiKey(drizzle(c.env.DB), presented);
  if (!auth) throw new AppError("unauthorized", "Invalid API key: it does not exist, was revoked or was rotated");
  if (!hasScope(auth.apiKey, "verify")) throw new AppError("scope_missing", "This API key lacks the `verify` scope");
  c.set("auth", { account: auth.account, apiKey: auth.apiKey });

  const limit = verifyRequestsPerSecond(auth.account);
  const decision = await c.env.RATE_LIMITER.getByName(`verify:${auth.apiKey.id}`).consume(limit, 1);
  const rateHeaders = {
    "RateLimit-Limit": String(decision.limit),
    "RateLimit-Remaining": String(decision.remaining),
    "RateLimit-Reset": String(decision.resetSeconds),
  };
  for (const [name, value] of Object.entries(rateHeaders)) c.header(name, value);
  if (!decision.allowed) {
    throw new AppError("rate_limited", `Rate limit of ${decision.limit} requests per second reached; retry after ${decision.retryAfterSeconds} s`, {
      headers: { ...rateHeaders, "Retry-After": String(decision.retryAfterSeconds) },
    });
  }

  if (!auth.lastUsedAt || Date.now() - Date.parse(auth.lastUsedAt) > lastUsedResolutionMs) {
    c.executionCtx.waitUntil(
      drizzle(c.env.DB).update(apiKeys).set({ lastUsedAt: new Date().toISOString() }).where(eq(apiKeys.id, auth.apiKey.id)).run(),
    );
  }
  await next();
});
