// What the people features leave behind, for the cron: expired sign-in links and member sessions at once, audit log
// entries once they are older than RETENTION_DAYS (kept as long as the messages they are about; 0 keeps them).

import type { Ctx } from "../../db/client";
import { config } from "../../config";
import { purgeExpiredSignIns } from "../members/sign-in";
import { purgeAuditLog } from "./audit";

const dayMs = 86_400_000;

export async function purgePeopleData(ctx: Ctx, now: Date): Promise<void> {
  const { env, db } = ctx;
  await purgeExpiredSignIns(ctx);
  const days = config(env).retentionDays;
  if (days !== undefined) await purgeAuditLog(db, new Date(now.getTime() - days * dayMs).toISOString());
}
