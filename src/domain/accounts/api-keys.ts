// API keys: minting, rotating, revoking and authenticating them, and the rule that a test key never gets hold of
// live power. This module owns the api_keys queries; the routes and the auth middleware call it.

import { and, desc, eq, isNull } from "drizzle-orm";
import { statement, type SharedDb } from "../../db/client";
import { accounts, apiKeys } from "../../db/schema";
import { newId, nowIso, randomBase62 } from "../../lib/ids";
import { sha256Hex } from "../../lib/crypto";
import { TtlCache } from "../../lib/ttl-cache";
import type { ApiKeyContext, AuthContext } from "../../types";
import type { Scope } from "../../access";
import { owned, updateOwned } from "../owned";

export type ApiKeyMode = "live" | "test";
export type ApiKeyRow = typeof apiKeys.$inferSelect;

const keyPattern = /^sk_(live|test)_[0-9A-Za-z]{32}$/;
const displayPrefixLength = 12;

/**
 * A new secret: 32 base62 characters (190 bits). It is high-entropy and random, so a fast SHA-256 is the right
 * storage hash (as Stripe and Unkey do); lookups go by that hash and the key itself is never stored.
 */
export async function generateApiKey(mode: ApiKeyMode) {
  const key = `sk_${mode}_${randomBase62(32)}`;
  return { key, prefix: key.slice(0, displayPrefixLength), keyHash: await sha256Hex(key) };
}

export const looksLikeApiKey = (value: string) => keyPattern.test(value);

export function toKeyContext(row: Pick<ApiKeyRow, "id" | "name" | "prefix" | "scopes" | "mode">): ApiKeyContext {
  return { id: row.id, name: row.name, prefix: row.prefix, scopes: row.scopes ?? null, mode: row.mode };
}

// last_used_at is informational; writing it at most once a minute keeps a D1 write off most requests.
const lastUsedResolutionMs = 60_000;

/**
 * How long this isolate may answer for a key without D1 (POST /send only, see authenticateApiKey). A revocation or
 * rotation made elsewhere (another isolate, another location) is refused here at the latest this long after it;
 * one made through this isolate is refused at once. Unkey caches keys the same way.
 */
export const apiKeyCacheTtlMs = 5_000;
const keyCache = new TtlCache<AuthContext>(apiKeyCacheTtlMs);

/**
 * Resolves a presented key to its account, or undefined for an unknown, revoked or rotated-away key. Notes the use
 * in last_used_at through `waitUntil`, after the answer.
 *
 * With `cached`, a key seen in the last apiKeyCacheTtlMs is answered from this isolate's memory, account row and all,
 * saving the request's first D1 round trip. Only routes that need nothing fresh from the account may ask for it:
 * its balances can be that much out of date (POST /send charges through a guarded D1 write and never reads them
 * for the decision), as can an operator's change to its limits or features. Refusals are never cached.
 */
export async function authenticateApiKey(
  db: SharedDb,
  presented: string,
  waitUntil: (promise: Promise<unknown>) => void,
  options: { cached?: boolean; now?: number } = {},
): Promise<AuthContext | undefined> {
  if (!looksLikeApiKey(presented)) return undefined;
  const keyHash = await sha256Hex(presented);
  const now = options.now ?? Date.now();
  if (options.cached) {
    const hit = keyCache.get(keyHash, now);
    if (hit) return hit;
  }
  const row = await db
    .select({ key: apiKeys, account: accounts })
    .from(apiKeys)
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(and(eq(apiKeys.keyHash, keyHash), isNull(apiKeys.revokedAt)))
    .get();
  if (!row) return undefined;
  if (!row.key.lastUsedAt || now - Date.parse(row.key.lastUsedAt) > lastUsedResolutionMs) {
    waitUntil(db.update(apiKeys).set({ lastUsedAt: nowIso() }).where(eq(apiKeys.id, row.key.id)).run());
  }
  const auth = { account: row.account, apiKey: toKeyContext(row.key) };
  keyCache.set(keyHash, auth, now);
  return auth;
}

/** Forgets this isolate's cached keys of an account, or one key of it: after a revocation, rotation or account change. */
export function forgetCachedKeys(accountId: string, keyId?: string): void {
  keyCache.deleteWhere((auth) => auth.account.id === accountId && (keyId === undefined || auth.apiKey.id === keyId));
}

/**
 * An active key by id, for a dashboard session that stored the id instead of the secret. `keyHash` comes back so the
 * session can tell a rotated key (same id, new secret) from the one it was signed in with.
 */
export async function findActiveKey(db: SharedDb, keyId: string): Promise<(AuthContext & { keyHash: string }) | undefined> {
  const row = await db
    .select({ key: apiKeys, account: accounts })
    .from(apiKeys)
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt)))
    .get();
  return row ? { account: row.account, apiKey: toKeyContext(row.key), keyHash: row.key.keyHash } : undefined;
}

/** A test key asked for live power: what to tell it. */
export type LiveKeyRequired = { kind: "live_key_required"; message: string };

/**
 * Test keys go to places trusted less than production (CI, staging, a laptop), so nothing they create or rotate may
 * send live mail, and they may not revoke live keys or credentials: otherwise leaking one would be as bad as leaking
 * a live key. The refusal when a test key acts on something live, else undefined.
 */
export function refuseTestKeyOnLive(caller: Pick<ApiKeyContext, "mode">, targetMode: ApiKeyMode, action: string): LiveKeyRequired | undefined {
  if (caller.mode === "live" || targetMode === "test") return undefined;
  return { kind: "live_key_required", message: `A test key (sk_test_…) cannot ${action}; use a live key (sk_live_…)` };
}

/** The mode of what a key creates (another key, an SMTP credential): the mode asked for, else the key's own. */
export function grantedMode(
  caller: ApiKeyContext,
  requested: ApiKeyMode | undefined,
  what: string,
): { kind: "granted"; mode: ApiKeyMode } | LiveKeyRequired {
  const mode = requested ?? caller.mode;
  return refuseTestKeyOnLive(caller, mode, `create a live ${what}`) ?? { kind: "granted", mode };
}

const notRevoked = isNull(apiKeys.revokedAt);

/** A new account's first key (live, full access, named "Default"), as a statement for the account's creation batch. */
export async function defaultKeyStatement(db: SharedDb, accountId: string): Promise<{ statement: D1PreparedStatement; key: string }> {
  const secret = await generateApiKey("live");
  const insert = db
    .insert(apiKeys)
    .values({ id: newId("key"), accountId, name: "Default", prefix: secret.prefix, keyHash: secret.keyHash, scopes: null });
  return { statement: statement(db, insert), key: secret.key };
}

/** The account's active keys, newest first. */
export async function listApiKeys(db: SharedDb, accountId: string): Promise<ApiKeyRow[]> {
  return db
    .select()
    .from(apiKeys)
    .where(and(eq(apiKeys.accountId, accountId), isNull(apiKeys.revokedAt)))
    .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id))
    .all();
}

/** A new key of the caller's account; `key` is the secret, returned only here. */
export async function createApiKey(
  db: SharedDb,
  caller: AuthContext,
  input: { name: string; scopes?: Scope[]; mode?: ApiKeyMode },
): Promise<{ kind: "created"; row: ApiKeyRow; key: string } | LiveKeyRequired> {
  const granted = grantedMode(caller.apiKey, input.mode, "key");
  if (granted.kind !== "granted") return granted;
  const secret = await generateApiKey(granted.mode);
  const row = await db
    .insert(apiKeys)
    .values({
      id: newId("key"),
      accountId: caller.account.id,
      name: input.name,
      prefix: secret.prefix,
      keyHash: secret.keyHash,
      scopes: input.scopes ? [...new Set(input.scopes)] : null,
      mode: granted.mode,
    })
    .returning()
    .get();
  return { kind: "created", row, key: secret.key };
}

/** Replaces a key's secret; the key keeps its mode, so only a live key may rotate a live one. */
export async function rotateApiKey(
  db: SharedDb,
  caller: AuthContext,
  keyId: string,
): Promise<{ kind: "rotated"; row: ApiKeyRow; key: string } | { kind: "not_found" } | LiveKeyRequired> {
  const current = await db
    .select({ mode: apiKeys.mode })
    .from(apiKeys)
    .where(owned(apiKeys, caller.account.id, keyId, notRevoked))
    .get();
  if (!current) return { kind: "not_found" };
  // the new secret has the key's mode, so a test key rotating a live key would be handed a live secret
  const refusal = refuseTestKeyOnLive(caller.apiKey, current.mode, "rotate a live key");
  if (refusal) return refusal;
  const secret = await generateApiKey(current.mode);
  const row = await updateOwned(db, apiKeys, caller.account.id, keyId, { keyHash: secret.keyHash, prefix: secret.prefix }, notRevoked);
  forgetCachedKeys(caller.account.id, keyId);
  return row ? { kind: "rotated", row, key: secret.key } : { kind: "not_found" };
}

/** Revokes a key at once; a test key may revoke only test keys. */
export async function revokeApiKey(
  db: SharedDb,
  caller: AuthContext,
  keyId: string,
): Promise<{ kind: "revoked"; row: ApiKeyRow & { revokedAt: string } } | { kind: "not_found" } | LiveKeyRequired> {
  if (caller.apiKey.mode === "test") {
    const target = await db
      .select({ mode: apiKeys.mode })
      .from(apiKeys)
      .where(owned(apiKeys, caller.account.id, keyId, notRevoked))
      .get();
    const refusal = target && refuseTestKeyOnLive(caller.apiKey, target.mode, "revoke a live key");
    if (refusal) return refusal;
  }
  const revokedAt = nowIso();
  const row = await updateOwned(db, apiKeys, caller.account.id, keyId, { revokedAt }, notRevoked);
  forgetCachedKeys(caller.account.id, keyId);
  return row ? { kind: "revoked", row: { ...row, revokedAt: row.revokedAt ?? revokedAt } } : { kind: "not_found" };
}

export const hasScope = (key: ApiKeyContext, scope: Scope) => key.scopes === null || key.scopes.includes(scope);

export function serializeApiKey(row: ApiKeyRow) {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    scopes: row.scopes ?? null,
    mode: row.mode,
    created_at: row.createdAt,
    last_used_at: row.lastUsedAt,
  };
}
