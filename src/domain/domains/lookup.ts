// The sending path's reads of `domains`, which live in `DB` (a domain name is found before its account is known)
// while the messages that name them live in the account's database: two databases, so they cannot share a batch. The
// accept path (and every other check of an address's domain: the relay's MAIL FROM and headers, senders, form origins)
// reads an account's verified domains, a delivery batch the signing domains of its messages, a campaign (sent, and
// each step of its fan-out) its sender's domain; all come from this isolate's memory for `domainCacheTtlMs` after a
// read, so a busy sender's requests and batches touch `DB` once in that time instead of
// every time (docs/scaling.md, "Account databases").

import { and, eq } from "drizzle-orm";
import { inJsonArray, type SharedDb } from "../../db/client";
import { domains } from "../../db/schema";
import { TtlCache } from "../../lib/ttl-cache";

/**
 * How long this isolate trusts a domain row it read. A domain deleted, or unverified by a re-check, elsewhere still
 * sends from here at most this long after (one changed through this isolate is forgotten at once), and a warm-up's
 * status change reaches delivery at most this late: the warm-up's daily count, which caps sending, is in the account
 * database and always read fresh.
 */
export const domainCacheTtlMs = 30_000;

export type VerifiedDomain = { id: string; name: string };

export type SendingDomain = Pick<
  typeof domains.$inferSelect,
  | "id"
  | "name"
  | "status"
  | "reputationStatus"
  | "reputationReason"
  | "dkimSelector"
  | "dkimPrivateKey"
  | "dkimEd25519PrivateKey"
  | "records"
  | "accountId"
  | "warmupStatus"
  | "warmupSchedule"
  | "warmupStartedAt"
>;

// Only found domains are kept: a domain verified a moment ago must not be refused for the cache's lifetime.
const verifiedByName = new TtlCache<VerifiedDomain>(domainCacheTtlMs, 5_000);
const sendingById = new TtlCache<SendingDomain>(domainCacheTtlMs, 5_000);
const nameKey = (accountId: string, name: string) => `${accountId}\n${name}`;

/** The account's verified domains among `names` (lower-cased domain names); a name it has none of is absent. */
export async function verifiedDomainsOf(db: SharedDb, accountId: string, names: readonly string[]): Promise<Map<string, VerifiedDomain>> {
  const found = new Map<string, VerifiedDomain>();
  const missing: string[] = [];
  for (const name of new Set(names)) {
    const hit = verifiedByName.get(nameKey(accountId, name));
    if (hit) found.set(name, hit);
    else missing.push(name);
  }
  if (missing.length === 0) return found;
  const rows = await db
    .select({ id: domains.id, name: domains.name })
    .from(domains)
    .where(and(eq(domains.accountId, accountId), eq(domains.status, "verified"), inJsonArray(domains.name, missing)))
    .all();
  for (const row of rows) {
    verifiedByName.set(nameKey(accountId, row.name), row);
    found.set(row.name, row);
  }
  return found;
}

/**
 * The domains messages are sent from, by id, with what signing, the warm-up and a campaign's checks need; an id with
 * no domain is absent.
 */
export async function sendingDomainsByIds(db: SharedDb, ids: readonly string[]): Promise<Map<string, SendingDomain>> {
  const found = new Map<string, SendingDomain>();
  const missing: string[] = [];
  for (const id of new Set(ids)) {
    const hit = sendingById.get(id);
    if (hit) found.set(id, hit);
    else missing.push(id);
  }
  if (missing.length === 0) return found;
  const rows = await db
    .select({
      id: domains.id,
      name: domains.name,
      status: domains.status,
      reputationStatus: domains.reputationStatus,
      reputationReason: domains.reputationReason,
      dkimSelector: domains.dkimSelector,
      dkimPrivateKey: domains.dkimPrivateKey,
      dkimEd25519PrivateKey: domains.dkimEd25519PrivateKey,
      records: domains.records,
      accountId: domains.accountId,
      warmupStatus: domains.warmupStatus,
      warmupSchedule: domains.warmupSchedule,
      warmupStartedAt: domains.warmupStartedAt,
    })
    .from(domains)
    .where(inJsonArray(domains.id, missing))
    .all();
  for (const row of rows) {
    sendingById.set(row.id, row);
    found.set(row.id, row);
  }
  return found;
}

/** Forgets this isolate's copies of a domain: after it is deleted, re-checked, or its warm-up changes. */
export function forgetCachedDomain(domainId: string): void {
  verifiedByName.deleteWhere((domain) => domain.id === domainId);
  sendingById.deleteWhere((domain) => domain.id === domainId);
}
