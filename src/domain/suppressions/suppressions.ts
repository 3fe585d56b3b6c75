// The account's suppression list: addresses that must never be mailed again (hard bounces, complaints,
// unsubscribes, manual entries). The sending pipeline asks `suppressedAmong` before it charges or queues a
// recipient, and records bounces and complaints with `suppressionStatements` inside its own D1 batch. This module
// owns the suppressions' queries.

import { and, desc, eq, lt, or, sql, type SQL } from "drizzle-orm";
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import { inJsonArray, sqlNow, statement } from "../../db/client";
import { contacts, suppressions } from "../../db/schema";
import { chunk } from "../../lib/chunk";
import { contactEmailKey } from "../contacts/email";
import { dedupeKey } from "../verification/syntax";

export const suppressionReasons = ["bounce", "complaint", "unsubscribe", "manual"] as const;
export type SuppressionReason = (typeof suppressionReasons)[number];
export type SuppressionRow = typeof suppressions.$inferSelect;

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
  const db = drizzle(d1);
  const statements = chunk(keys, SUPPRESSION_LOOKUP_CHUNK).map((slice) => statement(d1, suppressionsAmongQuery(db, accountId, slice)));
  type Found = Pick<SuppressionRow, "email">;
  const results = statements.length === 1 ? [await statements[0]!.all<Found>()] : await d1.batch<Found>(statements);
  return new Set(results.flatMap((result) => result.results.map((row) => row.email)));
}

/**
 * The entries (email, reason) of those of `keys` (normalised addresses) that are suppressed, as one statement with
 * one bound parameter whatever the number of keys: for a caller that reads it inside its own batch.
 */
export function suppressionsAmongQuery(db: DrizzleD1Database, accountId: string, keys: string[]) {
  return db
    .select({ email: suppressions.email, reason: suppressions.reason })
    .from(suppressions)
    .where(and(eq(suppressions.accountId, accountId), inJsonArray(suppressions.email, keys)));
}

/**
 * Statements that suppress an address, for the caller's own D1 batch (one transaction with whatever caused it):
 * the entry (kept as first recorded if the address is already suppressed), and the status change of every contact
 * of that address. A contact only moves to a stronger status (subscribed < unsubscribed < bounced < complained),
 * so a later manual entry does not hide an earlier complaint.
 */
export function suppressionStatements(d1: D1Database, entry: SuppressionEntry): D1PreparedStatement[] {
  return suppressionQueries(drizzle(d1), entry).map((query) => statement(d1, query));
}

type SuppressionEntry = { accountId: string; email: string; reason: SuppressionReason; sourceMessageId?: string };

function suppressionQueries(db: DrizzleD1Database, entry: SuppressionEntry) {
  const key = normalizeSuppressionEmail(entry.email);
  const status = contactStatusForReason[entry.reason];
  return [
    db
      .insert(suppressions)
      .values({ accountId: entry.accountId, email: key, reason: entry.reason, sourceMessageId: entry.sourceMessageId ?? null })
      .onConflictDoNothing({ target: [suppressions.accountId, suppressions.email] }),
    // lower(email_key) is what the contacts_account_email_lower index holds. SQLite's lower() folds ASCII only,
    // so the key is also compared after folding the address as the contact stores it (non-ASCII local parts).
    db
      .update(contacts)
      .set({ status, updatedAt: sqlNow })
      .where(
        and(
          eq(contacts.accountId, entry.accountId),
          sql`lower(${contacts.emailKey}) IN (${key}, lower(${contactEmailKey(entry.email)}))`,
          sql`${statusRank(sql`${contacts.status}`)} < ${statusRank(sql`${status}`)}`,
        ),
      ),
  ] as const;
}

/** SQL ranking contact statuses by how firmly they keep mail away. */
function statusRank(status: SQL): SQL {
  return sql`(CASE ${status} WHEN 'subscribed' THEN 0 WHEN 'unsubscribed' THEN 1 WHEN 'bounced' THEN 2 ELSE 3 END)`;
}

/** Where a page of the suppression list starts: after this entry (newest first, on created_at then email). */
export type SuppressionPosition = { createdAt: string; email: string };

/** A page of the account's suppression list, newest first (`limit + 1` rows), or the entry of one address. */
export async function listSuppressions(
  d1: D1Database,
  accountId: string,
  filters: { email?: string },
  page: { after?: SuppressionPosition; limit: number },
): Promise<SuppressionRow[]> {
  const { after } = page;
  return drizzle(d1)
    .select()
    .from(suppressions)
    .where(
      and(
        eq(suppressions.accountId, accountId),
        filters.email !== undefined ? eq(suppressions.email, normalizeSuppressionEmail(filters.email)) : undefined,
        after
          ? or(lt(suppressions.createdAt, after.createdAt), and(eq(suppressions.createdAt, after.createdAt), lt(suppressions.email, after.email)))
          : undefined,
      ),
    )
    .orderBy(desc(suppressions.createdAt), desc(suppressions.email))
    .limit(page.limit + 1)
    .all();
}

/**
 * Suppresses an address by hand (or as the owner's unsubscribe); an address already on the list keeps its first
 * entry. Returns the entry as it stands and whether this call created it, in one round trip.
 */
export async function addSuppression(
  d1: D1Database,
  accountId: string,
  input: { email: string; reason: SuppressionReason },
): Promise<{ created: boolean; entry: SuppressionRow }> {
  const db = drizzle(d1);
  const email = normalizeSuppressionEmail(input.email);
  const [insert, updateContacts] = suppressionQueries(db, { accountId, email: input.email, reason: input.reason });
  const [inserted, , entry] = await db.batch([
    insert,
    updateContacts,
    db
      .select()
      .from(suppressions)
      .where(and(eq(suppressions.accountId, accountId), eq(suppressions.email, email))),
  ]);
  const row = entry[0];
  if (!row) throw new Error("The suppression was written but could not be read back");
  return { created: inserted.meta.changes > 0, entry: row };
}

/** Removes an address from the list; the removed entry, or undefined if it was not suppressed. */
export async function removeSuppression(d1: D1Database, accountId: string, email: string): Promise<SuppressionRow | undefined> {
  return drizzle(d1)
    .delete(suppressions)
    .where(and(eq(suppressions.accountId, accountId), eq(suppressions.email, normalizeSuppressionEmail(email))))
    .returning()
    .get();
}
