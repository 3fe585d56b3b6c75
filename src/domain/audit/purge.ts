// What the people features leave behind, for the cron: audit log entries once they are older than RETENTION_DAYS
// (kept as long as the messages they are about; 0 keeps them). Expired sign-in links and member sessions, in the
// shared tables, are purgeExpiredSignIns's.

import type { Ctx } from "../../db/client";
import { config } from "../../config";
import { purgeAuditLog } from "./audit";

const dayMs = 86_400_000;

/** The audit log entries of the context's account database past RETENTION_DAYS. */
export async function purgeOldAuditEntries(ctx: Ctx, now: Date): Promise<void> {
  const days = config(ctx.env).retentionDays;
  if (days !== undefined) await purgeAuditLog(ctx.db, new Date(now.getTime() - days * dayMs).toISOString());
}
