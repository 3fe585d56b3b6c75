// SMTP credentials: the username and password the bridge's clients log in with. This module owns their queries;
// the API routes and the bridge's internal endpoints call it.

import type { SharedDb } from "../../db/client";
import { and, desc, eq, isNull } from "drizzle-orm";
import { accounts, smtpCredentials } from "../../db/schema";
import { sha256Hex, timingSafeEqualString } from "../../lib/crypto";
import { newId, nowIso, randomBase62 } from "../../lib/ids";
import { TtlCache } from "../../lib/ttl-cache";
import type { AuthContext } from "../../types";
import { grantedMode, refuseTestKeyOnLive, type ApiKeyMode, type LiveKeyRequired } from "../accounts/api-keys";
import { owned, updateOwned } from "../owned";

export type SmtpCredentialRow = typeof smtpCredentials.$inferSelect;

export const SMTP_USERNAME_PREFIX = "smtp_";
const usernameLength = 20;
const passwordLength = 40;

/**
 * A new credential: username `smtp_` + 20 base62 characters, password 40 base62 characters (about 238 bits).
 * The password is a random secret the service generates, not something a person chose, so there is nothing for a
 * slow hash (bcrypt, scrypt) to protect against: guessing 2^238 values is out of reach however fast each guess is.
 * A single SHA-256 is therefore the right storage hash, as for API keys, and keeps AUTH cheap for the bridge.
 */
export async function generateSmtpCredential() {
  const username = SMTP_USERNAME_PREFIX + randomBase62(usernameLength);
  const password = randomBase62(passwordLength);
  return { username, password, passwordHash: await sha256Hex(password) };
}

export function serializeSmtpCredential(row: SmtpCredentialRow) {
  return { id: row.id, name: row.name, username: row.username, mode: row.mode, created_at: row.createdAt, last_used_at: row.lastUsedAt };
}

const notRevoked = isNull(smtpCredentials.revokedAt);

/** The account's active credentials, newest first. */
export async function listSmtpCredentials(db: SharedDb, accountId: string): Promise<SmtpCredentialRow[]> {
  return db
    .select()
    .from(smtpCredentials)
    .where(and(eq(smtpCredentials.accountId, accountId), isNull(smtpCredentials.revokedAt)))
    .orderBy(desc(smtpCredentials.createdAt), desc(smtpCredentials.id))
    .all();
}

/** A new credential of the caller's account, of the mode `grantedMode` allows; `password` is returned only here. */
export async function createSmtpCredential(
  db: SharedDb,
  caller: AuthContext,
  input: { name: string; mode?: ApiKeyMode },
): Promise<{ kind: "created"; row: SmtpCredentialRow; password: string } | LiveKeyRequired> {
  const granted = grantedMode(caller.apiKey, input.mode, "SMTP credential");
  if (granted.kind !== "granted") return granted;
  const secret = await generateSmtpCredential();
  const row = await db
    .insert(smtpCredentials)
    .values({
      id: newId("smtp"),
      accountId: caller.account.id,
      name: input.name,
      username: secret.username,
      passwordHash: secret.passwordHash,
      mode: granted.mode,
    })
    .returning()
    .get();
  return { kind: "created", row, password: secret.password };
}

/** Revokes a credential at once; as for API keys, a test key may revoke only test credentials. */
export async function revokeSmtpCredential(
  db: SharedDb,
  caller: AuthContext,
  credentialId: string,
): Promise<{ kind: "revoked"; row: SmtpCredentialRow & { revokedAt: string } } | { kind: "not_found" } | LiveKeyRequired> {
  if (caller.apiKey.mode === "test") {
    const target = await db
      .select({ mode: smtpCredentials.mode })
      .from(smtpCredentials)
      .where(owned(smtpCredentials, caller.account.id, credentialId, notRevoked))
      .get();
    const refusal = target && refuseTestKeyOnLive(caller.apiKey, target.mode, "revoke a live SMTP credential");
    if (refusal) return refusal;
  }
  const revokedAt = nowIso();
  const row = await updateOwned(db, smtpCredentials, caller.account.id, credentialId, { revokedAt }, notRevoked);
  forgetCachedCredentials(caller.account.id, credentialId);
  return row ? { kind: "revoked", row: { ...row, revokedAt: row.revokedAt ?? revokedAt } } : { kind: "not_found" };
}

// Compared against when the username is unknown, so a miss costs the same hashing and comparison as a hit.
const unknownUserHash = "0".repeat(64);

// last_used_at is informational; writing it at most once a minute keeps a D1 write off most AUTHs.
const lastUsedResolutionMs = 60_000;

export type RelayIdentity = { credentialId: string; accountId: string; mode: SmtpCredentialRow["mode"] };

/**
 * Checks a username and password as the SMTP bridge presents them. Unknown, revoked and wrong-password all return
 * undefined after the same work (hash the presented password, compare in constant time against a stored or a
 * dummy hash), so the answer time does not tell them apart.
 */
export async function authenticateSmtpCredential(
  db: SharedDb,
  username: string,
  password: string,
  waitUntil: (promise: Promise<unknown>) => void,
): Promise<RelayIdentity | undefined> {
  const row = await db.select().from(smtpCredentials).where(eq(smtpCredentials.username, username)).get();
  const matches = await timingSafeEqualString(await sha256Hex(password), row?.passwordHash ?? unknownUserHash);
  if (!row || row.revokedAt !== null || !matches) return undefined;
  if (!row.lastUsedAt || Date.now() - Date.parse(row.lastUsedAt) > lastUsedResolutionMs) {
    waitUntil(db.update(smtpCredentials).set({ lastUsedAt: new Date().toISOString() }).where(eq(smtpCredentials.id, row.id)).run());
  }
  return { credentialId: row.id, accountId: row.accountId, mode: row.mode };
}

export type ActiveCredential = { credential: SmtpCredentialRow; account: typeof accounts.$inferSelect };

/**
 * As API keys on POST /send (apiKeyCacheTtlMs, same reasoning): the relay's per-message lookup of a credential and
 * its account may be answered from this isolate's memory for this long, so a revocation made elsewhere stops a
 * session's messages at the latest this long after it (one made through this isolate, at once).
 */
export const credentialCacheTtlMs = 5_000;
const credentialCache = new TtlCache<ActiveCredential>(credentialCacheTtlMs);

/**
 * The credential (not revoked) and its account, for the bridge's later calls that name the credential by id.
 * `cached`: see credentialCacheTtlMs; only for callers that need nothing fresh from the account (not its balances).
 */
export async function findActiveCredential(
  db: SharedDb,
  credentialId: string,
  options: { cached?: boolean; now?: number } = {},
): Promise<ActiveCredential | undefined> {
  const now = options.now ?? Date.now();
  if (options.cached) {
    const hit = credentialCache.get(credentialId, now);
    if (hit) return hit;
  }
  const row = await db
    .select({ credential: smtpCredentials, account: accounts })
    .from(smtpCredentials)
    .innerJoin(accounts, eq(accounts.id, smtpCredentials.accountId))
    .where(and(eq(smtpCredentials.id, credentialId), isNull(smtpCredentials.revokedAt)))
    .get();
  if (!row) return undefined;
  credentialCache.set(credentialId, row, now);
  return row;
}

/** Forgets this isolate's cached credentials of an account, or one of them: after a revocation or account change. */
export function forgetCachedCredentials(accountId: string, credentialId?: string): void {
  credentialCache.deleteWhere(
    ({ credential }) => credential.accountId === accountId && (credentialId === undefined || credential.id === credentialId),
  );
}
