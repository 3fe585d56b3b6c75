import { RELAY_BASE_PATH, RELAY_MESSAGES_MAX_BODY_BYTES, relayEndpoints } from "@mailforge/bridge-contract";
import { bodyLimit } from "hono/body-limit";
import { createMiddleware } from "hono/factory";
import { AppError } from "../errors";
import { randomBase62 } from "../lib/ids";
import type { AppEnv } from "../types";

/**
 * Every response, errors and unknown routes included, carries the id its logs are filed under. Not hono/request-id:
 * it adopts a caller's `X-Request-Id`, and ours is always minted here because it is also a ledger reference (the
 * verification API charges per request id), so a replayed id must never let a caller skip a charge.
 */
export const requestId = createMiddleware<AppEnv>(async (c, next) => {
  const id = `req_${randomBase62(20)}`;
  c.set("requestId", id);
  await next();
  c.res.headers.set("X-Request-Id", id);
});

const MB = 1024 * 1024;
// Request body caps per route; the first matching prefix wins. Sizes are of the request as sent (base64 included).
const bodyLimits: [prefix: string, bytes: number][] = [
  ["/api/v1/send", 15 * MB],
  // the bridge sizes its largest message from this same constant
  [`${RELAY_BASE_PATH}${relayEndpoints.messages.path}`, RELAY_MESSAGES_MAX_BODY_BYTES],
  ["/api/batch/upload", 50 * MB],
  ["/api/v1/contacts/import", 50 * MB],
  ["/api/v1/verify", 5 * MB],
  // the dashboard's CSV uploads (5 MB files, read in memory) in a multipart form
  ["/dashboard/verification/upload", 6 * MB],
  ["/dashboard/contacts/imports", 6 * MB],
  // a signup form's fields, never files
  ["/hooks/automations", 64 * 1024],
  ["/", 1 * MB],
];

const limiters = bodyLimits.map(([prefix, maxSize]) => ({
  prefix,
  maxSize,
  middleware: bodyLimit({
    maxSize,
    onError: () => {
      const size = maxSize >= MB ? `${Math.round(maxSize / MB)} MB` : `${Math.round(maxSize / 1024)} KB`;
      throw new AppError("payload_too_large", `The request body is larger than this endpoint accepts (${size})`);
    },
  }),
}));

export const requestBodyLimit = createMiddleware<AppEnv>(async (c, next) => {
  // A prefix names a path segment: /api/v1/send must not also cover /api/v1/senders.
  const path = c.req.path;
  const limiter = limiters.find(({ prefix }) => prefix === "/" || path === prefix || path.startsWith(`${prefix}/`));
  return limiter ? limiter.middleware(c, next) : next();
});
