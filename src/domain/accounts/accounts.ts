import { eq } from "drizzle-orm";
import type { DrizzleD1Database } from "drizzle-orm/d1";
import { accounts } from "../../db/schema";
import type { Feature } from "../../types";

export type Account = typeof accounts.$inferSelect;

/** Defaults per plan; an operator can override each limit per account. */
export const plans = {
  free: { rateLimitPerMinute: 60, dailySendLimit: 100 },
  starter: { rateLimitPerMinute: 600, dailySendLimit: 10_000 },
  pro: { rateLimitPerMinute: 3_000, dailySendLimit: 100_000 },
  enterprise: { rateLimitPerMinute: 10_000, dailySendLimit: 1_000_000 },
} as const;
export type Plan = keyof typeof plans;
export const planNames = Object.keys(plans) as [Plan, ...Plan[]];

export const defaultFeatures: Feature[] = ["email_api", "smtp_relay"];

export const hasFeature = (account: Account, feature: Feature) => account.features.includes(feature);

export function balancesOf(account: Account) {
  return {
    send: {
      balance: account.sendBalance,
      reserved: account.sendReserved,
      available: account.sendBalance - account.sendReserved,
    },
    verify: { balance: account.verifyBalance, available: account.verifyBalance },
  };
}

export function serializeAccount(account: Account) {
  return {
    id: account.id,
    name: account.name,
    plan: account.plan,
    features: account.features,
    limits: {
      daily_send_limit: account.dailySendLimit,
      rate_limit_per_minute: account.rateLimitPerMinute,
    },
    balances: balancesOf(account),
    created_at: account.createdAt,
    updated_at: account.updatedAt,
  };
}

export async function findAccount(db: DrizzleD1Database, id: string): Promise<Account | undefined> {
  return db.select().from(accounts).where(eq(accounts.id, id)).get();
}
