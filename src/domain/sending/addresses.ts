import { checkSyntax } from "../verification/syntax";
import { splitMailbox } from "./mime";

export type Mailbox = { name?: string; address: string };

/**
 * Parses a sender or recipient as written in the API (`Ann <ann@example.com>` or a bare address) and checks the
 * address with the same syntax rules as verification. Returns an error message instead of throwing so callers can
 * report every bad field at once.
 */
export function parseMailbox(input: string): { ok: true; mailbox: Mailbox } | { ok: false; error: string } {
  if (/[\r\n]/.test(input)) return { ok: false, error: "Must not contain line breaks" };
  const split = splitMailbox(input);
  const syntax = checkSyntax(split ? split.address : input.trim());
  if (!syntax.valid) return { ok: false, error: `Not a valid email address (${syntax.reason.replace(/_/g, " ")})` };
  return { ok: true, mailbox: { ...(split?.name ? { name: split.name } : {}), address: `${syntax.account}@${syntax.domain}` } };
}

/**
 * A mailbox as one string that parseMailbox reads back the same: `Name <address>`, the name quoted where it holds
 * address syntax (`"Support, Team" <help@example.com>`), or the bare address. A message's Reply-To is stored this way,
 * so the header written from it at delivery keeps the name, as From and To do.
 */
export function mailboxText(mailbox: Mailbox): string {
  if (!mailbox.name) return mailbox.address;
  const name = /^[\p{L}\p{N}!#$%&'*+\-/=?^_`{|}~ ]+$/u.test(mailbox.name) ? mailbox.name : `"${mailbox.name.replace(/[\\"]/g, "\\$&")}"`;
  return `${name} <${mailbox.address}>`;
}

/**
 * The address of a message's only recipient, among entries as written (`to`, `cc` and `bcc` together), or null when
 * there are several. Several recipients get the same bytes, so their tracking links and one-click unsubscribe cannot
 * tell them apart. Keyed as acceptMessage de-duplicates recipients (case-insensitively, first spelling kept).
 */
export function soleAddress(entries: readonly string[]): string | null {
  const addresses = new Map<string, string>();
  for (const entry of entries) {
    const parsed = parseMailbox(entry);
    if (parsed.ok && !addresses.has(parsed.mailbox.address.toLowerCase()))
      addresses.set(parsed.mailbox.address.toLowerCase(), parsed.mailbox.address);
  }
  const [only] = addresses.values();
  return addresses.size === 1 && only !== undefined ? only : null;
}
