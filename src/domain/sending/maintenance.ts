import { purgeExpiredDnsCache } from "../dns/doh";
import { purgeExpiredKeys } from "./idempotency";

export const purgeExpiredIdempotencyKeys = (env: Env) => purgeExpiredKeys(env.DB);

export const purgeDnsCache = (env: Env) => purgeExpiredDnsCache(env.DB);
