import { purgeExpiredDnsCache } from "../dns/doh";

// Idempotency keys are honoured for 24 hours (ARCHITECTURE.md); the cron frees them afterwards.
const idempotencyWindowHours = 24;

export async function purgeExpiredIdempotencyKeys(env: Env): Promise<void> {
  await env.DB.prepare(`DELETE FROM idempotency_keys WHERE created_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1)`)
    .bind(`-${idempotencyWindowHours} hours`)
    .run();
}

export const purgeDnsCache = (env: Env) => purgeExpiredDnsCache(env.DB);
