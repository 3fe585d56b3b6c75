// Why a domain function did not do what it was asked, as a value rather than an exception: the edges decide what a
// refusal becomes (an HTTP status in api/, internal/ and dashboard/, an SMTP reply through the bridge, a run's error
// in an automation), so domain code never speaks HTTP.

import type { ErrorCode, FieldErrors } from "../errors";

export type Refusal = {
  kind: "refused";
  code: ErrorCode;
  message: string;
  /** Per field, for `validation_failed`. */
  errors?: FieldErrors;
  /** When trying again can succeed (a daily limit, a rate limit). */
  retryAfterSeconds?: number;
};

export const refused = (code: ErrorCode, message: string, details: Pick<Refusal, "errors" | "retryAfterSeconds"> = {}): Refusal => ({
  kind: "refused",
  code,
  message,
  ...details,
});

export const isRefusal = (outcome: unknown): outcome is Refusal =>
  typeof outcome === "object" && outcome !== null && (outcome as { kind?: unknown }).kind === "refused";
