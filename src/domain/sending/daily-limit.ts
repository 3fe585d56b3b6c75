import type { Account } from "../accounts/accounts";
import { isRefusal, refused, type Refusal } from "../refusal";

export type DailyReservation = { window: string; count: number };

/** The UTC day (YYYY-MM-DD) sending limits and warm-up caps count in. */
export const dayWindow = (now: Date) => now.toISOString().slice(0, 10);
/** When the next UTC day starts, in milliseconds. */
export const nextUtcMidnight = (now: Date) => Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);

/**
 * Counts recipients against the account's daily sending limit (UTC day) in the account's RateLimiter object, the
 * single writer that keeps the count exact under concurrent sends. Refused until midnight UTC (`retryAfterSeconds`).
 */
export async function reserveDailySends(env: Env, account: Account, count: number, now = new Date()): Promise<DailyReservation | Refusal> {
  const window = dayWindow(now);
  const decision = await env.RATE_LIMITER.getByName(`daily:${account.id}`).reserveQuota(
    window,
    count,
    account.dailySendLimit,
    nextUtcMidnight(now),
    now.getTime(),
  );
  if (!decision.allowed) {
    return refused(
      "daily_limit_reached",
      `Daily sending limit reached: ${decision.used} of ${decision.limit} recipients sent today (UTC); this message needs ${count}`,
      { retryAfterSeconds: decision.retryAfterSeconds },
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

/**
 * Starts reserving `count` recipients (an upper bound: before suppressions are known) at once, so the account's
 * RateLimiter round trip overlaps the accept path's D1 reads instead of following them. `settle(charge)` then
 * keeps exactly `charge` (giving back the rest), or, if the head start was refused, asks for `charge` alone as
 * the path did before: a message that fits the limit is never refused because of the head start. `cancel()`
 * gives everything back when the message is not accepted after all. The count can read high by the difference for
 * the few milliseconds in between.
 */
export function reserveDailySendsAhead(env: Env, account: Account, count: number, now = new Date()) {
  // A head start that failed (refused, or the object unreachable) is as good as none: settle asks for `charge` alone.
  const ahead: Promise<DailyReservation | Refusal | undefined> =
    count > 0 ? reserveDailySends(env, account, count, now).catch(() => undefined) : Promise.resolve(undefined);
  let settled = false;
  return {
    async settle(charge: number): Promise<DailyReservation | Refusal | undefined> {
      settled = true;
      const taken = await ahead;
      if (taken && !isRefusal(taken)) {
        if (charge < taken.count) await releaseDailySends(env, account, { window: taken.window, count: taken.count - charge });
        return charge > 0 ? { window: taken.window, count: charge } : undefined;
      }
      return charge > 0 ? reserveDailySends(env, account, charge, now) : undefined;
    },
    async cancel(): Promise<void> {
      if (settled) return;
      settled = true;
      const taken = await ahead;
      if (taken && !isRefusal(taken)) await releaseDailySends(env, account, taken);
    },
  };
}
