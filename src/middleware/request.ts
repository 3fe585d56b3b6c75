import { RELAY_BASE_PATH, RELAY_MESSAGES_MAX_BODY_BYTES, relayEndpoints } from "@mailforge/bridge-contract";
import { bodyLimit } from "hono/body-limit";
import type { Context, MiddlewareHandler } from "hono";
import { createMiddleware } from "hono/factory";
import { AppError } from "../errors";
import { randomBase62 } from "../lib/ids";
import { openCtx } from "../db/client";
import type { AppEnv } from "../types";

/**
 * The request's context for `account` (or, before it is known, for whichever account its token or id names). The
 * ExecutionContext is read when work is handed over, not here: a request made without one (app.request in a test)
 * still gets a context.
 */
export const requestCtx = (c: Pick<Context<AppEnv>, "env" | "executionCtx">, account?: { database: string }) =>
  openCtx(c.env, { waitUntil: (promise) => c.executionCtx.waitUntil(promise) }, account);

/**
 * Every response, errors and unknown routes included, carries the id its logs are filed under. Not hono/request-id:
 * it adopts a caller's `X-Request-Id`, and ours is always minted here because it is also a ledger reference (the
 * verification API charges per request id), so a replayed id must never let a caller skip a charge.
 * The data handles are opened here, once per request; the account's own, once its key is known (admitKey).
 */
export const requestId = createMiddleware<AppEnv>(async (c, next) => {
  const id = `req_${randomBase62(20)}`;
  c.set("requestId", id);
  // A request without bindings (the Node suite's app.request for the OpenAPI document) reads no data.
  if (c.env) {
    // Until a key or session names the account (admitKey replaces it), a route that finds the account from what it
    // was given (a tracking token, a form id, the relay's credential) works in this context.
    c.set("ctx", requestCtx(c));
  }
  await next();
  c.res.headers.set("X-Request-Id", id);
});

const JSON_MEDIA_TYPE = /^application\/([\w.-]+\+)?json\s*(;|$)/i;

/**
 * An empty body sent as JSON (`curl -X POST -H 'Content-Type: application/json'` without `-d`, or a client that
 * always sets the header) is read as `{}`, not refused as malformed JSON: where a body is optional that is the same
 * as sending none, and where fields are required the 422 names them.
 */
export const emptyJsonBodyAsObject = createMiddleware<AppEnv>(async (c, next) => {
  const empty = c.req.raw.body === null || c.req.header("Content-Length") === "0";
  if (empty && c.req.method !== "GET" && c.req.method !== "HEAD" && JSON_MEDIA_TYPE.test(c.req.header("Content-Type") ?? "")) {
    c.req.raw = new Request(c.req.raw, { body: "{}" });
  }
  await next();
});

const MB = 1024 * 1024;
const sizeOf = (bytes: number) => (bytes >= MB ? `${Math.round(bytes / MB)} MB` : `${Math.round(bytes / 1024)} KB`);

/** A request body cap: the first entry whose prefix matches the path applies; sizes are of the request as sent (base64 included). */
type BodyCap = { prefix: string; maxSize: number; refusal: string };

const apiCap = (prefix: string, maxSize: number): BodyCap => ({
  prefix,
  maxSize,
  refusal: `The request body is larger than this endpoint accepts (${sizeOf(maxSize)})`,
});

const apiCaps: BodyCap[] = [
  apiCap("/api/v1/send", 15 * MB),
  // the bridge sizes its largest message from this same constant
  apiCap(`${RELAY_BASE_PATH}${relayEndpoints.messages.path}`, RELAY_MESSAGES_MAX_BODY_BYTES),
  apiCap("/api/batch/upload", 50 * MB),
  apiCap("/api/v1/contacts/import", 50 * MB),
  apiCap("/api/v1/verify", 5 * MB),
  // a signup form's fields, never files
  apiCap("/hooks/automations", 64 * 1024),
  apiCap("/subscribe", 64 * 1024),
  apiCap("/", 1 * MB),
];

// Said to a person in the dashboard's error page: the CSV uploads are 5 MB files (read in memory) in a multipart form.
const dashboardCaps: BodyCap[] = [
  { prefix: "/dashboard/verification/upload", maxSize: 6 * MB, refusal: "The file is larger than 5 MB" },
  { prefix: "/dashboard/contacts/imports", maxSize: 6 * MB, refusal: "The file is larger than 5 MB" },
  { prefix: "/dashboard", maxSize: 1 * MB, refusal: "The form is larger than 1 MB" },
];

const matches = (prefix: string, path: string) => prefix === "/" || path === prefix || path.startsWith(`${prefix}/`);

function bodyCapMiddleware(caps: BodyCap[]): MiddlewareHandler {
  const limiters = caps.map(({ prefix, maxSize, refusal }) => ({
    prefix,
    middleware: bodyLimit({
      maxSize,
      onError: () => {
        throw new AppError("payload_too_large", refusal);
      },
    }),
  }));
  return async (c, next) => {
    // A prefix names a path segment: /api/v1/send must not also cover /api/v1/senders.
    const limiter = limiters.find(({ prefix }) => matches(prefix, c.req.path));
    return limiter ? limiter.middleware(c, next) : next();
  };
}

const apiBodyLimit = bodyCapMiddleware(apiCaps);

/**
 * The body caps of everything but the dashboard and the compatibility surfaces. Those apply their own
 * (`dashboardBodyLimit`, `compatBodyLimit`) inside their routes, so that their error handlers answer a refusal with a
 * page, or in the peer's error shape, rather than the API's JSON.
 */
export const requestBodyLimit = createMiddleware<AppEnv>(async (c, next) =>
  matches("/dashboard", c.req.path) || matches("/compat", c.req.path) ? next() : apiBodyLimit(c, next),
);

/** A peer's send carries attachments as POST /send's does: the same cap. */
export const compatBodyLimit = bodyCapMiddleware([apiCap("/compat", 15 * MB)]);

export const dashboardBodyLimit = bodyCapMiddleware(dashboardCaps);
