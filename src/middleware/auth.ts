import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { authenticateApiKey, hasScope } from "../domain/accounts/api-keys";
import { hasFeature } from "../domain/accounts/accounts";
import { accountMoving, AppError } from "../errors";
import { isPausedForMove } from "../domain/accounts/move";
import { timingSafeEqualString } from "../lib/crypto";
import type { AppEnv, AuthContext } from "../types";
import type { Feature, Scope } from "../access";
import { config } from "../config";
import { requestCtx } from "./request";

const bearerPattern = /^Bearer ([^\s]+)$/;

export function bearerToken(header: string | undefined): string | undefined {
  return header ? bearerPattern.exec(header.trim())?.[1] : undefined;
}

/**
 * What every keyed request goes through once its key is known: the key's context for the handlers, its rate limit
 * in the RateLimiter object `limiter` (RateLimit-* headers always, 429 with Retry-After past it), and, while the
 * operator moves the account's rows, 503 with Retry-After for anything but a read.
 */
export async function admitKey(
  c: Context<AppEnv>,
  auth: AuthContext,
  limiter: { name: string; limit: number; windowSeconds: number; per: "minute" | "second" },
): Promise<void> {
  c.set("auth", auth);
  if (isPausedForMove(auth.account) && c.req.method !== "GET" && c.req.method !== "HEAD") throw accountMoving();
  c.set("ctx", requestCtx(c, auth.account));
  // The key's own limiter also counts the call for the account's usage (flushed to D1 once a minute).
  const decision = await c.env.RATE_LIMITER.getByName(limiter.name).consume(limiter.limit, limiter.windowSeconds, 1, undefined, auth.account.id);
  const rateHeaders = {
    "RateLimit-Limit": String(decision.limit),
    "RateLimit-Remaining": String(decision.remaining),
    "RateLimit-Reset": String(decision.resetSeconds),
  };
  for (const [name, value] of Object.entries(rateHeaders)) c.header(name, value);
  if (!decision.allowed) {
    throw new AppError(
      "rate_limited",
      `Rate limit of ${decision.limit} requests per ${limiter.per} reached; retry after ${decision.retryAfterSeconds} s`,
      {
        headers: { ...rateHeaders, "Retry-After": String(decision.retryAfterSeconds) },
      },
    );
  }
}

/** The per-minute limiter of an API key: API calls and the dashboard's actions with that key share it. */
export const perKeyLimiter = (auth: AuthContext) =>
  ({ name: `key:${auth.apiKey.id}`, limit: auth.account.rateLimitPerMinute, windowSeconds: 60, per: "minute" }) as const;

// Routes that may authenticate from the isolate's key cache (authenticateApiKey): the send hot path, which reads
// nothing from the account that a few seconds could make wrong. Routes showing balances or limits read D1.
const cachedKeyRoutes: ReadonlySet<string> = new Set(["POST /api/v1/send", "POST /api/v1/send/batch"]);

/** `Authorization: Bearer <API key>` on /api/v1, then the per-key rate limit from the account's plan. */
export const apiKeyAuth = createMiddleware<AppEnv>(async (c, next) => {
  const presented = bearerToken(c.req.header("Authorization"));
  if (!presented) {
    throw new AppError("unauthorized", "Missing API key: send it as `Authorization: Bearer <API_KEY>`");
  }
  const auth = await authenticateApiKey(c.var.ctx.shared, presented, (write) => c.executionCtx.waitUntil(write), {
    cached: cachedKeyRoutes.has(`${c.req.method} ${c.req.path}`),
  });
  if (!auth) throw new AppError("unauthorized", "Invalid API key: it does not exist, was revoked or was rotated");
  await admitKey(c, auth, perKeyLimiter(auth));
  await next();
});

export const requireScope = (scope: Scope) =>
  createMiddleware<AppEnv>(async (c, next) => {
    const { apiKey } = c.get("auth");
    if (!hasScope(apiKey, scope)) throw new AppError("scope_missing", `This API key lacks the \`${scope}\` scope`);
    await next();
  });

export const requireFullAccess = createMiddleware<AppEnv>(async (c, next) => {
  if (c.get("auth").apiKey.scopes !== null) {
    throw new AppError("scope_missing", "Managing API keys needs a full-access key (one created without scopes)");
  }
  await next();
});

/**
 * Test keys (sk_test_) simulate sending; they must not change what live mail does. A leaked test key could otherwise
 * point webhooks at an attacker (live events), rewrite a live template, or lift a suppression.
 */
export const requireLiveKey = (what: string) =>
  createMiddleware<AppEnv>(async (c, next) => {
    if (c.get("auth").apiKey.mode !== "live") throw new AppError("live_key_required", `${what} needs a live key; test keys cannot change live mail`);
    await next();
  });

export const requireFeatures = (...required: Feature[]) =>
  createMiddleware<AppEnv>(async (c, next) => {
    const { account } = c.get("auth");
    const missing = required.filter((feature) => !hasFeature(account, feature));
    if (missing.length > 0) {
      throw new AppError("feature_disabled", `Your plan does not include: ${missing.join(", ")}. Ask the operator to enable it`);
    }
    await next();
  });

/** `Authorization: Bearer <ADMIN_TOKEN>` on /admin/v1, compared in constant time. */
export const adminAuth = createMiddleware<AppEnv>(async (c, next) => {
  const presented = bearerToken(c.req.header("Authorization"));
  const expected = config(c.env).adminToken;
  if (!expected) throw new AppError("unauthorized", "The operator API is disabled: ADMIN_TOKEN is not set");
  if (!presented || !(await timingSafeEqualString(presented, expected))) {
    throw new AppError("unauthorized", "Missing or invalid operator token");
  }
  await next();
});
