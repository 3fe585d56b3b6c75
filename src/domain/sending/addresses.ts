import { checkSyntax } from "../verification/syntax";

export type Mailbox = { name?: string; address: string };

// `Display Name <address>` or `"Display, Name" <address>`; the name may not contain angle brackets.
const nameAddr = /^\s*(?:"((?:[^"\\\r\n]|\\.)*)"|([^<>"\r\n]*?))\s*<([^<>\s]+)>\s*$/;

/**
 * Parses a sender or recipient as written in the API (`Ann <ann@example.com>` or a bare address) and checks the
 * address with the same syntax rules as verification. Returns an error message instead of throwing so callers can
 * report every bad field at once.
 */
export function parseMailbox(input: string): { ok: true; mailbox: Mailbox } | { ok: false; error: string } {
  if (/[\r\n]/.test(input)) return { ok: false, error: "Must not contain line breaks" };
  const match = nameAddr.exec(input);
  const rawAddress = match ? match[3]! : input.trim();
  const name = match ? (match[1]?.replace(/\\(.)/g, "$1") ?? match[2] ?? "").trim() : "";
  const syntax = checkSyntax(rawAddress);
  if (!syntax.valid) return { ok: false, error: `Not a valid email address (${syntax.reason.replace(/_/g, " ")})` };
  return { ok: true, mailbox: { ...(name ? { name } : {}), address: `${syntax.account}@${syntax.domain}` } };
}
