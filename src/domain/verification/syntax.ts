// Address syntax as an ESP needs it: RFC 5321 Mailbox (dot-atom local part, hostname domain) with RFC 6531
// UTF-8 local parts. Pure and DNS-free, so bulk jobs can reject and price bad rows before any lookup.
//
// Quoted local parts ("john doe"@example.com) are REJECTED (`quoted_local_part`), although RFC 5321 allows
// them: no mailbox provider hands them out, most smarthosts and CRMs mangle them, and they are a favourite
// vehicle for header and parser confusion. Rejecting is what SES and Postmark do too.

export const MAX_LOCAL_PART_OCTETS = 64;
export const MAX_DOMAIN_OCTETS = 255;
export const MAX_ADDRESS_OCTETS = 254;
const MAX_LABEL_OCTETS = 63;

export type SyntaxSubStatus =
  | "empty"
  | "missing_at"
  | "empty_local_part"
  | "empty_domain"
  | "quoted_local_part"
  | "invalid_local_part"
  | "local_part_too_long"
  | "ip_literal"
  | "invalid_domain_label"
  | "invalid_idn"
  | "label_too_long"
  | "single_label_domain"
  | "numeric_tld"
  | "domain_too_long"
  | "address_too_long";

export type SyntaxCheck =
  | {
      valid: true;
      /** Input, trimmed. */
      email: string;
      /** Local part exactly as given. */
      account: string;
      /** Lower-cased, IDNs in punycode (A-labels). */
      domain: string;
      /** Local part in NFC, `@`, ASCII domain: the form sent to the smarthost. */
      normalized: string;
      /** Local part has non-ASCII characters: deliverable only over SMTPUTF8 (RFC 6531). */
      smtputf8: boolean;
    }
  | {
      valid: false;
      email: string;
      account: string;
      domain: string;
      reason: SyntaxSubStatus;
    };

// RFC 5322 atext; RFC 6531 adds UTF8-non-ascii to atext; controls, separators and invisible format characters stay out,
// since they make look-alike addresses.
const ATEXT_UTF8 = /^(?:[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]|(?![\p{Cc}\p{Cf}\p{Z}\p{Cs}\p{Co}\p{Cn}])[^\x00-\x7F])+$/u;
const LDH_LABEL = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;
// Characters a URL parser would treat as delimiters; they must never reach the IDNA conversion.
const DOMAIN_FORBIDDEN_ASCII = /[\x00-\x2C\x2F\x3A-\x40\x5B-\x60\x7B-\x7F]/;

const encoder = new TextEncoder();
const ASCII = /^[\x00-\x7F]*$/;
// Almost every address is ASCII, where octets are characters: skip encoding it (the bulk of the per-address cost).
const octets = (s: string) => (ASCII.test(s) ? s.length : encoder.encode(s).length);

export function checkSyntax(input: string): SyntaxCheck {
  const email = input.trim();
  const at = email.lastIndexOf("@");
  const account = at === -1 ? email : email.slice(0, at);
  const rawDomain = at === -1 ? "" : email.slice(at + 1);
  const fail = (reason: SyntaxSubStatus): SyntaxCheck => ({
    valid: false,
    email,
    account,
    domain: rawDomain.toLowerCase(),
    reason,
  });

  if (email === "") return fail("empty");
  if (at === -1) return fail("missing_at");
  if (account === "") return fail("empty_local_part");
  if (rawDomain === "") return fail("empty_domain");

  if (account.startsWith('"')) return fail("quoted_local_part");
  const localReason = checkLocalPart(account);
  if (localReason) return fail(localReason);
  const asciiLocal = ASCII.test(account);
  const local = asciiLocal ? account : account.normalize("NFC");
  if (octets(local) > MAX_LOCAL_PART_OCTETS) return fail("local_part_too_long");

  if (rawDomain.startsWith("[")) return fail("ip_literal");
  const domain = toAsciiDomain(rawDomain);
  if (typeof domain !== "string") return fail(domain.reason);
  const domainReason = checkAsciiDomain(domain);
  if (domainReason) return fail(domainReason);

  const normalized = `${local}@${domain}`;
  if (octets(normalized) > MAX_ADDRESS_OCTETS) return fail("address_too_long");
  return { valid: true, email, account, domain, normalized, smtputf8: !asciiLocal };
}

// The common case, a plain ASCII dot-atom, without the Unicode property tests of ATEXT_UTF8.
const ASCII_DOT_ATOM = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+(?:\.[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+)*$/;

function checkLocalPart(local: string): SyntaxSubStatus | null {
  if (ASCII_DOT_ATOM.test(local)) return null;
  // dot-atom: atoms separated by single dots, none leading or trailing.
  for (const atom of local.split(".")) {
    if (atom === "" || !ATEXT_UTF8.test(atom)) return "invalid_local_part";
  }
  return null;
}

function toAsciiDomain(raw: string): string | { reason: SyntaxSubStatus } {
  if (DOMAIN_FORBIDDEN_ASCII.test(raw)) return { reason: "invalid_domain_label" };
  if (ASCII.test(raw)) return raw.toLowerCase();
  // UTS #46 processing (the WHATWG URL host parser) maps, lower-cases and punycodes an IDN.
  try {
    return new URL(`http://${raw}`).hostname;
  } catch {
    return { reason: "invalid_idn" };
  }
}

function checkAsciiDomain(domain: string): SyntaxSubStatus | null {
  if (octets(domain) > MAX_DOMAIN_OCTETS) return "domain_too_long";
  const labels = domain.split(".");
  for (const label of labels) {
    if (label.length > MAX_LABEL_OCTETS) return "label_too_long";
    if (!LDH_LABEL.test(label)) return "invalid_domain_label";
  }
  // A bare hostname has no public MX route, and an all-numeric TLD means a dotted IP typed without brackets.
  if (labels.length < 2) return "single_label_domain";
  if (/^\d+$/.test(labels[labels.length - 1]!)) return "numeric_tld";
  return null;
}

/**
 * Key under which a bulk job counts an address as a duplicate: the normalized address with the local part
 * lower-cased too. Every large provider treats local parts case-insensitively; dots and +tags are left
 * alone, since they name different mailboxes at most providers.
 */
export function dedupeKey(email: string): string {
  const syntax = checkSyntax(email);
  return syntax.valid ? syntax.normalized.toLowerCase() : syntax.email.toLowerCase();
}
