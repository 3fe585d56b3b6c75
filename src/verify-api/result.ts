import type { VerificationResult, VerificationStatus } from "../domain/verification/status";

/**
 * Statuses of the verification API, after ZeroBounce's set. `catch-all` needs the mailbox prober (PROBER_URL);
 * `spamtrap` and `abuse` are never returned: they need trap/complainer data this service does not have.
 */
export const STANDALONE_STATUSES = ["valid", "invalid", "catch-all", "unknown", "do_not_mail"] as const;
export type StandaloneStatus = (typeof STANDALONE_STATUSES)[number];

/** Engine status → standalone status; the engine status itself is the first entry of `sub_status`. */
export const STANDALONE_STATUS_OF: Record<VerificationStatus, StandaloneStatus> = {
  valid: "valid",
  invalid_syntax: "invalid",
  invalid_domain: "invalid",
  null_mx: "invalid",
  no_mx: "invalid",
  mailbox_not_found: "invalid",
  mailbox_disabled: "invalid",
  // Mail to these would not bounce, but nobody reads a throwaway inbox and role inboxes draw complaints.
  disposable: "do_not_mail",
  role_based: "do_not_mail",
  // it bounces until its owner empties it
  mailbox_full: "do_not_mail",
  catch_all: "catch-all",
  dns_error: "unknown",
  mailbox_error: "unknown",
  greylisted: "unknown",
};

/** An ISO 8601 UTC timestamp with an explicit `+00:00` offset instead of `Z`. */
export const withOffset = (iso: string) => iso.replace(/Z$/, "+00:00");

/**
 * Notes from most to least specific, without repeats: the engine status (unless plain `valid`), its sub_status
 * (the syntax rule broken, servfail/timeout, why a mailbox check failed, greylisted, typo_suggested, smtputf8,
 * implicit_mx, free_provider), then the flags
 * `disposable`, `role_based`, `free_provider`. A clean address at a business domain gets [].
 */
export function standaloneSubStatus(result: VerificationResult): string[] {
  const notes: (string | null)[] = [
    result.status === "valid" ? null : result.status,
    result.sub_status,
    result.disposable ? "disposable" : null,
    result.role_based ? "role_based" : null,
    result.free_provider ? "free_provider" : null,
  ];
  return [...new Set(notes.filter((note): note is string => note !== null))];
}

export type StandaloneResult = {
  email: string;
  status: StandaloneStatus;
  checked_at: string;
  account: string;
  domain: string;
  quality: VerificationResult["quality"];
  score: number;
  mx_record: string;
  did_you_mean: string | null;
  sub_status: string[];
};

/** Exactly the fields of the spec's Standalone validation result; `mx_record` is "" when there is none. */
export function toStandaloneResult(result: VerificationResult, checkedAt: string): StandaloneResult {
  return {
    email: result.email,
    status: STANDALONE_STATUS_OF[result.status],
    checked_at: withOffset(checkedAt),
    account: result.account,
    domain: result.domain,
    quality: result.quality,
    score: result.score,
    mx_record: result.mx_record ?? "",
    did_you_mean: result.did_you_mean,
    sub_status: standaloneSubStatus(result),
  };
}
