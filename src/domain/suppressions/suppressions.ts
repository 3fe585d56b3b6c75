// The account's suppression list: addresses that must not be mailed again (hard bounces, complaints, unsubscribes,
// manual entries), each for a scope of mail: every stream, broadcast only, or transactional only (docs/streams.md).
// The sending pipeline reads the entries of its recipients before it charges or queues one, and records bounces and
// complaints with `suppressionStatements` inside its own D1 batch. This module owns the suppressions' queries.

import { and, desc, eq, lt, or, sql, type SQL } from "drizzle-orm";
import { inJsonArray, sqlNow, statement, type AccountDb } from "../../db/client";
import { contacts, suppressions, suppressionScopes, type messageStreams } from "../../db/schema";
import { contactEmailKey } from "../contacts/email";
import { dedupeKey } from "../verification/syntax";

export const suppressionReasons = ["bounce", "complaint", "unsubscribe", "manual"] as const;
export type SuppressionReason = (typeof suppressionReasons)[number];
export type SuppressionRow = typeof suppressions.$inferSelect;
export type SuppressionScope = (typeof suppressionScopes)[number];
export type MessageStream = (typeof messageStreams)[number];
export { suppressionScopes };

/** Whether an entry of `scope` keeps mail of `stream` away. */
export const scopeBlocks = (scope: SuppressionScope, stream: MessageStream) => scope === "all" || scope === stream;

/**
 * The scope an entry gets when none is named (`POST /suppressions`): a hard bounce means the mailbox does not exist,
 * for any mail; an unsubscribe is from marketing, never from receipts and resets; a complaint or a manual entry keeps
 * all mail away. Feedback loops name a complaint's scope from the mail complained of (feedback/record.ts).
 */
export const defaultScope = { bounce: "all", complaint: "all", unsubscribe: "broadcast", manual: "all" } as const satisfies Record<
  SuppressionReason,
  SuppressionScope
>;

/** SQL over a row aliased `s`: the entry keeps broadcast mail away (what campaign audiences skip). */
export const blocksBroadcastSql = sql.raw("s.scope IN ('all', 'broadcast')");

/** The contact status a suppression reason puts a contact of that address in. */
export const contactStatusForReason = {
  bounce: "bounced",
  complaint: "complained",
  unsubscribe: "unsubscribed",
  manual: "unsubscribed",
} as const satisfies Record<SuppressionReason, "bounced" | "complained" | "unsubscribed">;

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
 * The entries (email, reason, scope) of those of `keys` (normalised addresses) that are suppressed in any scope, as
 * one statement with one bound parameter whatever the number of keys: for a caller that reads it inside its own
 * batch and decides per stream with `scopeBlocks`.
 */
export function suppressionsAmongQuery(db: AccountDb, accountId: string, keys: string[]) {
  return db
    .select({ email: suppressions.email, reason: suppressions.reason, scope: suppressions.scope })
    .from(suppressions)
    .where(and(eq(suppressions.accountId, accountId), inJsonArray(suppressions.email, keys)));
}

/**
 * Statements that suppress an address, for the caller's own D1 batch (one transaction with whatever caused it):
 * the entry (kept as first recorded if the address is already suppressed in that scope), and the status change of
 * every contact of that address when the entry keeps marketing away. A contact only moves to a stronger status
 * (subscribed < unsubscribed < bounced < complained), so a later manual entry does not hide an earlier complaint.
 */
export function suppressionStatements(db: AccountDb, entry: SuppressionEntry): D1PreparedStatement[] {
  return suppressionQueries(db, entry).map((query) => statement(db, query));
}

type SuppressionEntry = { accountId: string; email: string; reason: SuppressionReason; scope: SuppressionScope; sourceMessageId?: string };

function suppressionQueries(db: AccountDb, entry: SuppressionEntry) {
  const key = normalizeSuppressionEmail(entry.email);
  const status = contactStatusForReason[entry.reason];
  // Contact statuses are about marketing: an entry for transactional mail alone leaves them as they are.
  const contactStatus = entry.scope === "transactional" ? sql`${contacts.status}` : sql`${status}`;
  return [
    db
      .insert(suppressions)
      .values({ accountId: entry.accountId, email: key, reason: entry.reason, scope: entry.scope, sourceMessageId: entry.sourceMessageId ?? null })
      .onConflictDoNothing({ target: [suppressions.accountId, suppressions.email, suppressions.scope] }),
    // lower(email_key) is what the contacts_account_email_lower index holds. SQLite's lower() folds ASCII only,
    // so the key is also compared after folding the address as the contact stores it (non-ASCII local parts).
    db
      .update(contacts)
      .set({ status, updatedAt: sqlNow })
      .where(
        and(
          eq(contacts.accountId, entry.accountId),
          sql`lower(${contacts.emailKey}) IN (${key}, lower(${contactEmailKey(entry.email)}))`,
          sql`${statusRank(sql`${contacts.status}`)} < ${statusRank(contactStatus)}`,
        ),
      ),
  ] as const;
}

/** SQL ranking contact statuses by how firmly they keep mail away. */
function statusRank(status: SQL): SQL {
  return sql`(CASE ${status} WHEN 'pending' THEN 0 WHEN 'subscribed' THEN 0 WHEN 'unsubscribed' THEN 1 WHEN 'bounced' THEN 2 ELSE 3 END)`;
}

/** Where a page of the suppression list starts: after this entry (newest first, on created_at, email, then scope). */
export type SuppressionPosition = { createdAt: string; email: string; scope: SuppressionScope };

/** A page of the account's suppression list, newest first (`limit + 1` rows), or the entry of one address. */
export async function listSuppressions(
  db: AccountDb,
  accountId: string,
  filters: { email?: string; scope?: SuppressionScope },
  page: { after?: SuppressionPosition; limit: number },
): Promise<SuppressionRow[]> {
  const { after } = page;
  return db
    .select()
    .from(suppressions)
    .where(
      and(
        eq(suppressions.accountId, accountId),
        filters.email !== undefined ? eq(suppressions.email, normalizeSuppressionEmail(filters.email)) : undefined,
        filters.scope !== undefined ? eq(suppressions.scope, filters.scope) : undefined,
        after
          ? or(
              lt(suppressions.createdAt, after.createdAt),
              and(eq(suppressions.createdAt, after.createdAt), lt(suppressions.email, after.email)),
              and(eq(suppressions.createdAt, after.createdAt), eq(suppressions.email, after.email), lt(suppressions.scope, after.scope)),
            )
          : undefined,
      ),
    )
    .orderBy(desc(suppressions.createdAt), desc(suppressions.email), desc(suppressions.scope))
    .limit(page.limit + 1)
    .all();
}

/**
 * Suppresses an address by hand (or as the owner's unsubscribe) for `scope`; an address already on the list in that
 * scope keeps its first entry. Returns the entry as it stands and whether this call created it, in one round trip.
 */
export async function addSuppression(
  db: AccountDb,
  accountId: string,
  input: { email: string; reason: SuppressionReason; scope: SuppressionScope },
): Promise<{ created: boolean; entry: SuppressionRow }> {
  const email = normalizeSuppressionEmail(input.email);
  const [insert, updateContacts] = suppressionQueries(db, { accountId, email: input.email, reason: input.reason, scope: input.scope });
  const [inserted, , entry] = await db.batch([
    insert,
    updateContacts,
    db
      .select()
      .from(suppressions)
      .where(and(eq(suppressions.accountId, accountId), eq(suppressions.email, email), eq(suppressions.scope, input.scope))),
  ]);
  const row = entry[0];
  if (!row) throw new Error("The suppression was written but could not be read back");
  return { created: inserted.meta.changes > 0, entry: row };
}

/**
 * Removes an address from the list, in one scope or (none named) in all; the removed entries, none if it was not
 * suppressed there.
 */
export async function removeSuppression(db: AccountDb, accountId: string, email: string, scope?: SuppressionScope): Promise<SuppressionRow[]> {
  return db
    .delete(suppressions)
    .where(
      and(
        eq(suppressions.accountId, accountId),
        eq(suppressions.email, normalizeSuppressionEmail(email)),
        scope ? eq(suppressions.scope, scope) : undefined,
      ),
    )
    .returning();
}
