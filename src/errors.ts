import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ZodError } from "zod";
import { logError } from "./lib/log";

// One place maps a machine-readable code to its HTTP status, so handlers never pick statuses themselves.
export const errorStatus = {
  unauthorized: 401,
  bridge_signature_refused: 401,
  insufficient_credits: 402,
  forbidden: 403,
  scope_missing: 403,
  live_key_required: 403,
  feature_disabled: 403,
  domain_not_verified: 403,
  ai_quota_exceeded: 403,
  domain_reputation_hold: 403,
  not_found: 404,
  conflict: 409,
  idempotency_conflict: 409,
  campaign_not_draft: 409,
  automation_paused: 409,
  payload_too_large: 413,
  validation_failed: 422,
  rate_limited: 429,
  daily_limit_reached: 429,
  temporarily_rejected: 429,
  internal_error: 500,
  upstream_unavailable: 503,
  ai_not_configured: 503,
  account_moving: 503,
} as const satisfies Record<string, ContentfulStatusCode>;

export type ErrorCode = keyof typeof errorStatus;
export type FieldErrors = Record<string, string[]>;

export class AppError extends HTTPException {
  readonly code: ErrorCode;
  readonly errors: FieldErrors | undefined;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: { errors?: FieldErrors; headers?: Record<string, string> } = {}) {
    super(errorStatus[code], { message });
    this.code = code;
    this.errors = options.errors;
    this.headers = options.headers ?? {};
  }
}

export const notFound = (what: string) => new AppError("not_found", `${what} not found`);

/** Seconds a write refused while its account is being moved (src/domain/accounts/move.ts) is told to wait. */
export const accountMovingRetryAfterSeconds = 30;

/** A write of an account whose rows are being moved between databases: nothing was done, the same request may be retried. */
export const accountMoving = () =>
  new AppError(
    "account_moving",
    "The operator is moving this account's data; writes are paused for a short while. Retry after the Retry-After seconds",
    {
      headers: { "Retry-After": String(accountMovingRetryAfterSeconds) },
    },
  );

/** Deleting a list or segment that an unfinished campaign still sends to: its recipients would change under it. */
export const audienceInUse = (what: "list" | "segment", campaign: { id: string; name: string }) =>
  new AppError(
    "conflict",
    `The ${what} is in the audience of campaign ${campaign.id} ("${campaign.name}"), which has not finished; remove it there first`,
  );

export function validationError(errors: FieldErrors, message = "The request is invalid"): AppError {
  return new AppError("validation_failed", message, { errors });
}

type Issue = ZodError["issues"][number];

/**
 * A union's own issue only says "Invalid input". When the value has the type of exactly one option (an array for
 * `string | string[]`), that option's issues say what is wrong and where (`to.1`), so they are reported instead.
 */
function explainUnion(issue: Issue): Issue[] {
  if (issue.code !== "invalid_union" || issue.errors.length === 0) return [issue];
  const matching = issue.errors.filter((branch) => !branch.some((inner) => inner.code === "invalid_type" && inner.path.length === 0));
  if (matching.length !== 1) return [issue];
  return matching[0]!.flatMap((inner) => explainUnion({ ...inner, path: [...issue.path, ...inner.path] }));
}

/** Zod issues keyed by their dotted field path (`to.3`, `attachments.0.content`), the shape 422 bodies carry. */
/** Adds one message under `path`, after any already there. */
export function addFieldError(errors: FieldErrors, path: string, message: string): void {
  const messages = errors[path];
  if (messages) messages.push(message);
  else errors[path] = [message];
}

export function fieldErrors(error: ZodError, prefix?: string): FieldErrors {
  const errors: FieldErrors = {};
  for (const issue of error.issues.flatMap(explainUnion)) {
    const path = [prefix, ...issue.path.map(String)].filter((part) => part !== undefined && part !== "").join(".") || "body";
    addFieldError(errors, path, issue.message);
  }
  return errors;
}

export function errorBody(code: string, message: string, errors?: FieldErrors) {
  return errors ? { message, code, errors } : { message, code };
}

export function handleError(err: Error, c: Context): Response {
  if (err instanceof AppError) {
    for (const [name, value] of Object.entries(err.headers)) c.header(name, value);
    return c.json(errorBody(err.code, err.message, err.errors), err.status);
  }
  if (err instanceof HTTPException) {
    // Raised by hono itself: the JSON validator on a body that does not parse, body-limit, and the like.
    // hono's validators answer 400 when a body does not parse; like every other invalid input that is a 422.
    if (err.status === 400) {
      const expected = /JSON/i.test(err.message) ? "valid JSON" : "a valid form (multipart/form-data or URL-encoded)";
      return c.json(errorBody("validation_failed", `The request body is not ${expected}`, { body: [err.message] }), 422);
    }
    if (err.status === 413) return c.json(errorBody("payload_too_large", "The request body is too large for this endpoint"), 413);
    if (err.status === 415) {
      return c.json(errorBody("validation_failed", "Send the body as JSON with `Content-Type: application/json`", { body: [err.message] }), 422);
    }
    return c.json(errorBody(err.status >= 500 ? "internal_error" : "validation_failed", err.message), err.status);
  }
  logError(err.message, { request_id: c.get("requestId"), stack: err.stack });
  return c.json(errorBody("internal_error", "Something went wrong on our side; retry with back-off"), 500);
}
