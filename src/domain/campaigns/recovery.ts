// The cron's sweep for campaign fan-outs that died: a CampaignProgress object whose alarm is gone (a run killed
// past its retries, storage lost) would leave its campaign `sending` with credits reserved for ever.

import { and, eq, isNull, lt, or } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { campaigns } from "../../db/schema";
import { logWarning } from "../../lib/log";

/** A campaign whose row has not changed for this long is asked whether its fan-out is still alive. */
export const STALLED_AFTER_MS = 15 * 60_000;
const sweepLimit = 100;

/**
 * Campaigns `sending`, `scheduled` past their send_at, or `cancelled` but not yet settled, unchanged for 15 minutes:
 * each one's progress object is re-armed if nothing is armed. A live fan-out always has an alarm (its next run, the
 * daily limit's midnight, or the drain's poll), so a healthy or throttled campaign is left as it is and running this
 * twice re-arms nothing twice. Returns the ids of the campaigns re-armed.
 */
export async function resumeStalledCampaigns(env: Env, now = new Date()): Promise<string[]> {
  const cutoff = new Date(now.getTime() - STALLED_AFTER_MS).toISOString();
  const stalled = await drizzle(env.DB)
    .select({ id: campaigns.id, accountId: campaigns.accountId })
    .from(campaigns)
    .where(
      and(
        lt(campaigns.updatedAt, cutoff),
        or(
          eq(campaigns.status, "sending"),
          and(eq(campaigns.status, "scheduled"), lt(campaigns.sendAt, cutoff)),
          and(eq(campaigns.status, "cancelled"), isNull(campaigns.completedAt)),
        ),
      ),
    )
    .limit(sweepLimit)
    .all();
  const resumed: string[] = [];
  for (const campaign of stalled) {
    if (await env.CAMPAIGN_PROGRESS.getByName(campaign.id).resume(campaign.id, campaign.accountId)) resumed.push(campaign.id);
  }
  if (resumed.length > 0) logWarning("campaigns: stalled fan-outs re-armed", { campaign_ids: resumed });
  return resumed;
}
