// The cron's sweep for campaign fan-outs that died: a CampaignProgress object whose alarm is gone (a run killed
// past its retries, storage lost) would leave its campaign `sending` with credits reserved for ever.

import { and, asc, eq, isNull, lt, or } from "drizzle-orm";
import { databaseNameOf, inJsonArray, type Ctx } from "../../db/client";
import { campaigns } from "../../db/schema";
import { nowIso } from "../../lib/ids";
import { logError, logWarning } from "../../lib/log";

/** A campaign whose row has not changed for this long is asked whether its fan-out is still alive. */
export const STALLED_AFTER_MS = 15 * 60_000;
const sweepLimit = 100;

/**
 * Campaigns `sending`, `scheduled` past their send_at, or `cancelled`/`failed` but not yet settled, unchanged for 15
 * minutes, oldest first: each one's progress object is re-armed if nothing is armed (a settling one also if its alarm
 * is far off, see CampaignProgress.resume). A live fan-out always has an alarm (its next run, the daily limit's
 * midnight, or the drain's poll), so a healthy or throttled campaign is left as it is. Every campaign looked at has
 * its updated_at moved to now: the next runs look at the others, so however many throttled campaigns wait longer,
 * a dead one is reached within (stale campaigns / 100) runs, and one just re-armed is not asked again for 15
 * minutes (one whose object cannot be reached is logged and asked again then). Returns the ids of the campaigns re-armed.
 */
export async function resumeStalledCampaigns(ctx: Ctx, now = new Date()): Promise<string[]> {
  const { env, db } = ctx;
  const cutoff = new Date(now.getTime() - STALLED_AFTER_MS).toISOString();
  const database = databaseNameOf(db);
  const stalled = await db
    .select({ id: campaigns.id, accountId: campaigns.accountId, status: campaigns.status })
    .from(campaigns)
    .where(
      and(
        lt(campaigns.updatedAt, cutoff),
        or(
          eq(campaigns.status, "sending"),
          and(eq(campaigns.status, "scheduled"), lt(campaigns.sendAt, cutoff)),
          and(or(eq(campaigns.status, "cancelled"), eq(campaigns.status, "failed")), isNull(campaigns.completedAt)),
        ),
      ),
    )
    .orderBy(asc(campaigns.updatedAt))
    .limit(sweepLimit)
    .all();
  const resumed: string[] = [];
  for (const campaign of stalled) {
    const settling = campaign.status === "cancelled" || campaign.status === "failed";
    try {
      if (await env.CAMPAIGN_PROGRESS.getByName(campaign.id).resume(campaign.id, campaign.accountId, settling, database)) resumed.push(campaign.id);
    } catch (error) {
      logError("campaigns: re-arming a stalled fan-out failed", { campaign_id: campaign.id, error: String(error) });
    }
  }
  if (stalled.length > 0) {
    await db
      .update(campaigns)
      .set({ updatedAt: nowIso() })
      .where(
        inJsonArray(
          campaigns.id,
          stalled.map((campaign) => campaign.id),
        ),
      );
  }
  if (resumed.length > 0) logWarning("campaigns: stalled fan-outs re-armed", { campaign_ids: resumed });
  return resumed;
}
