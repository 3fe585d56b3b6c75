// What the people features leave behind, for the cron: expired sign-in links and member sessions at once, audit log
// entries once they are older than RETENTION_DAYS (kept as long as the messages they are about; 0 keeps them).

import { config } from "../../config";
import { purgeExpiredSignIns } from "../members/sign-in";
import { purgeAuditLog } from "./audit";

const dayMs = 86_400_000;

export async function purgePeopleData(env: Env, now: Date): Promise<void> {
  await purgeExpiredSignIns(env);
  const days = config(env).retentionDays;
  if (days !== undefined) await purgeAuditLog(env.DB, new Date(now.getTime() - days * dayMs).toISOString());
}
