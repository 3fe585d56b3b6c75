import { checkSyntax } from "../verification/syntax";

/**
 * The create-or-update key of a contact (column `email_key`): trimmed, local part as given (in NFC), domain
 * lower-cased and IDNs in punycode. `Jane@Example.COM` and `Jane@example.com` are one contact; `jane@` is another,
 * since RFC 5321 lets a mailbox be case-sensitive (suppressions are stricter: see normalizeSuppressionEmail).
 * An invalid address keys as its trimmed self; callers validate with `contactAddress` first.
 */
export function contactEmailKey(email: string): string {
  const check = checkSyntax(email);
  return check.valid ? check.normalized : check.email;
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
  return { email: check.email, key: check.normalized, suppressionKey: check.normalized.toLowerCase() };
}
