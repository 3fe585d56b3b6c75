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
  const decision = await env.RATE_LIMITER.getByName(`daily:${account.id}`).reserveQuota(
    window,
    count,
    account.dailySendLimit,
    nextUtcMidnight(now),
    now.getTime(),
  );
  if (!decision.allowed) {
    throw new AppError(
      "daily_limit_reached",
      `Daily sending limit reached: ${decision.used} of ${decision.limit} recipients sent today (UTC); this message needs ${count}`,
      { headers: { "Retry-After": String(decision.retryAfterSeconds) } },
    );
  }
  return { window, count };
}

/**
 * Counts up to `count` recipients against today's limit and returns how many fit (0 once the day is used up), for
 * senders that can wait, such as a campaign's fan-out; `resumeAt` is when the next day's quota starts.
 */
export async function reserveDailySendsUpTo(env: Env, account: Pick<Account, "id" | "dailySendLimit">, count: number, now = new Date()) {
  const window = dayWindow(now);
  const limiter = env.RATE_LIMITER.getByName(`daily:${account.id}`);
  const resumeAt = nextUtcMidnight(now);
  const first = await limiter.reserveQuota(window, count, account.dailySendLimit, resumeAt, now.getTime());
  if (first.allowed) return { reservation: { window, count }, resumeAt };
  const left = Math.max(0, first.limit - first.used);
  if (left === 0) return { reservation: { window, count: 0 }, resumeAt };
  const second = await limiter.reserveQuota(window, left, account.dailySendLimit, resumeAt, now.getTime());
  return { reservation: { window, count: second.allowed ? left : 0 }, resumeAt };
}

/** Undoes a reservation whose message was not accepted after all (e.g. refused for credits). */
export async function releaseDailySends(env: Env, account: Pick<Account, "id">, reservation: DailyReservation): Promise<void> {
  await env.RATE_LIMITER.getByName(`daily:${account.id}`).releaseQuota(reservation.window, reservation.count);
}
