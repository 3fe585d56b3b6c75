import { checkSyntax } from "../verification/syntax";

/**
 * The create-or-update key of a contact (column `email_key`): trimmed, NFC, IDNs in punycode, the whole address
 * lower-cased, the same key as the suppression list's. `Jane@Example.COM` and `jane@example.com` are one contact:
 * RFC 5321 allows a case-sensitive local part, but no large provider has one, and a contact that a suppression
 * covers must be the same contact. The first spelling given stays in `email` for display.
 * An invalid address keys as its trimmed self; callers validate with `contactAddress` first.
 */
export function contactEmailKey(email: string): string {
  const check = checkSyntax(email);
  return check.valid ? check.normalized.toLowerCase() : check.email;
}

export type ContactAddress = {
  /** As given, trimmed: what the contact shows. */
  email: string;
  /** Column `email_key`. */
  key: string;
  /** Key of the address on the suppression list. */
  suppressionKey: string;
};

/** Validates an address for a contact; the error names the broken rule (the verification engine's sub-status). */
export function contactAddress(input: string): ContactAddress | { error: string } {
  const check = checkSyntax(input);
  if (!check.valid) return { error: `Invalid email address (${check.reason})` };
  // The verification engine lower-cases the normalized address for its duplicate key, which is the suppression key.
  const key = check.normalized.toLowerCase();
  return { email: check.email, key, suppressionKey: key };
}
