import { batch, databaseHandle, isAccountDatabase, placementOf, type DatabaseName } from "../db/client";
import { DurableObject } from "cloudflare:workers";
import { usageStatements } from "../domain/reports/usage";

export type RateLimitDecision = {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again (RateLimit-Reset). */
  resetSeconds: number;
  /** Seconds until the next request would be allowed (Retry-After); 0 when allowed. */
  retryAfterSeconds: number;
};

export type QuotaDecision = { allowed: boolean; used: number; limit: number; retryAfterSeconds: number };

type Bucket = { tokens: number; updatedAt: number };
type Quota = { window: string; used: number };
/** API calls admitted and not yet written to usage_daily, per account and UTC day (key `calls:<day>:<account>`). */
type PendingCalls = { accountId: string; day: string; calls: number };

// API calls reach D1 in one write per key per minute at most, never one per request.
const callFlushIntervalMs = 60_000;

/**
 * One instance per API key (requests per minute) or per account (daily sending quota). A Durable Object is a
 * single writer and its synchronous KV storage cannot interleave, so the limits hold exactly under concurrency.
 * The per-key instances also count the API calls they admit for GET /usage, flushed to D1 by an alarm.
 */
export class RateLimiter extends DurableObject<Env> {
  /**
   * Token bucket of `limit` tokens refilled evenly over `windowSeconds`; a fresh bucket allows a full burst. With
   * `countFor` (an account id), an admitted request is counted as one API call of that account.
   */
  async consume(limit: number, windowSeconds = 60, cost = 1, now = Date.now(), countFor?: string): Promise<RateLimitDecision> {
    const kv = this.ctx.storage.kv;
    const ratePerMs = limit / (windowSeconds * 1000);
    const stored = kv.get<Bucket>("bucket");
    const elapsed = stored ? Math.max(0, now - stored.updatedAt) : 0;
    const tokens = stored ? Math.min(limit, stored.tokens + elapsed * ratePerMs) : limit;
    const allowed = tokens >= cost;
    const left = allowed ? tokens - cost : tokens;
    kv.put<Bucket>("bucket", { tokens: left, updatedAt: now });
    if (allowed && countFor) await this.countCall(countFor, now);
    return {
      allowed,
      limit,
      remaining: Math.floor(left),
      resetSeconds: Math.ceil((limit - left) / ratePerMs / 1000),
      retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((cost - left) / ratePerMs / 1000)),
    };
  }

  /**
   * Counts `count` units against `limit` for the window named `window` (e.g. a UTC day) and refuses the whole
   * request when it would pass the limit. `resetAt` is when the window ends, for Retry-After.
   */
  reserveQuota(window: string, count: number, limit: number, resetAt: number, now = Date.now()): QuotaDecision {
    const kv = this.ctx.storage.kv;
    const stored = kv.get<Quota>("quota");
    const used = stored?.window === window ? stored.used : 0;
    const retryAfterSeconds = Math.max(1, Math.ceil((resetAt - now) / 1000));
    if (used + count > limit) return { allowed: false, used, limit, retryAfterSeconds };
    kv.put<Quota>("quota", { window, used: used + count });
    return { allowed: true, used: used + count, limit, retryAfterSeconds: 0 };
  }

  private async countCall(accountId: string, now: number) {
    const kv = this.ctx.storage.kv;
    const day = new Date(now).toISOString().slice(0, 10);
    const key = `calls:${day}:${accountId}`;
    kv.put<PendingCalls>(key, { accountId, day, calls: (kv.get<PendingCalls>(key)?.calls ?? 0) + 1 });
    if (kv.get<boolean>("flushScheduled")) return;
    kv.put("flushScheduled", true);
    await this.ctx.storage.setAlarm(Date.now() + callFlushIntervalMs);
  }

  /**
   * Writes the counted API calls to usage_daily, one batch per account database, and takes each batch's counts off
   * once it is written. Where each account's rows are is asked of the directory at the flush (`placementOf`), not
   * remembered from the call: the account may have moved since, and an account being moved keeps its counts here
   * until the move has ended (a write now would be left behind in the database it leaves).
   * Calls admitted while a write is under way stay for the next flush; a failed write throws, and the runtime retries
   * the alarm with the counts not written still here.
   */
  override async alarm() {
    const kv = this.ctx.storage.kv;
    const byDatabase = new Map<DatabaseName, [string, PendingCalls][]>();
    for (const [key, calls] of kv.list<PendingCalls>({ prefix: "calls:" })) {
      const placement = await placementOf(this.env, calls.accountId);
      // An account that no longer exists has no usage to keep.
      if (!placement) kv.delete(key);
      else if (placement.movingTo === null) byDatabase.set(placement.database, [...(byDatabase.get(placement.database) ?? []), [key, calls]]);
    }
    for (const [database, pending] of byDatabase) {
      // Counts for a database this Worker no longer has are dropped rather than retried forever.
      if (isAccountDatabase(this.env, database)) {
        const db = databaseHandle(this.env, database);
        await batch(
          db,
          pending.flatMap(([, { accountId, day, calls }]) => usageStatements(db, accountId, { api_calls: calls }, { day })),
        );
      }
      for (const [key, flushed] of pending) {
        const left = (kv.get<PendingCalls>(key)?.calls ?? 0) - flushed.calls;
        if (left > 0) kv.put<PendingCalls>(key, { ...flushed, calls: left });
        else kv.delete(key);
      }
    }
    if ([...kv.list({ prefix: "calls:", limit: 1 })].length > 0) await this.ctx.storage.setAlarm(Date.now() + callFlushIntervalMs);
    else kv.delete("flushScheduled");
  }

  /** Gives units back when an accepted request is undone (e.g. refused for credits after the quota check). */
  releaseQuota(window: string, count: number): number {
    const kv = this.ctx.storage.kv;
    const stored = kv.get<Quota>("quota");
    if (stored?.window !== window) return 0;
    const used = Math.max(0, stored.used - count);
    kv.put<Quota>("quota", { window, used });
    return used;
  }
}
