// Accounts: plans, limits, features and balances, as the operator sets them. This module owns the accounts'
// queries; balances (account_balances, in the account's database) change only through the credits ledger.

import { and, count, eq, isNull } from "drizzle-orm";
import {
  accountDb,
  forgetPlacement,
  statement,
  type AccountDb,
  type DatabaseName,
  databaseNameOf,
  type SharedDb,
  batch,
  inJsonArray,
} from "../../db/client";
import { accountBalances, accounts, apiKeys } from "../../db/schema";
import { newId, nowIso } from "../../lib/ids";
import type { Feature } from "../../access";
import { topUpStatements } from "../credits/ledger";
import { forgetCachedCredentials } from "../smtp/credentials";
import { defaultKeyStatement, forgetCachedKeys } from "./api-keys";
import { keysetPage } from "../pagination";

export type Account = typeof accounts.$inferSelect;

/**
 * Forgets what this isolate holds of an account's directory row (its keys' and SMTP credentials' cached rows, where
 * its rows are): after a change to the account, or a move's pause and flip.
 */
export function forgetCachedAccount(accountId: string): void {
  forgetCachedKeys(accountId);
  forgetCachedCredentials(accountId);
  forgetPlacement(accountId);
}

/** Defaults per plan; an operator can override each limit per account. */
export const plans = {
  free: { rateLimitPerMinute: 60, dailySendLimit: 100, aiGenerationsPerMonth: 10 },
  starter: { rateLimitPerMinute: 600, dailySendLimit: 10_000, aiGenerationsPerMonth: 100 },
  pro: { rateLimitPerMinute: 3_000, dailySendLimit: 100_000, aiGenerationsPerMonth: 1_000 },
  enterprise: { rateLimitPerMinute: 10_000, dailySendLimit: 1_000_000, aiGenerationsPerMonth: 10_000 },
} as const;
export type Plan = keyof typeof plans;
export const planNames = Object.keys(plans) as [Plan, ...Plan[]];

export const defaultFeatures: Feature[] = ["email_api", "smtp_relay"];

export const hasFeature = (account: Account, feature: Feature) => account.features.includes(feature);

/** An account's balances as they stand (account_balances). */
export type Balances = Pick<typeof accountBalances.$inferSelect, "sendBalance" | "sendReserved" | "verifyBalance" | "updatedAt">;

/** An account without a balance row has no credits. */
const noBalances: Balances = { sendBalance: 0, sendReserved: 0, verifyBalance: 0, updatedAt: "" };

/** The balances of several accounts of one database, read in one query, looked up by account id (as `findBalances`). */
export async function findBalancesOf(db: AccountDb, accountIds: readonly string[]): Promise<(accountId: string) => Balances> {
  const rows = accountIds.length
    ? await db
        .select({
          accountId: accountBalances.accountId,
          sendBalance: accountBalances.sendBalance,
          sendReserved: accountBalances.sendReserved,
          verifyBalance: accountBalances.verifyBalance,
          updatedAt: accountBalances.updatedAt,
        })
        .from(accountBalances)
        .where(inJsonArray(accountBalances.accountId, accountIds))
        .all()
    : [];
  const found = new Map(rows.map(({ accountId, ...balances }) => [accountId, balances]));
  return (accountId) => found.get(accountId) ?? noBalances;
}

/** The balances of `accountId`, read from its database; an account without a balance row has none. */
export const findBalances = async (db: AccountDb, accountId: string): Promise<Balances> => (await findBalancesOf(db, [accountId]))(accountId);

export function balancesOf(balances: Omit<Balances, "updatedAt">) {
  return {
    send: {
      balance: balances.sendBalance,
      reserved: balances.sendReserved,
      available: balances.sendBalance - balances.sendReserved,
    },
    verify: { balance: balances.verifyBalance, available: balances.verifyBalance },
  };
}

export function serializeAccount(account: Account, balances: Balances) {
  return {
    id: account.id,
    name: account.name,
    plan: account.plan,
    features: account.features,
    limits: {
      daily_send_limit: account.dailySendLimit,
      rate_limit_per_minute: account.rateLimitPerMinute,
      ai_generations_per_month: account.aiGenerationsPerMonth,
    },
    balances: balancesOf(balances),
    created_at: account.createdAt,
    // A charge or top-up changes the account as its owner sees it, though it is written beside the ledger.
    updated_at: balances.updatedAt > account.updatedAt ? balances.updatedAt : account.updatedAt,
  };
}

export async function findAccount(db: SharedDb, id: string): Promise<Account | undefined> {
  return db.select().from(accounts).where(eq(accounts.id, id)).get();
}

/** A page of every account, newest first (`limit + 1` rows, for `pageOf`), of one plan when `plan` is given. */
export async function listAccounts(db: SharedDb, page: { cursor?: string; limit: number; plan?: Plan }): Promise<Account[]> {
  const keyset = keysetPage(accounts, page.cursor);
  return db
    .select()
    .from(accounts)
    .where(and(page.plan ? eq(accounts.plan, page.plan) : undefined, keyset.where))
    .orderBy(...keyset.orderBy)
    .limit(page.limit + 1)
    .all();
}

type Limits = { dailySendLimit?: number; rateLimitPerMinute?: number; aiGenerationsPerMonth?: number };

/**
 * The account database a new account goes to: of the pool (`poolDatabases`), the one with the fewest accounts, the
 * first of them on a tie. Fewest accounts rather than least data: a count is one indexed query of the directory, a
 * database's size is not readable through its binding, and an account that grows is what moves are for
 * (docs/scaling.md, "Placement").
 */
export async function placeAccount(db: SharedDb, pool: readonly DatabaseName[]): Promise<DatabaseName> {
  const counts = await db
    .select({ database: accounts.database, count: count() })
    .from(accounts)
    .where(inJsonArray(accounts.database, pool))
    .groupBy(accounts.database)
    .all();
  const countOf = new Map(counts.map((row) => [row.database, row.count]));
  return pool.reduce((best, name) => ((countOf.get(name) ?? 0) < (countOf.get(best) ?? 0) ? name : best));
}

/**
 * The statement that writes an account's directory row into its account database. Account tables there reference
 * `accounts(id)` (D1 enforces foreign keys), so each account database keeps a copy of its accounts' rows; the
 * directory in `DB` stays the account's record. The copy is kept current (`refreshDirectoryCopy`) because queries in
 * the account database read its plan and limits beside the account's rows (the AI quota, the monthly grant's sweep).
 * Nothing when the account database is `DB`.
 */
export function directoryCopyStatement(own: AccountDb, account: Account): D1PreparedStatement[] {
  if (databaseNameOf(own) === "DB") return [];
  return [statement(own, own.insert(accounts).values(account).onConflictDoNothing())];
}

/** Writes a changed directory row over its copy in the account database (see directoryCopyStatement). */
export async function refreshDirectoryCopy(own: AccountDb, account: Account): Promise<void> {
  if (databaseNameOf(own) === "DB") return;
  const { id: _id, ...columns } = account;
  await own.insert(accounts).values(account).onConflictDoUpdate({ target: accounts.id, set: columns });
}

/**
 * A new account with its first full-access key (one transaction in the shared database), then its balance row and
 * initial credits (ledger entries) and its directory copy: one transaction in `database`, which `dbOf` opens. The limits not
 * given are the plan's; `key` is the key's secret, returned only here.
 */
export async function createAccount(
  db: SharedDb,
  dbOf: (account: { database: string }) => AccountDb,
  database: DatabaseName,
  input: { name: string; plan: Plan; features?: Feature[]; sendCredits: number; verifyCredits: number } & Limits,
): Promise<{ account: Account; balances: Balances; key: string }> {
  const accountId = newId("acc");
  const defaults = plans[input.plan];
  const firstKey = await defaultKeyStatement(db, accountId);
  await batch(db, [
    statement(
      db,
      db.insert(accounts).values({
        id: accountId,
        name: input.name,
        plan: input.plan,
        features: [...new Set(input.features ?? defaultFeatures)],
        dailySendLimit: input.dailySendLimit ?? defaults.dailySendLimit,
        rateLimitPerMinute: input.rateLimitPerMinute ?? defaults.rateLimitPerMinute,
        aiGenerationsPerMonth: input.aiGenerationsPerMonth ?? defaults.aiGenerationsPerMonth,
        database,
      }),
    ),
    firstKey.statement,
  ]);
  const account = await findAccount(db, accountId);
  if (!account) throw new Error(`Account ${accountId} was written but could not be read back`);
  const own = dbOf({ database });
  try {
    await batch(own, [
      ...directoryCopyStatement(own, account),
      statement(own, own.insert(accountBalances).values({ accountId })),
      ...(input.sendCredits > 0 ? topUpStatements(own, accountId, "send", input.sendCredits, "initial credits") : []),
      ...(input.verifyCredits > 0 ? topUpStatements(own, accountId, "verify", input.verifyCredits, "initial credits") : []),
    ]);
  } catch (error) {
    // Two databases' writes cannot be one transaction: an account whose balance was not written is taken back, so
    // the operator's retry does not leave a second account behind with a key nobody received.
    await batch(db, [
      statement(db, db.delete(apiKeys).where(eq(apiKeys.accountId, accountId))),
      statement(db, db.delete(accounts).where(eq(accounts.id, accountId))),
    ]);
    throw error;
  }
  return { account, balances: await findBalances(own, accountId), key: firstKey.key };
}

/**
 * Changes an account; `undefined` keeps a field. A new plan brings its default limits unless limits are given with
 * it. Undefined when there is no such account; `"moving"` while a move runs (the change would miss the copy of the
 * directory row the move writes, and `updated_at` is the move's lease).
 */
export async function updateAccount(
  db: SharedDb,
  accountId: string,
  change: { name?: string; plan?: Plan; features?: Feature[] } & Limits,
): Promise<Account | "moving" | undefined> {
  const defaults = change.plan ? plans[change.plan] : undefined;
  const updated = await db
    .update(accounts)
    .set({
      name: change.name,
      plan: change.plan,
      features: change.features ? [...new Set(change.features)] : undefined,
      dailySendLimit: change.dailySendLimit ?? defaults?.dailySendLimit,
      rateLimitPerMinute: change.rateLimitPerMinute ?? defaults?.rateLimitPerMinute,
      aiGenerationsPerMonth: change.aiGenerationsPerMonth ?? defaults?.aiGenerationsPerMonth,
      updatedAt: nowIso(),
    })
    .where(and(eq(accounts.id, accountId), isNull(accounts.movingTo)))
    .returning()
    .get();
  if (!updated) return (await findAccount(db, accountId)) ? "moving" : undefined;
  // after the write: the next request of this isolate reads the changed row
  forgetCachedAccount(accountId);
  return updated;
}

/**
 * Adds credits to either balance, one ledger entry each; the balances as they stand after, undefined if no account,
 * `"moving"` while a move runs (credits added to the database being left would be left behind).
 */
export async function topUpAccount(
  env: Env,
  shared: SharedDb,
  accountId: string,
  credits: { send?: number; verify?: number; note: string },
): Promise<{ account: Account; balances: Balances } | "moving" | undefined> {
  const account = await findAccount(shared, accountId);
  if (!account) return undefined;
  if (account.movingTo !== null) return "moving";
  const db = accountDb(env, account);
  await batch(db, [
    ...(credits.send ? topUpStatements(db, accountId, "send", credits.send, credits.note) : []),
    ...(credits.verify ? topUpStatements(db, accountId, "verify", credits.verify, credits.note) : []),
  ]);
  return { account, balances: await findBalances(db, accountId) };
}
