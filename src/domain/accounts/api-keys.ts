import { and, eq, isNull } from "drizzle-orm";
import type { DrizzleD1Database } from "drizzle-orm/d1";
import { accounts, apiKeys } from "../../db/schema";
import { randomBase62 } from "../../lib/ids";
import { sha256Hex } from "../../lib/crypto";
import { AppError } from "../../errors";
import type { ApiKeyContext, AuthContext, Scope } from "../../types";

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

/** Resolves a presented key to its account, or undefined for an unknown, revoked or rotated-away key. */
export async function authenticateApiKey(
  db: DrizzleD1Database,
  presented: string,
): Promise<(AuthContext & { lastUsedAt: string | null }) | undefined> {
  if (!looksLikeApiKey(presented)) return undefined;
  const row = await db
    .select({ key: apiKeys, account: accounts })
    .from(apiKeys)
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(and(eq(apiKeys.keyHash, await sha256Hex(presented)), isNull(apiKeys.revokedAt)))
    .get();
  if (!row) return undefined;
  return { account: row.account, apiKey: toKeyContext(row.key), lastUsedAt: row.key.lastUsedAt };
}

/**
 * The mode of what a key creates (another key, an SMTP credential): the mode asked for, else the key's own. Test
 * keys go to places trusted less than production (CI, staging, a laptop), so nothing they create or rotate may
 * send live mail; otherwise leaking one would be as bad as leaking a live key.
 */
export function grantedMode(caller: ApiKeyContext, requested: ApiKeyMode | undefined, what: string): ApiKeyMode {
  const mode = requested ?? caller.mode;
  if (mode === "live") assertLiveCaller(caller, `create a live ${what}`);
  return mode;
}

export function assertLiveCaller(caller: ApiKeyContext, action: string): void {
  if (caller.mode === "test") throw new AppError("live_key_required", `A test key (sk_test_…) cannot ${action}; use a live key (sk_live_…)`);
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
