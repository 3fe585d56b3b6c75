// What the three compatibility surfaces (docs/migrating.md) share: the key check, and the one way their sends reach
// the pipeline. Each peer translates its request into a POST /send request and hands it here, so its mail is checked,
// charged, suppressed, limited and recorded exactly as /api/v1's; only the request and response shapes differ.

import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { createMiddleware } from "hono/factory";
import { acceptInputOf } from "../api/send";
import { authenticateApiKey } from "../domain/accounts/api-keys";
import { acceptMessage, acceptMessages, type SendAccepted } from "../domain/sending/accept";
import { SendRequestSchema, type SendRequest } from "../domain/sending/input";
import { AppError, type ErrorCode, type FieldErrors, fieldErrors } from "../errors";
import { acceptRefusalError } from "../http/refusals";
import { sha256Hex } from "../lib/crypto";
import { logError } from "../lib/log";
import type { z } from "../lib/openapi";
import { admitKey, perKeyLimiter, requireFeatures, requireFullAccess, requireLiveKey, requireScope } from "../middleware/auth";
import type { AppEnv } from "../types";
import type { Feature, Scope } from "../access";

/** A refusal as a peer names it, beside our code (which decides everything else, the status included). */
export class PeerError extends AppError {
  readonly peerName: string | undefined;

  constructor(code: ErrorCode, message: string, peerName?: string, options: { errors?: FieldErrors } = {}) {
    super(code, message, options);
    this.peerName = peerName;
  }
}

/** What went wrong, in our terms, for a peer to put in its own error shape. */
export type Failure = { code: ErrorCode; message: string; errors?: FieldErrors; peerName?: string };

/**
 * An onError for a peer's router: every error, ours or hono's, becomes a Failure the peer renders; nothing reaches
 * /api/v1's `{message, code}` shape, which the peer's client could not read.
 */
export function peerErrorHandler(render: (failure: Failure, c: Context<AppEnv>) => Response) {
  return (err: Error, c: Context<AppEnv>): Response => {
    if (err instanceof AppError) {
      for (const [name, value] of Object.entries(err.headers)) c.header(name, value);
      return render(
        {
          code: err.code,
          message: err.message,
          ...(err.errors ? { errors: err.errors } : {}),
          ...(err instanceof PeerError && err.peerName ? { peerName: err.peerName } : {}),
        },
        c,
      );
    }
    if (err instanceof HTTPException && err.status < 500) {
      if (err.status === 413) return render({ code: "payload_too_large", message: "The request body is too large" }, c);
      return render({ code: "validation_failed", message: `The request body is not valid JSON: ${err.message}`, errors: { body: [err.message] } }, c);
    }
    logError(err.message, { request_id: c.get("requestId"), stack: err.stack });
    return render({ code: "internal_error", message: "Something went wrong on our side; retry with back-off" }, c);
  };
}

/**
 * The key check of a peer's routes: the key comes where that peer's client puts it; the rest (rate limit, usage,
 * scopes) is /api/v1's. `missing` and `invalid` are the peer's own refusals.
 */
export function peerKeyAuth(options: {
  keyOf: (c: Context<AppEnv>) => string | undefined;
  missing: () => AppError;
  invalid: () => AppError;
  /** Routes that may use the isolate's key cache (the sends, as POST /api/v1/send does). */
  cachedRoute: (method: string, path: string) => boolean;
}) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const presented = options.keyOf(c);
    if (!presented) throw options.missing();
    const auth = await authenticateApiKey(c.var.ctx.shared, presented, (write) => c.executionCtx.waitUntil(write), {
      cached: options.cachedRoute(c.req.method, c.req.path),
    });
    if (!auth) throw options.invalid();
    await admitKey(c, auth, perKeyLimiter(auth));
    await next();
  });
}

/** Peer requests in POST /send's shape, checked by its schema: the valid ones in order, and the field errors of each invalid one by its index. */
export function checkSendRequests(candidates: unknown[]): { requests: SendRequest[]; errors: Map<number, FieldErrors> } {
  const requests: SendRequest[] = [];
  const errors = new Map<number, FieldErrors>();
  candidates.forEach((candidate, index) => {
    const parsed = SendRequestSchema.safeParse(candidate);
    if (parsed.success) requests.push(parsed.data);
    else errors.set(index, fieldErrors(parsed.error));
  });
  return { requests, errors };
}

/** One field-error map with keys prefixed by their request's index, as a batch's 422 shows them. */
export function indexedErrors(errors: Map<number, FieldErrors>): FieldErrors {
  const all: FieldErrors = {};
  for (const [index, fields] of errors) for (const [field, messages] of Object.entries(fields)) all[`${index}.${field}`] = messages;
  return all;
}

/**
 * Sends checked requests through acceptMessage (one) or acceptMessages (several, all or none), as POST /send and
 * /send/batch do. `idempotency.route` keeps a peer's keys apart from /api/v1's and from another peer's; the hash is of
 * the peer's own request body. A refusal is thrown as our AppError, which the peer's error handler renders.
 */
export async function acceptSends(
  c: Context<AppEnv>,
  requests: SendRequest[],
  options: { batch: boolean; idempotency?: { key: string; route: string; body: unknown } },
): Promise<{ accepted: SendAccepted[]; replayed: boolean }> {
  const inputs = requests.map((request, index) => acceptInputOf(request, options.batch ? index : undefined));
  const { account, apiKey } = c.get("auth");
  const sender = { account, testMode: apiKey.mode === "test" };
  const idempotency = options.idempotency
    ? {
        key: options.idempotency.key,
        route: apiKey.mode === "test" ? `${options.idempotency.route} (test)` : options.idempotency.route,
        requestHash: await sha256Hex(JSON.stringify(options.idempotency.body)),
      }
    : undefined;
  if (!options.batch) {
    const outcome = await acceptMessage(c.var.ctx, sender, inputs[0]!, idempotency);
    if (outcome.kind !== "accepted") throw acceptRefusalError(outcome);
    return { accepted: [outcome.body], replayed: outcome.replayed };
  }
  const outcome = await acceptMessages(c.var.ctx, sender, inputs, idempotency);
  if (outcome.kind !== "accepted") throw acceptRefusalError(outcome);
  return { accepted: outcome.body.data, replayed: outcome.replayed };
}

/** Template variables are strings; a peer's model may hold numbers and booleans too, which read the same in text. */
export function stringVariables(model: Record<string, unknown>, field: string): { variables: Record<string, string>; errors: FieldErrors } {
  const variables: Record<string, string> = {};
  const errors: FieldErrors = {};
  for (const [name, value] of Object.entries(model)) {
    if (typeof value === "string") variables[name] = value;
    else if (typeof value === "number" || typeof value === "boolean") variables[name] = String(value);
    else if (value !== null && value !== undefined) {
      errors[`${field}.${name}`] = ["Not supported: template values are text, numbers or booleans (no nested objects, lists or sections)"];
    }
  }
  return { variables, errors };
}

/**
 * A route of a peer's surface: its scope and features enforced by /api/v1's own middleware, its errors described in
 * the peer's shape, under the peer's tag in the OpenAPI document.
 */
export function peerRoute<R extends Omit<RouteConfig, "middleware" | "security">>(
  access: Scope | "full_access",
  route: R,
  peer: {
    security: Record<string, string[]>;
    errors: { description: string; content: Record<string, { schema: z.ZodType }> };
    features?: Feature[];
    /** What the route does, for the refusal a test key gets, as keyedRoute's option of the same name. */
    liveKeyOnly?: string;
  },
) {
  return createRoute({
    ...route,
    description: [route.description, access === "full_access" ? "Needs a full-access key." : `Scope: \`${access}\`.`].filter(Boolean).join("\n\n"),
    middleware: [
      access === "full_access" ? requireFullAccess : requireScope(access),
      ...(peer.features?.length ? [requireFeatures(...peer.features)] : []),
      ...(peer.liveKeyOnly ? [requireLiveKey(peer.liveKeyOnly)] : []),
    ],
    security: [peer.security],
    "x-required-scope": access,
    responses: { default: peer.errors, ...route.responses },
  });
}
