// Where a campaign's recipients are and how it went, from counts alone: what the campaign resource shows and the
// fan-out's completion decides on. No queries: campaigns.ts and fanout.ts read the counts.

import type { campaigns } from "../../db/schema";
import { zeroCounts, type ReportCounts } from "../reports/reports";
import { zeroSkips, type SkipCounts } from "./hygiene";

type CampaignRow = typeof campaigns.$inferSelect;

/** A campaign message's statuses before its final outcome: the fan-out has not finished with it. */
export const pendingMessageStatuses = ["scheduled", "queued", "sending", "deferred"] as const;

/**
 * Where a campaign's recipients are in its lifecycle, counted from its messages (over the messages_campaign_status
 * index): all of them, those not finished yet, those its cancellation skipped, and those whose last attempt was
 * interrupted after a possible hand-off (never retried).
 */
export type CampaignLifecycle = { recipients: number; pending: number; cancelled: number; unknown: number };

/**
 * The campaign resource's counters: its lifecycle, and what happened to its mail, read from the report rollups, the
 * one definition of each counter (docs/reports.md) and the very numbers of GET /reports/campaigns/{id}.
 */
export type CampaignCounters = CampaignLifecycle & ReportCounts & { skipped: SkipCounts };

/** How a finished campaign went, at a glance: docs/campaigns.md. */
export type CampaignOutcome = "delivered" | "partially_delivered" | "undelivered";

export const emptyCounters = (): CampaignCounters => ({ recipients: 0, pending: 0, cancelled: 0, unknown: 0, ...zeroCounts(), skipped: zeroSkips() });

/** The lifecycle counters from the campaign's messages per status (stored and purged alike). */
export function lifecycleFrom(rows: { status: string; total: number }[]): CampaignLifecycle {
  const lifecycle = { recipients: 0, pending: 0, cancelled: 0, unknown: 0 };
  for (const { status, total } of rows) {
    lifecycle.recipients += total;
    if (status === "cancelled" || status === "unknown") lifecycle[status] += total;
    else if ((pendingMessageStatuses as readonly string[]).includes(status)) lifecycle.pending += total;
  }
  return lifecycle;
}

/**
 * Null until the campaign is finished, and for one that had nobody to send to (cancelled before any). Then `delivered` when the receiving servers accepted every recipient it did not
 * cancel, `undelivered` when they accepted none (all bounced, failed, were suppressed or were left unknown), otherwise
 * `partially_delivered`. Accepted: sent and neither bounced nor failed, so a bounce reported after the hand-off counts.
 */
export function campaignOutcome(row: Pick<CampaignRow, "completedAt">, counters: CampaignCounters): CampaignOutcome | null {
  if (!row.completedAt || counters.recipients - counters.cancelled === 0) return null;
  const accepted = counters.sent - counters.hard_bounces - counters.failed;
  if (accepted <= 0) return "undelivered";
  return accepted >= counters.recipients - counters.cancelled ? "delivered" : "partially_delivered";
}
