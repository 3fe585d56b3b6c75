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
  dns_error: {
    result: "unknown",
    quality: "unknown",
    baseScore: 0.5,
    description: "The DNS lookup failed (SERVFAIL or timeout); sub_status says which. Retry later.",
  },
  valid: {
    result: "valid",
    quality: "safe",
    baseScore: 0.9,
    description: "Syntax and domain mail routing check out. The mailbox itself and catch-all cannot be probed (port 25), hence 0.9, not 1.",
  },
} as const satisfies Record<string, StatusInfo>;

export type VerificationStatus = keyof typeof VERIFICATION_STATUSES;
export const VERIFICATION_STATUS_NAMES = Object.keys(VERIFICATION_STATUSES) as [VerificationStatus, ...VerificationStatus[]];

/** Notes that lower the score of an address that is otherwise valid or risky. */
export const SCORE_DEDUCTIONS = {
  typo_suggested: 0.2,
  smtputf8: 0.1,
  implicit_mx: 0.1,
} as const;

export type DnsSubStatus = "servfail" | "timeout";
export type NoteSubStatus = "typo_suggested" | "smtputf8" | "implicit_mx" | "free_provider";
export type VerificationSubStatus = SyntaxSubStatus | DnsSubStatus | NoteSubStatus;

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
    .describe("The most specific note: the syntax rule broken, servfail/timeout, or typo_suggested, smtputf8, implicit_mx, free_provider."),
  mx_found: z.boolean().describe("The domain publishes at least one usable MX record."),
  mx_record: z.string().nullable().describe("Best-priority mail exchanger; the domain itself for an implicit MX."),
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
