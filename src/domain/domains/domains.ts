// Sending domains: DKIM keys, the records to publish, their checks. This module owns the domains' queries.

import { and, eq, inArray } from "drizzle-orm";
import { domains, type DnsRecordCheck } from "../../db/schema";
import { decryptSecret, encryptSecret } from "../../lib/crypto";
import { newId, nowIso } from "../../lib/ids";
import { logError } from "../../lib/log";
import { accountPage } from "../pagination";
import { resolve } from "../dns/doh";
import { dkimTxtValue, generateDkimEd25519KeyPair, generateDkimKeyPair, type DkimKeyPair } from "../sending/dkim";
import { config } from "../../config";
import type { SharedDb, Ctx } from "../../db/client";
import { todaysCap, warmupDay } from "../feedback/warmup";
import { deleteOwned, findOwned } from "../owned";
import { forgetCachedDomain, verifiedDomainsOf } from "./lookup";
import { refused, type Refusal } from "../refusal";

export type DomainRow = typeof domains.$inferSelect;

// A domain name as a sending domain: LDH labels, at least two, no trailing dot, at most 253 characters.
const domainPattern = /^(?=.{4,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Lower-cased ASCII form (IDNs as punycode), or undefined when it cannot be a sending domain. */
export function normalizeDomainName(input: string): string | undefined {
  const trimmed = input.trim().toLowerCase().replace(/\.$/, "");
  if (!trimmed || /[\s/@:?#[\]\\]/.test(trimmed)) return undefined;
  let ascii: string;
  try {
    ascii = new URL(`http://${trimmed}`).hostname;
  } catch {
    return undefined;
  }
  return domainPattern.test(ascii) ? ascii : undefined;
}

/** Selector names carry the month, so a later key rotation can publish a new selector beside the old one. */
function dkimSelector(now = new Date()): string {
  return `mf${now.getUTCFullYear()}${String(now.getUTCMonth() + 1).padStart(2, "0")}`;
}

/** The Ed25519 key is published under its own selector: a selector names one key. */
export const ed25519Selector = (rsaSelector: string) => `${rsaSelector}e`;

/** Where Cloudflare Email Routing receives mail: the bounce domain's MX points here (route1..3, any priority). */
const EMAIL_ROUTING_MX = "route1.mx.cloudflare.net";

export function expectedRecords(
  domain: Pick<DomainRow, "name" | "dkimSelector" | "dkimPublicKey" | "dkimEd25519PublicKey"> & { receiving?: boolean },
  spfInclude: string,
  bounceDomain?: string,
): DnsRecordCheck[] {
  return [
    {
      type: "TXT",
      name: `${domain.dkimSelector}._domainkey.${domain.name}`,
      value: dkimTxtValue(domain.dkimPublicKey),
      purpose: "dkim",
      status: "pending",
    },
    { type: "TXT", name: domain.name, value: `v=spf1 include:${spfInclude} ~all`, purpose: "spf", status: "pending" },
    { type: "TXT", name: `_dmarc.${domain.name}`, value: `v=DMARC1; p=none; rua=mailto:dmarc@${domain.name}`, purpose: "dmarc", status: "pending" },
    ...(domain.dkimEd25519PublicKey
      ? [
          {
            type: "TXT" as const,
            name: `${ed25519Selector(domain.dkimSelector)}._domainkey.${domain.name}`,
            value: dkimTxtValue(domain.dkimEd25519PublicKey, "ed25519"),
            purpose: "dkim_ed25519" as const,
            status: "pending" as const,
          },
        ]
      : []),
    // The return path of this domain's mail (VERP, BOUNCE_DOMAIN): shared by every domain of the deployment and
    // published once by its operator, so DSNs reach the email() handler. Listed so it can be checked; never required.
    ...(bounceDomain
      ? [{ type: "MX" as const, name: bounceDomain, value: EMAIL_ROUTING_MX, purpose: "return_path" as const, status: "pending" as const }]
      : []),
    // A receiving domain's own MX (docs/inbound.md): Email Routing hands its mail to the email() handler. Reported,
    // not required: sending does not depend on it.
    ...(domain.receiving
      ? [{ type: "MX" as const, name: domain.name, value: EMAIL_ROUTING_MX, purpose: "inbound" as const, status: "pending" as const }]
      : []),
  ];
}

/** A refusal's words for a domain the account cannot send from yet, saying what to do in the dashboard or the API. */
export const unverifiedDomainMessage = (domain: string) =>
  `${domain} is not a verified sending domain of this account; add and verify it first (Domains in the dashboard, or POST /api/v1/domains then POST /api/v1/domains/{id}/verify)`;

/** A domain's DKIM keys: the RSA one every verifier checks, and the Ed25519 one signed with beside it. */
export type DomainKeys = { rsa: DkimKeyPair; ed25519: DkimKeyPair };

export async function generateDomainKeys(): Promise<DomainKeys> {
  const [rsa, ed25519] = await Promise.all([generateDkimKeyPair(), generateDkimEd25519KeyPair()]);
  return { rsa, ed25519 };
}

async function createDomainRow(accountId: string, name: string, env: Env, { rsa, ed25519 }: DomainKeys) {
  const base = { name, dkimSelector: dkimSelector(), dkimPublicKey: rsa.publicKeyB64, dkimEd25519PublicKey: ed25519.publicKeyB64 };
  return {
    id: newId("dom"),
    accountId,
    ...base,
    dkimPrivateKey: await encryptSecret(rsa.privateKeyPkcs8B64, config(env).encryptionKey),
    dkimEd25519PrivateKey: await encryptSecret(ed25519.privateKeyPkcs8B64, config(env).encryptionKey),
    records: expectedRecords(base, config(env).spfInclude, config(env).bounceDomain),
    status: "pending" as const,
  };
}

export const decryptDkimKey = (domain: Pick<DomainRow, "dkimPrivateKey">, env: Env) =>
  decryptSecret(domain.dkimPrivateKey, config(env).encryptionKey);

/** Whitespace-insensitive comparison: resolvers and DNS panels reflow the `; ` separators of DKIM records. */
const compact = (value: string) => value.replace(/\s+/g, "").toLowerCase();

function spfIncludes(found: string, include: string): boolean {
  return /^v=spf1(\s|$)/i.test(found.trim()) && found.toLowerCase().split(/\s+/).includes(`include:${include.toLowerCase()}`);
}

/**
 * Looks every record up now (no cache: the user just published them) and says what was found. DKIM (RSA) and SPF
 * decide verification; DMARC and the Ed25519 DKIM key are reported but optional (mail is signed with Ed25519 too
 * only once its key is found).
 */
export async function checkRecords(domain: DomainRow, env: Env): Promise<{ records: DnsRecordCheck[]; verified: boolean; inconclusive: boolean }> {
  const expected = expectedRecords(domain, config(env).spfInclude, config(env).bounceDomain);
  const records = await Promise.all(
    expected.map(async (record): Promise<DnsRecordCheck> => {
      if (record.type === "MX") {
        const answer = await resolve({ url: config(env).dohUrl }, record.name, "MX");
        if (answer.status === "servfail" || answer.status === "timeout") return { ...record, status: "pending", found: [] };
        const found = answer.status === "ok" ? answer.records.map((mx) => mx.exchange) : [];
        const matches = found.some((exchange) => /(^|\.)mx\.cloudflare\.net\.?$/i.test(exchange));
        return { ...record, status: matches ? "verified" : found.length > 0 ? "failed" : "not_found", found };
      }
      const answer = await resolve({ url: config(env).dohUrl }, record.name, "TXT");
      if (answer.status === "servfail" || answer.status === "timeout") return { ...record, status: "pending", found: [] };
      const found = answer.status === "ok" ? answer.records : [];
      const matches =
        record.purpose === "spf"
          ? found.some((value) => spfIncludes(value, config(env).spfInclude))
          : record.purpose === "dmarc"
            ? found.some((value) => /^v=DMARC1;/i.test(value.trim()))
            : found.some((value) => compact(value) === compact(record.value));
      return { ...record, status: matches ? "verified" : found.length > 0 ? "failed" : "not_found", found };
    }),
  );
  const required = records.filter((record) => record.purpose === "dkim" || record.purpose === "spf");
  const verified = required.every((record) => record.status === "verified");
  // A lookup that timed out or failed says nothing about the record: keep the domain's status for it.
  const inconclusive = required.some((record) => record.status === "pending");
  return { records, verified, inconclusive };
}

/**
 * Adds a sending domain (its name normalized) with DKIM keys from `newKeys` (new ones by default); refused when the
 * name is not one a sending domain can have (422) or the account already has it (409).
 */
export async function createDomain(
  db: SharedDb,
  accountId: string,
  input: string,
  env: Env,
  // The test suite's verifiedDomain (test/support/sending.ts) passes keys it made once: an RSA-2048 key costs ~60 ms of
  // CPU, and the suite adds hundreds of domains.
  newKeys: () => Promise<DomainKeys> = generateDomainKeys,
): Promise<{ kind: "created"; domain: DomainRow } | Refusal> {
  const name = normalizeDomainName(input);
  if (!name) {
    return refused("validation_failed", "The request is invalid", {
      errors: { name: ["Not a domain name this account can send from (e.g. example.com or mail.example.com)"] },
    });
  }
  const exists = (id?: string) => refused("conflict", `The domain ${name} is already on this account${id ? ` (${id})` : ""}`);
  const existing = await db
    .select({ id: domains.id })
    .from(domains)
    .where(and(eq(domains.accountId, accountId), eq(domains.name, name)))
    .get();
  if (existing) return exists(existing.id);
  // Checked first so the DKIM keys are not generated for nothing; the unique index settles a concurrent create.
  const row = await db
    .insert(domains)
    .values(await createDomainRow(accountId, name, env, await newKeys()))
    .onConflictDoNothing()
    .returning()
    .get();
  return row ? { kind: "created", domain: row } : exists();
}

/** A page of the account's domains, newest first (`limit + 1` rows, for `pageOf`). */
export function listDomains(db: SharedDb, accountId: string, page: { cursor?: string; limit: number }): Promise<DomainRow[]> {
  return accountPage(db, domains, accountId, page);
}

export async function findDomain(db: SharedDb, accountId: string, domainId: string): Promise<DomainRow | undefined> {
  return findOwned(db, domains, accountId, domainId);
}

/** Removes one of the account's domains; false if there is no such domain. */
export async function deleteDomain(db: SharedDb, accountId: string, domainId: string): Promise<boolean> {
  const deleted = await deleteOwned(db, domains, accountId, domainId);
  forgetCachedDomain(domainId);
  return deleted;
}

/** Runs the check and stores its outcome; a verified domain whose records disappeared falls back to `failed`. */
export async function verifyDomain(db: SharedDb, domain: DomainRow, env: Env): Promise<DomainRow> {
  const { records, verified, inconclusive } = await checkRecords(domain, env);
  const now = nowIso();
  // A domain that was verified and lost a record is `failed` until the records are back; a DNS outage changes nothing.
  const status = verified ? "verified" : inconclusive || domain.status === "pending" ? domain.status : "failed";
  const updated = await db
    .update(domains)
    .set({ status, records, lastCheckedAt: now, verifiedAt: verified ? (domain.verifiedAt ?? now) : domain.verifiedAt, updatedAt: now })
    .where(eq(domains.id, domain.id))
    .returning()
    .get();
  forgetCachedDomain(domain.id);
  return updated ?? domain;
}

/** Which of `names` are verified sending domains of the account (lower-cased), from the isolate's cache when it can. */
export async function verifiedDomainNames(db: SharedDb, accountId: string, names: string[]): Promise<Set<string>> {
  return new Set(
    (
      await verifiedDomainsOf(
        db,
        accountId,
        names.map((name) => name.toLowerCase()),
      )
    ).keys(),
  );
}

export async function findVerifiedDomain(db: SharedDb, accountId: string, domainName: string): Promise<{ id: string; name: string } | undefined> {
  const name = domainName.toLowerCase();
  return (await verifiedDomainsOf(db, accountId, [name])).get(name);
}

const recheckBatchSize = 50;

/**
 * Cron: re-checks pending domains and verified ones (flagging those whose records disappeared), oldest check first.
 * A domain whose check or write fails is logged and left for the next run; the others are still checked.
 */
export async function recheckDomains(ctx: Ctx): Promise<void> {
  const { env, shared } = ctx;
  const due = await shared
    .select()
    .from(domains)
    .where(inArray(domains.status, ["pending", "verified", "failed"]))
    .orderBy(domains.lastCheckedAt)
    .limit(recheckBatchSize)
    .all();
  for (const domain of due) {
    try {
      await verifyDomain(shared, domain, env);
    } catch (error) {
      // Drizzle wraps D1's error in one that repeats the whole query and its parameters; the cause says what failed.
      const reason = error instanceof Error && error.cause instanceof Error ? error.cause : error;
      logError("domain re-check failed", {
        domain_id: domain.id,
        domain: domain.name,
        error: reason instanceof Error ? reason.message : String(reason),
      });
    }
  }
}

export function serializeDomain(domain: DomainRow) {
  return {
    id: domain.id,
    name: domain.name,
    status: domain.status,
    dkim_selector: domain.dkimSelector,
    records: domain.records.map((record) => ({
      type: record.type,
      name: record.name,
      value: record.value,
      purpose: record.purpose,
      status: record.status,
      ...(record.found ? { found: record.found } : {}),
    })),
    last_checked_at: domain.lastCheckedAt,
    verified_at: domain.verifiedAt,
    warmup: {
      status: domain.warmupStatus,
      schedule: domain.warmupSchedule ?? [],
      started_at: domain.warmupStartedAt,
      day: domain.warmupStartedAt && domain.warmupStatus !== "off" ? Math.max(0, warmupDay(domain.warmupStartedAt)) : null,
      today_cap: todaysCap(domain) ?? null,
      paused_reason: domain.warmupStatus === "paused" ? domain.warmupPausedReason : null,
    },
    reputation: { status: domain.reputationStatus, reason: domain.reputationReason, held_at: domain.reputationHeldAt },
    receiving: domain.receiving,
    receiving_addresses: domain.receivingAddresses,
    created_at: domain.createdAt,
    updated_at: domain.updatedAt,
  };
}
