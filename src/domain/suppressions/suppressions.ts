// The account's suppression list: addresses that must never be mailed again (hard bounces, complaints,
// unsubscribes, manual entries). The sending pipeline asks `suppressedAmong` before it charges or queues a
// recipient, and records bounces and complaints with `suppressionStatements` inside its own D1 batch.

import { contactEmailKey } from "../contacts/email";
import { dedupeKey } from "../verification/syntax";

export const suppressionReasons = ["bounce", "complaint", "unsubscribe", "manual"] as const;
export type SuppressionReason = (typeof suppressionReasons)[number];

/** The contact status a suppression reason puts a contact of that address in. */
export const contactStatusForReason = {
  bounce: "bounced",
  complaint: "complained",
  unsubscribe: "unsubscribed",
  manual: "unsubscribed",
} as const satisfies Record<SuppressionReason, "bounced" | "complained" | "unsubscribed">;

// D1 caps a statement at 100 bound parameters; one chunk is one bound JSON array, so this only bounds the
// size of each answer, as the sending pipeline's contract asks.
const SUPPRESSION_LOOKUP_CHUNK = 100;

/**
 * The key an address is suppressed under: trimmed, IDN domain in punycode, and the WHOLE address lower-cased.
 * Contacts keep the local part's case (RFC 5321 lets a mailbox be case-sensitive), but a suppression must catch
 * every spelling of the mailbox: no large provider treats local parts case-sensitively, and mailing `Jane@` after
 * `jane@` complained costs more than the rare false match. Dots and `+tags` are kept (different mailboxes).
 */
export function normalizeSuppressionEmail(email: string): string {
  // The verification engine's duplicate key is exactly this normalisation; one definition serves both.
  return dedupeKey(email);
}

/**
 * Which of `emails` are suppressed in the account, as normalised addresses (compare with
 * `normalizeSuppressionEmail(recipient)`). One query per 100 distinct addresses, all in one round trip.
 */
export async function suppressedAmong(d1: D1Database, accountId: string, emails: string[]): Promise<Set<string>> {
  const keys = [...new Set(emails.map(normalizeSuppressionEmail))];
  if (keys.length === 0) return new Set();
  const statements: D1PreparedStatement[] = [];
  for (let i = 0; i < keys.length; i += SUPPRESSION_LOOKUP_CHUNK) {
    statements.push(
      d1
        .prepare("SELECT email FROM suppressions WHERE account_id = ?1 AND email IN (SELECT value FROM json_each(?2))")
        .bind(accountId, JSON.stringify(keys.slice(i, i + SUPPRESSION_LOOKUP_CHUNK))),
    );
  }
  const results = statements.length === 1 ? [await statements[0]!.all<{ email: string }>()] : await d1.batch<{ email: string }>(statements);
  return new Set(results.flatMap((result) => result.results.map((row) => row.email)));
}

/**
 * Statements that suppress an address, for the caller's own D1 batch (one transaction with whatever caused it):
 * the entry (kept as first recorded if the address is already suppressed), and the status change of every contact
 * of that address. A contact only moves to a stronger status (subscribed < unsubscribed < bounced < complained),
 * so a later manual entry does not hide an earlier complaint.
 */
export function suppressionStatements(
  d1: D1Database,
  entry: { accountId: string; email: string; reason: "bounce" | "complaint" | "unsubscribe" | "manual"; sourceMessageId?: string },
): D1PreparedStatement[] {
  const key = normalizeSuppressionEmail(entry.email);
  const status = contactStatusForReason[entry.reason];
  return [
    d1
      .prepare(
        `INSERT INTO suppressions (account_id, email, reason, source_message_id) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (account_id, email) DO NOTHING`,
      )
      .bind(entry.accountId, key, entry.reason, entry.sourceMessageId ?? null),
    // lower(email_key) is what the contacts_account_email_lower index holds. SQLite's lower() folds ASCII only,
    // so the key is also compared after folding the address as the contact stores it (non-ASCII local parts).
    d1
      .prepare(
        `UPDATE contacts SET status = ?3, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
         WHERE account_id = ?1 AND lower(email_key) IN (?2, lower(?4)) AND ${statusRank("status")} < ${statusRank("?3")}`,
      )
      .bind(entry.accountId, key, status, contactEmailKey(entry.email)),
  ];
}

/** SQL ranking contact statuses by how firmly they keep mail away. */
export function statusRank(expression: string): string {
  return `(CASE ${expression} WHEN 'subscribed' THEN 0 WHEN 'unsubscribed' THEN 1 WHEN 'bounced' THEN 2 ELSE 3 END)`;
}
