import { mapWithConcurrency, type DnsResolver } from "../dns/doh";
import { isDisposableDomain, isFreeProviderDomain, isRoleBasedLocalPart } from "./lists";
import {
  SCORE_DEDUCTIONS,
  VERIFICATION_STATUSES,
  type NoteSubStatus,
  type VerificationResult,
  type VerificationStatus,
  type VerificationSubStatus,
} from "./status";
import { checkSyntax, type SyntaxCheck } from "./syntax";
import { suggestDomain } from "./typo";

export interface VerificationDeps {
  resolver: DnsResolver;
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

export async function verifyEmail(input: string, deps: VerificationDeps): Promise<VerificationResult> {
  const syntax = checkSyntax(input);
  if (!syntax.valid) return invalidSyntaxResult(syntax);
  return buildResult(syntax, await checkDomain(syntax.domain, deps.resolver));
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
  // Every valid syntax's domain was checked above.
  return syntaxes.map((s) => (s.valid ? buildResult(s, checks.get(s.domain)!) : invalidSyntaxResult(s)));
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

function invalidSyntaxResult(syntax: InvalidSyntax): VerificationResult {
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
    did_you_mean: null,
    score: info.baseScore,
    quality: info.quality,
    syntax_valid: false,
  };
}

/** Precedence: domain routing (nxdomain, null MX, no MX) → disposable → role-based → DNS error → valid. */
function pickStatus(domainCheck: DomainCheck, disposable: boolean, roleBased: boolean): VerificationStatus {
  if (domainCheck.kind === "nxdomain") return "invalid_domain";
  if (domainCheck.kind === "null_mx") return "null_mx";
  if (domainCheck.kind === "no_mx") return "no_mx";
  if (disposable) return "disposable";
  if (roleBased) return "role_based";
  if (domainCheck.kind === "dns_error") return "dns_error";
  return "valid";
}

function buildResult(syntax: ValidSyntax, domainCheck: DomainCheck): VerificationResult {
  const disposable = isDisposableDomain(syntax.domain);
  const roleBased = isRoleBasedLocalPart(syntax.account);
  const suggestion = suggestDomain(syntax.domain, isFreeProviderDomain);
  // The free-provider list also holds typo domains (yaho.com); a mistyped domain is no provider of its own.
  const freeProvider = !suggestion && isFreeProviderDomain(syntax.domain);
  const status = pickStatus(domainCheck, disposable, roleBased);
  const info = VERIFICATION_STATUSES[status];

  // Ordered most to least useful to the reader: sub_status shows the first.
  const notes: NoteSubStatus[] = [];
  if (suggestion) notes.push("typo_suggested");
  if (syntax.smtputf8) notes.push("smtputf8");
  if (domainCheck.kind === "implicit_mx") notes.push("implicit_mx");
  if (freeProvider) notes.push("free_provider");

  let score: number = info.baseScore;
  if (info.result === "valid" || info.result === "risky") {
    for (const note of notes) if (note !== "free_provider") score -= SCORE_DEDUCTIONS[note];
  }
  const subStatus: VerificationSubStatus | null =
    status === "dns_error" && domainCheck.kind === "dns_error" ? domainCheck.reason : (notes[0] ?? null);

  return {
    email: syntax.email,
    normalized: syntax.normalized,
    account: syntax.account,
    domain: syntax.domain,
    result: info.result,
    status,
    sub_status: subStatus,
    mx_found: domainCheck.kind === "mx",
    mx_record: domainCheck.kind === "mx" ? domainCheck.exchange : domainCheck.kind === "implicit_mx" ? syntax.domain : null,
    disposable,
    role_based: roleBased,
    free_provider: freeProvider,
    did_you_mean: suggestion ? `${syntax.account}@${suggestion}` : null,
    score: Math.round(Math.max(0, score) * 100) / 100,
    quality: info.quality,
    syntax_valid: true,
  };
}
