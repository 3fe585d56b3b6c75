import { accountDatabases, type Ctx } from "../../db/client";
import { purgeExpiredDnsCache } from "../dns/doh";
import { purgeExpiredKeys } from "./idempotency";

export const purgeExpiredIdempotencyKeys = async (ctx: Ctx) => {
  for (const db of accountDatabases(ctx.env)) await purgeExpiredKeys(db);
};

export const purgeDnsCache = (ctx: Ctx) => purgeExpiredDnsCache(ctx.shared);
