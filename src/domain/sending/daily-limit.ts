import type { Account } from "../accounts/accounts";
import { AppError } from "../../errors";

export type DailyReservation = { window: string; count: number };

const dayWindow = (now: Date) => now.toISOString().slice(0, 10);
const nextUtcMidnight = (now: Date) => Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);

/**
 * Counts recipients against the account's daily sending limit (UTC day) in the account's RateLimiter object, the
 * single writer that keeps the count exact under concurrent sends. Refused → 429 with Retry-After until midnight UTC.
 */
export async function reserveDailySends(env: Env, account: Account, count: number, now = new Date()): Promise<DailyReservation> {
  const window = dayWindow(now);
  const decision = await env.RATE_LIMITER.getByName(`daily:${account.id}`).reserveQuota(window, count, account.dailySendLimit, nextUtcMidnight(now), now.getTime());
  if (!decision.allowed) {
    throw new AppError(
      "daily_limit_reached",
      `Daily sending limit reached: ${decision.used} of ${decision.limit} recipients sent today (UTC); this message needs ${count}`,
      { headers: { "Retry-After": String(decision.retryAfterSeconds) } },
    );
  }
  return { window, count };
}

/** Undoes a reservation whose message was not accepted after all (e.g. refused for credits). */
export async function releaseDailySends(env: Env, account: Account, reservation: DailyReservation): Promise<void> {
  await env.RATE_LIMITER.getByName(`daily:${account.id}`).releaseQuota(reservation.window, reservation.count);
}
