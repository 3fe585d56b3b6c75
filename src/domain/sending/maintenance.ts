import type { Ctx } from "../../db/client";
import { purgeExpiredDnsCache } from "../dns/doh";
import { purgeExpiredKeys } from "./idempotency";

export const purgeExpiredIdempotencyKeys = (ctx: Ctx) => purgeExpiredKeys(ctx.db);

export const purgeDnsCache = (ctx: Ctx) => purgeExpiredDnsCache(ctx.shared);
