import { z } from "zod";
import type { SyntaxSubStatus } from "./syntax";

// One table for every surface (POST /verify, /api/validate, bulk jobs) and for the README.

export const VERIFICATION_RESULTS = ["valid", "invalid", "risky", "unknown"] as const;
export type VerificationResultValue = (typeof VERIFICATION_RESULTS)[number];

/** What to do with the address: send (safe), send with care (risky), do not mail (bad), retry later (unknown). */
export const VERIFICATION_QUALITIES = ["safe", "risky", "bad", "unknown"] as const;
export type VerificationQuality = (typeof VERIFICATION_QUALITIES)[number];

interface StatusInfo {
  result: VerificationResultValue;
  quality: VerificationQuality;
  /** Score before the per-address deductions of SCORE_DEDUCTIONS. */
  baseScore: number;
  description: string;
}

/** In precedence order: the first status whose check fails is the one reported. */
export const VERIFICATION_STATUSES = {
  invalid_syntax: {
    result: "invalid",
    quality: "bad",
    baseScore: 0,
    description: "Not a sendable address (RFC 5321/5322); sub_status names the rule.",
  },
  invalid_domain: {
    result: "invalid",
    quality: "bad",
    baseScore: 0,
    description: "The domain does not exist (NXDOMAIN).",
  },
  null_mx: {
    result: "invalid",
    quality: "bad",
    baseScore: 0,
    description: "The domain publishes a null MX (RFC 7505): it accepts no mail.",
  },
  no_mx: {
    result: "invalid",
    quality: "bad",
    baseScore: 0,
    description: "No MX and no A/AAAA record to fall back on (RFC 5321 §5.1).",
  },
  mailbox_not_found: {
    result: "invalid",
    quality: "bad",
    baseScore: 0,
    description: "The mail server said the mailbox does not exist (5.1.x).",
  },
  mailbox_disabled: {
    result: "invalid",
    quality: "bad",
    baseScore: 0,
    description: "The mail server said the mailbox is disabled (5.2.1).",
  },
  disposable: {
    result: "risky",
    quality: "bad",
    baseScore: 0.2,
    description: "Throwaway-inbox provider: it may accept mail, but nobody reads it later (do not mail).",
  },
  role_based: {
    result: "risky",
    quality: "risky",
    baseScore: 0.6,
    description: "A role account (admin@, info@): shared inbox, more complaints and unsubscribes.",
  },
  mailbox_full: {
    result: "risky",
    quality: "risky",
    baseScore: 0.3,
    description: "The mailbox exists but is over its quota (4.2.2/5.2.2): mail bounces until it is emptied.",
  },
  catch_all: {
    result: "risky",
    quality: "risky",
    baseScore: 0.6,
    description: "The domain accepts any local part (a random one was accepted too), so this mailbox's acceptance proves nothing.",
  },
  dns_error: {
    result: "unknown",
    quality: "unknown",
    baseScore: 0.5,
    description: "The DNS lookup failed (SERVFAIL or timeout); sub_status says which. Retry later.",
  },
  mailbox_error: {
    result: "unknown",
    quality: "unknown",
    baseScore: 0.5,
    description:
      "The mail server could not be asked (421, time-out, refused connection) or refused our probe itself (5.7.x); sub_status says which. Retry later.",
  },
  greylisted: {
    result: "unknown",
    quality: "unknown",
    baseScore: 0.5,
    description: "The mail server deferred the probe (greylisting) longer than a single check may wait; a bulk job waits it out.",
  },
  valid: {
    result: "valid",
    quality: "safe",
    baseScore: 0.9,
    description:
      "Syntax and domain mail routing check out, and the mail server accepted the mailbox when mailbox checks are on (score 1 when the domain is also known not to be a catch-all); 0.9 without that proof.",
  },
} as const satisfies Record<string, StatusInfo>;

export type VerificationStatus = keyof typeof VERIFICATION_STATUSES;
export const VERIFICATION_STATUS_NAMES = Object.keys(VERIFICATION_STATUSES) as [VerificationStatus, ...VerificationStatus[]];

/** A valid address whose mailbox the mail server accepted, on a domain that refused a random local part. */
export const MAILBOX_CONFIRMED_SCORE = 1;

/**
 * Whether the mailbox was asked over SMTP: `off` (no PROBER_URL/PROBER_SECRET), `checked` (the prober answered for
 * it), `unavailable` (the prober could not be reached; the result is the DNS-level one), `not_applicable` (nothing to
 * ask: bad syntax, no mail routing, a disposable domain, a UTF-8 local part).
 */
export const MAILBOX_CHECKS = ["off", "checked", "unavailable", "not_applicable"] as const;
export type MailboxCheck = (typeof MAILBOX_CHECKS)[number];

/** Notes that lower the score of an address that is otherwise valid or risky. */
export const SCORE_DEDUCTIONS = {
  typo_suggested: 0.2,
  smtputf8: 0.1,
  implicit_mx: 0.1,
} as const;

export type DnsSubStatus = "servfail" | "timeout";
/** Why `mailbox_error`: docs/verification.md has the reply table. */
export type MailboxSubStatus =
  | "smtp_timeout"
  | "smtp_unavailable"
  | "connection_refused"
  | "connection_lost"
  | "no_mx_reachable"
  | "policy_refused"
  | "private_address"
  | "smtp_rejected";
export type NoteSubStatus = "greylisted" | "typo_suggested" | "smtputf8" | "implicit_mx" | "free_provider";
export type VerificationSubStatus = SyntaxSubStatus | DnsSubStatus | MailboxSubStatus | NoteSubStatus;

export const verificationResultSchema = z.object({
  email: z.string().describe("The address as given, trimmed."),
  normalized: z.string().nullable().describe("Local part (NFC) @ lower-cased punycode domain; null when the syntax is invalid."),
  account: z.string().describe("Local part of the address."),
  domain: z.string().describe("Domain part, lower-cased, IDNs in punycode."),
  result: z.enum(VERIFICATION_RESULTS),
  status: z.enum(VERIFICATION_STATUS_NAMES),
  sub_status: z
    .string()
    .nullable()
    .describe(
      "The most specific note: the syntax rule broken, servfail/timeout, why a mailbox check failed (smtp_timeout, smtp_unavailable, connection_refused, policy_refused, …), or greylisted, typo_suggested, smtputf8, implicit_mx, free_provider.",
    ),
  mx_found: z.boolean().describe("The domain publishes at least one usable MX record."),
  mx_record: z
    .string()
    .nullable()
    .describe("The mail exchanger that answered the mailbox check; without one, the best-priority MX (the domain itself for an implicit MX)."),
  mailbox_check: z.enum(MAILBOX_CHECKS).describe("Whether the mailbox itself was asked over SMTP (off when the deployment has no prober)."),
  disposable: z.boolean(),
  role_based: z.boolean(),
  free_provider: z.boolean(),
  did_you_mean: z.string().nullable().describe("Corrected address when the domain looks mistyped."),
  score: z.number().min(0).max(1),
  quality: z.enum(VERIFICATION_QUALITIES),
  syntax_valid: z.boolean(),
});

export type VerificationResult = Omit<z.infer<typeof verificationResultSchema>, "sub_status"> & {
  sub_status: VerificationSubStatus | null;
};
