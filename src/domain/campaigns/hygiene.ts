// Pre-send hygiene (docs/campaigns.md, "Verification"): a campaign with `verification` other than `off` checks, at
// POST /send, every audience address without a fresh result on its contact, as one bulk verification job (the
// VERIFY_QUEUE consumer, grouped by domain, through the prober where one is configured), and its fan-out waits for
// that job. Each contact is then sent to, or left out with a campaign_skips row that says why.

import { and, count, eq } from "drizzle-orm";
import { inJsonArray, type AccountDb } from "../../db/client";
import { campaignSkips, type campaignVerificationModes } from "../../db/schema";
import { keysetPage } from "../pagination";

export type VerificationMode = (typeof campaignVerificationModes)[number];
export type SkipResult = (typeof campaignSkips.$inferSelect)["result"];
export type SkipCounts = Record<SkipResult, number>;

export const zeroSkips = (): SkipCounts => ({ invalid: 0, risky: 0, unknown: 0 });

/** What a contact's stored verification says, as the audience page reads it. */
export type ContactVerification = { verificationResult: string | null; verificationStatus: string | null; verifiedAt: string | null };

/**
 * Why the campaign leaves this contact out, or undefined when it is sent to: `skip_invalid` leaves out `invalid`,
 * `valid_only` everything but `valid` (an address without a result too: its check failed or it joined the audience
 * after POST /send).
 */
export function skipOf(mode: VerificationMode, contact: ContactVerification): { result: SkipResult; reason: string } | undefined {
  if (mode === "off") return undefined;
  const result = contact.verificationResult;
  if (result === "valid" || (mode === "skip_invalid" && result !== "invalid")) return undefined;
  const found =
    result && contact.verifiedAt ? `${contact.verificationStatus ?? result} (${result}), checked ${contact.verifiedAt.slice(0, 10)}` : "not verified";
  return {
    result: result === "invalid" || result === "risky" ? result : "unknown",
    reason: mode === "valid_only" ? `${found}; the campaign sends to valid addresses only` : found,
  };
}

/** Per campaign: how many audience contacts its verification left out, by their result. */
export async function skipCounts(db: AccountDb, campaignIds: string[]): Promise<Map<string, SkipCounts>> {
  const counts = new Map<string, SkipCounts>();
  if (campaignIds.length === 0) return counts;
  const rows = await db
    .select({ campaignId: campaignSkips.campaignId, result: campaignSkips.result, total: count() })
    .from(campaignSkips)
    .where(inJsonArray(campaignSkips.campaignId, campaignIds))
    .groupBy(campaignSkips.campaignId, campaignSkips.result)
    .all();
  for (const row of rows) {
    const current = counts.get(row.campaignId) ?? zeroSkips();
    current[row.result] += row.total;
    counts.set(row.campaignId, current);
  }
  return counts;
}

/** A page of the contacts the campaign's verification left out, newest first (`limit + 1` rows, for `pageOf`). */
export async function listSkips(db: AccountDb, campaignId: string, page: { cursor?: string; limit: number }) {
  const keyset = keysetPage({ createdAt: campaignSkips.createdAt, id: campaignSkips.contactId }, page.cursor);
  const rows = await db
    .select()
    .from(campaignSkips)
    .where(and(eq(campaignSkips.campaignId, campaignId), keyset.where))
    .orderBy(...keyset.orderBy)
    .limit(page.limit + 1)
    .all();
  return rows.map((row) => ({ ...row, id: row.contactId }));
}
