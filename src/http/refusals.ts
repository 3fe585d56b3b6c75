// Domain refusals as the HTTP errors every edge answers with (the API, the dashboard, the relay, the compatibility
// routes): the domain says why in values, the edges say it in HTTP, and errors.ts, below both, knows neither.

import { unverifiedDomainMessage } from "../domain/domains/domains";
import { isRefusal, type Refusal } from "../domain/refusal";
import type { AcceptRefusal } from "../domain/sending/accept";
import { AppError, validationError } from "../errors";

/** A domain function's refusal as the HTTP error the edges answer with. */
export function refusalError(refusal: Refusal): AppError {
  return new AppError(refusal.code, refusal.message, {
    ...(refusal.errors ? { errors: refusal.errors } : {}),
    ...(refusal.retryAfterSeconds !== undefined ? { headers: { "Retry-After": String(refusal.retryAfterSeconds) } } : {}),
  });
}

/** The outcome itself, or its refusal thrown as the HTTP error (for edges whose answer is the outcome). */
export function orRefuse<T>(outcome: T | Refusal): T {
  if (isRefusal(outcome)) throw refusalError(outcome);
  return outcome;
}

/** How long a client is asked to wait after the send queue refused its message (the accept path retried once already). */
const QUEUE_RETRY_AFTER_SECONDS = 10;

/** The HTTP error for a refused acceptance, for every door a message comes through (API, relay, dashboard). */
export function acceptRefusalError(refusal: AcceptRefusal): AppError {
  switch (refusal.kind) {
    case "invalid":
      return validationError(refusal.errors);
    case "domain_not_verified":
      return new AppError(
        "domain_not_verified",
        `${refusal.index === undefined ? "" : `Request ${refusal.index}: `}The from domain ${unverifiedDomainMessage(refusal.domain)}`,
      );
    case "insufficient_credits":
      return new AppError("insufficient_credits", `Not enough sending credits: this needs ${refusal.needed}, ${refusal.available} available`);
    case "queue_unavailable":
      // The spec's answer to a temporarily rejected message (429 with Retry-After), not a 5xx: nothing was stored or
      // charged, and the same request, Idempotency-Key included, is safe to send again.
      return new AppError(
        "temporarily_rejected",
        "The message could not be queued just now; nothing was charged. Retry after the Retry-After seconds",
        { headers: { "Retry-After": String(QUEUE_RETRY_AFTER_SECONDS) } },
      );
    case "refused":
      return refusalError(refusal);
  }
}
