// Which mail a domain receives (docs/inbound.md): `receiving` on a verified domain, and optionally the local parts it
// accepts (null: every address). At most one account receives a name (the domains_receiving_name partial index):
// two accounts can both verify a name for sending, but its mail can only go to one of them.

import type { Ctx, DatabaseName, SharedDb } from "../../db/client";
import { and, eq, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { config } from "../../config";
import { accounts, domains, type DnsRecordCheck } from "../../db/schema";
import { nowIso } from "../../lib/ids";
import { expectedRecords, type DomainRow } from "../domains/domains";
import { refused, type Refusal } from "../refusal";

/** Local parts a domain's address list may hold (the part before `@`, lower-cased); RFC 5321 allows 64 octets. */
export const localPartPattern = /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
export const MAX_RECEIVING_ADDRESSES = 200;

export type ReceivingChange = { receiving: boolean; addresses?: string[] | null };

/** The domain as changed, or why not: not verified (403), another account receives the name (409), bad addresses (422). */
export type SetReceivingOutcome = { kind: "updated"; domain: DomainRow } | Refusal;

/** The local parts as stored: trimmed, lower-cased, without `@domain` when the user gave whole addresses. */
export function normalizeAddresses(domainName: string, input: string[]): { addresses: string[]; errors: Record<string, string[]> } {
  const errors: Record<string, string[]> = {};
  const addresses = new Set<string>();
  input.forEach((raw, index) => {
    let local = raw.trim().toLowerCase();
    const at = local.lastIndexOf("@");
    if (at >= 0) {
      if (local.slice(at + 1) !== domainName) {
        errors[`receiving_addresses.${index}`] = [`Not an address on ${domainName}`];
        return;
      }
      local = local.slice(0, at);
    }
    if (local.length === 0 || local.length > 64 || !localPartPattern.test(local)) {
      errors[`receiving_addresses.${index}`] = ["Not a local part (the part before @), e.g. support"];
      return;
    }
    addresses.add(local);
  });
  return { addresses: [...addresses], errors };
}

/** Keeps what the last check found for records that are still expected, so turning receiving on loses no result. */
function mergeRecords(previous: DnsRecordCheck[], next: DnsRecordCheck[]): DnsRecordCheck[] {
  return next.map((record) => {
    const before = previous.find((old) => old.type === record.type && old.name === record.name && old.purpose === record.purpose);
    return before ? { ...record, status: before.status, ...(before.found ? { found: before.found } : {}) } : record;
  });
}

/** Turns receiving on or off, and sets the accepted addresses (omitted: unchanged; null: catch-all). */
export async function setReceiving(ctx: Ctx, domain: DomainRow, change: ReceivingChange): Promise<SetReceivingOutcome> {
  const { env, shared } = ctx;
  if (change.receiving && domain.status !== "verified") {
    return refused("domain_not_verified", `${domain.name} is not verified yet: verify it before receiving mail`);
  }
  let addresses = domain.receivingAddresses;
  if (change.addresses !== undefined) {
    if (change.addresses === null) addresses = null;
    else {
      const normalized = normalizeAddresses(domain.name, change.addresses);
      if (Object.keys(normalized.errors).length > 0) return refused("validation_failed", "The request is invalid", { errors: normalized.errors });
      addresses = normalized.addresses;
    }
  }
  const records = mergeRecords(
    domain.records,
    expectedRecords({ ...domain, receiving: change.receiving }, config(env).spfInclude, config(env).bounceDomain),
  );
  try {
    const updated = await shared
      .update(domains)
      .set({ receiving: change.receiving, receivingAddresses: addresses, records, updatedAt: nowIso() })
      .where(eq(domains.id, domain.id))
      .returning()
      .get();
    return { kind: "updated", domain: updated ?? domain };
  } catch (error) {
    // The partial unique index: another account already receives this name.
    const text = error instanceof Error ? `${error.message} ${error.cause instanceof Error ? error.cause.message : ""}` : String(error);
    if (/UNIQUE constraint failed/i.test(text)) return refused("conflict", `Another account already receives mail for ${domain.name}`);
    throw error;
  }
}

/**
 * The domain receiving `domainName`'s mail, if any (verified, receiving on), with its account's database and, while
 * the operator moves the account, the database it is moving to: one read of `DB`, where domains and the accounts'
 * directory are.
 */
export async function receivingDomain(
  shared: SharedDb,
  domainName: string,
): Promise<{ domain: DomainRow; database: DatabaseName; movingTo: string | null } | undefined> {
  return shared
    .select({ domain: domains, database: accounts.database, movingTo: accounts.movingTo })
    .from(domains)
    .innerJoin(accounts, eq(accounts.id, domains.accountId))
    .where(and(eq(domains.name, domainName), eq(domains.receiving, true), eq(domains.status, "verified")))
    .get();
}

/** Counts the domain's mail stored since `since`, stopping at `cap`. */
export const storedSince = (domainId: string | SQLiteColumn, since: string, cap: number) =>
  sql`(SELECT count(*) FROM (SELECT 1 FROM inbound_emails WHERE domain_id = ${domainId} AND created_at > ${since} LIMIT ${cap}))`;

/**
 * Whether the domain takes mail for `localPart`: any address without a list; else one on the list, where
 * `support+ticket-42` counts as `support` (subaddressing, RFC 5233).
 */
export function acceptsLocalPart(domain: Pick<DomainRow, "receivingAddresses">, localPart: string): boolean {
  if (domain.receivingAddresses === null) return true;
  const local = localPart.toLowerCase();
  const base = local.split("+", 1)[0]!;
  return domain.receivingAddresses.includes(local) || domain.receivingAddresses.includes(base);
}
