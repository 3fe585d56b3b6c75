import {
  PROBE_BULK_BUDGET_MS,
  PROBE_CLIENT_GRACE_MS,
  PROBE_MIN_BUDGET_MS,
  PROBE_SINGLE_BUDGET_MS,
  SINGLE_CHECK_BUDGET_MS,
  type ProbeAddressResult,
} from "@mailforge/bridge-contract";
import { mapWithConcurrency, type DnsResolver } from "../dns/doh";
import { isDisposableDomain, isFreeProviderDomain, isRoleBasedLocalPart } from "./address-lists";
import type { MailboxProber } from "./mailbox";
import {
  MAILBOX_CONFIRMED_SCORE,
  SCORE_DEDUCTIONS,
  VERIFICATION_STATUSES,
  type MailboxCheck,
  type MailboxSubStatus,
  type NoteSubStatus,
  type VerificationResult,
  type VerificationStatus,
  type VerificationSubStatus,
} from "./status";
import { checkSyntax, type SyntaxCheck } from "./syntax";
import { suggestDomain } from "./typo";

export interface VerificationDeps {
  resolver: DnsResolver;
  /** Asks mailboxes over SMTP; without it every result says `mailbox_check: "off"`. */
  prober?: MailboxProber;
  /** The account the checks are for, told to the prober so that accounts take turns at a busy mail server. */
  accountId?: string;
}

/** What DNS says about a domain's mail routing. */
export type DomainCheck =
  | { kind: "mx"; exchange: string }
  | { kind: "implicit_mx" }
  | { kind: "null_mx" }
  | { kind: "nxdomain" }
  | { kind: "no_mx" }
  | { kind: "dns_error"; reason: "servfail" | "timeout" };

const DEFAULT_DOMAIN_CONCURRENCY = 20;

// What a single check keeps for itself besides the probe: D1 writes after it, and the DNS lookups before it.
const SINGLE_CHECK_RESERVE_MS = 1_000;

/**
 * One address. With a prober, the mailbox is asked too, inside SINGLE_CHECK_BUDGET_MS from the call whatever the mail
 * server does: the prober gets what is left after DNS (at most PROBE_SINGLE_BUDGET_MS) and is abandoned
 * PROBE_CLIENT_GRACE_MS after that.
 */
export async function verifyEmail(input: string, deps: VerificationDeps): Promise<VerificationResult> {
  const started = Date.now();
  const syntax = checkSyntax(input);
  if (!syntax.valid) return invalidSyntaxResult(syntax, deps);
  const domainCheck = await checkDomain(syntax.domain, deps.resolver);
  let evidence: MailboxEvidence = deps.prober ? { kind: "not_applicable" } : { kind: "off" };
  if (deps.prober && shouldProbe(syntax, domainCheck)) {
    const budgetMs = Math.min(
      PROBE_SINGLE_BUDGET_MS,
      SINGLE_CHECK_BUDGET_MS - (Date.now() - started) - PROBE_CLIENT_GRACE_MS - SINGLE_CHECK_RESERVE_MS,
    );
    const probed =
      budgetMs >= PROBE_MIN_BUDGET_MS
        ? await deps.prober.probe([syntax.normalized], budgetMs, { kind: "single", accountId: deps.accountId })
        : undefined;
    evidence = evidenceFor(probed, syntax.normalized);
  }
  return buildResult(syntax, domainCheck, evidence);
}

/**
 * Results in input order. Each distinct domain is resolved once: all MX lookups go through one
 * `lookupMany` (one D1 read for the cached ones), then at most `concurrency` domains are finished at a time.
 */
export async function verifyMany(
  emails: readonly string[],
  deps: VerificationDeps,
  opts: { concurrency?: number } = {},
): Promise<VerificationResult[]> {
  const syntaxes = emails.map(checkSyntax);
  const domains = [...new Set(syntaxes.flatMap((s) => (s.valid ? [s.domain] : [])))];
  const checks = new Map<string, DomainCheck>();
  if (domains.length > 0) {
    await deps.resolver.lookupMany(domains.map((name) => ({ name, type: "MX" as const })));
    await mapWithConcurrency(domains, opts.concurrency ?? DEFAULT_DOMAIN_CONCURRENCY, async (domain) => {
      checks.set(domain, await checkDomain(domain, deps.resolver));
    });
  }
  // Every valid syntax's domain was checked above. One probe request asks every mailbox worth asking; it waits
  // greylisting out within PROBE_BULK_BUDGET_MS.
  const probeable = deps.prober
    ? [...new Set(syntaxes.flatMap((s) => (s.valid && shouldProbe(s, checks.get(s.domain)!) ? [s.normalized] : [])))]
    : [];
  const probed =
    deps.prober && probeable.length > 0
      ? await deps.prober.probe(probeable, PROBE_BULK_BUDGET_MS, { kind: "bulk", accountId: deps.accountId })
      : undefined;
  return syntaxes.map((s) => {
    if (!s.valid) return invalidSyntaxResult(s, deps);
    const domainCheck = checks.get(s.domain)!;
    const evidence: MailboxEvidence = !deps.prober
      ? { kind: "off" }
      : shouldProbe(s, domainCheck)
        ? evidenceFor(probed, s.normalized)
        : { kind: "not_applicable" };
    return buildResult(s, domainCheck, evidence);
  });
}

/** What the mailbox check found for one address. */
type MailboxEvidence = { kind: "off" | "not_applicable" | "unavailable" } | { kind: "checked"; probe: ProbeAddressResult };

const evidenceFor = (probed: Map<string, ProbeAddressResult> | undefined, address: string): MailboxEvidence => {
  const probe = probed?.get(address.toLowerCase());
  return probe ? { kind: "checked", probe } : { kind: "unavailable" };
};

/**
 * Worth an SMTP conversation: mail routes somewhere (MX or implicit MX) and the domain is not a throwaway provider.
 * UTF-8 local parts are left out: they need SMTPUTF8 end to end, which the probe does not speak.
 */
function shouldProbe(syntax: ValidSyntax, domainCheck: DomainCheck): boolean {
  return (domainCheck.kind === "mx" || domainCheck.kind === "implicit_mx") && !syntax.smtputf8 && !isDisposableDomain(syntax.domain);
}

/** The engine status a probe outcome stands for (docs/verification.md has the reply table). */
function mailboxStatus(probe: ProbeAddressResult): VerificationStatus {
  switch (probe.outcome) {
    case "accepted":
      return probe.catch_all ? "catch_all" : "valid";
    case "mailbox_not_found":
    case "mailbox_disabled":
    case "mailbox_full":
    case "greylisted":
      return probe.outcome;
    default:
      return "mailbox_error";
  }
}

/** Why a mailbox check ended in `mailbox_error`. */
function mailboxErrorReason(probe: ProbeAddressResult): MailboxSubStatus {
  if (probe.outcome === "policy_refused") return "policy_refused";
  if (probe.outcome === "private_address") return "private_address";
  if (probe.outcome === "rejected") return "smtp_rejected";
  switch (probe.detail) {
    case "timeout":
      return "smtp_timeout";
    case "service_unavailable":
    case "mail_from_deferred":
      return "smtp_unavailable";
    case "connection_refused":
      return "connection_refused";
    case "connection_lost":
    case "greeting_refused":
      return "connection_lost";
    default:
      return "no_mx_reachable";
  }
}

/**
 * MX first; a null MX (RFC 7505: only "0 .") refuses mail; no MX at all falls back to the domain's own
 * A/AAAA as an implicit MX (RFC 5321 §5.1).
 */
export async function checkDomain(domain: string, resolver: DnsResolver): Promise<DomainCheck> {
  const mx = await resolver.resolve(domain, "MX");
  if (mx.status === "nxdomain") return { kind: "nxdomain" };
  if (mx.status === "servfail" || mx.status === "timeout") return { kind: "dns_error", reason: mx.status };
  if (mx.records.length > 0) {
    // A "." next to real exchangers is a misconfiguration, not a null MX: the real ones still take mail.
    const usable = mx.records.filter((r) => r.exchange !== ".");
    const best = usable.sort((a, b) => a.priority - b.priority || a.exchange.localeCompare(b.exchange))[0];
    return best ? { kind: "mx", exchange: best.exchange } : { kind: "null_mx" };
  }
  const addresses = await resolver.lookupMany([
    { name: domain, type: "A" as const },
    { name: domain, type: "AAAA" as const },
  ]);
  if (addresses.some((a) => a.status === "ok" && a.records.length > 0)) return { kind: "implicit_mx" };
  for (const a of addresses) {
    if (a.status === "servfail" || a.status === "timeout") return { kind: "dns_error", reason: a.status };
  }
  return { kind: "no_mx" };
}

type ValidSyntax = Extract<SyntaxCheck, { valid: true }>;
type InvalidSyntax = Extract<SyntaxCheck, { valid: false }>;

function invalidSyntaxResult(syntax: InvalidSyntax, deps: VerificationDeps): VerificationResult {
  const info = VERIFICATION_STATUSES.invalid_syntax;
  return {
    email: syntax.email,
    normalized: null,
    account: syntax.account,
    domain: syntax.domain,
    result: info.result,
    status: "invalid_syntax",
    sub_status: syntax.reason,
    mx_found: false,
    mx_record: null,
    disposable: false,
    role_based: false,
    free_provider: false,
    mailbox_check: deps.prober ? "not_applicable" : "off",
    did_you_mean: null,
    score: info.baseScore,
    quality: info.quality,
    syntax_valid: false,
  };
}

/**
 * Precedence (VERIFICATION_STATUSES' order): domain routing (nxdomain, null MX, no MX) → a mailbox that does not exist
 * or is disabled → disposable → role-based → the other mailbox findings → DNS error → valid.
 */
function pickStatus(domainCheck: DomainCheck, disposable: boolean, roleBased: boolean, mailbox: VerificationStatus | undefined): VerificationStatus {
  if (domainCheck.kind === "nxdomain") return "invalid_domain";
  if (domainCheck.kind === "null_mx") return "null_mx";
  if (domainCheck.kind === "no_mx") return "no_mx";
  if (mailbox === "mailbox_not_found" || mailbox === "mailbox_disabled") return mailbox;
  if (disposable) return "disposable";
  if (roleBased) return "role_based";
  if (domainCheck.kind === "dns_error") return "dns_error";
  return mailbox ?? "valid";
}

function buildResult(syntax: ValidSyntax, domainCheck: DomainCheck, evidence: MailboxEvidence): VerificationResult {
  const disposable = isDisposableDomain(syntax.domain);
  const roleBased = isRoleBasedLocalPart(syntax.account);
  const suggestion = suggestDomain(syntax.domain, isFreeProviderDomain);
  // The free-provider list also holds typo domains (yaho.com); a mistyped domain is no provider of its own.
  const freeProvider = !suggestion && isFreeProviderDomain(syntax.domain);
  const probe = evidence.kind === "checked" ? evidence.probe : undefined;
  const status = pickStatus(domainCheck, disposable, roleBased, probe && mailboxStatus(probe));
  const info = VERIFICATION_STATUSES[status];

  // Ordered most to least useful to the reader: sub_status shows the first.
  const notes: NoteSubStatus[] = [];
  if (probe?.greylisted && status !== "greylisted") notes.push("greylisted");
  if (suggestion) notes.push("typo_suggested");
  if (syntax.smtputf8) notes.push("smtputf8");
  if (domainCheck.kind === "implicit_mx") notes.push("implicit_mx");
  if (freeProvider) notes.push("free_provider");

  // the mailbox accepted, on a domain that refused a random local part: as sure as a check gets without sending
  let score: number = status === "valid" && probe?.outcome === "accepted" && probe.catch_all === false ? MAILBOX_CONFIRMED_SCORE : info.baseScore;
  if (info.result === "valid" || info.result === "risky") {
    for (const note of notes) if (note in SCORE_DEDUCTIONS) score -= SCORE_DEDUCTIONS[note as keyof typeof SCORE_DEDUCTIONS];
  }
  const subStatus: VerificationSubStatus | null =
    status === "dns_error" && domainCheck.kind === "dns_error"
      ? domainCheck.reason
      : status === "mailbox_error" && probe
        ? mailboxErrorReason(probe)
        : (notes[0] ?? null);
  const mailboxCheck: MailboxCheck = evidence.kind;

  return {
    email: syntax.email,
    normalized: syntax.normalized,
    account: syntax.account,
    domain: syntax.domain,
    result: info.result,
    status,
    sub_status: subStatus,
    mx_found: domainCheck.kind === "mx",
    mx_record: probe?.mx_host ?? (domainCheck.kind === "mx" ? domainCheck.exchange : domainCheck.kind === "implicit_mx" ? syntax.domain : null),
    mailbox_check: mailboxCheck,
    disposable,
    role_based: roleBased,
    free_provider: freeProvider,
    did_you_mean: suggestion ? `${syntax.account}@${suggestion}` : null,
    score: Math.round(Math.max(0, score) * 100) / 100,
    quality: info.quality,
    syntax_valid: true,
  };
}
