// Campaigns: drafts (create, read, change, delete), the move to sending (audience counted, credits reserved, the
// fan-out started in the campaign's CampaignProgress object) and cancellation. This module owns the campaigns'
// queries; the fan-out and completion live in fanout.ts, what the send consumer needs in delivery.ts.

import { and, count, eq, inArray, sql, type SQL } from "drizzle-orm";
import { databaseNameOf, inJsonArray, statement, type AccountDb, batch, type Ctx } from "../../db/client";
import { campaignPurgedMessages, campaigns, lists, messages, segments, senders, templates, topics, type campaignStatuses } from "../../db/schema";
import type { FieldErrors } from "../../errors";
import { newId, nowIso } from "../../lib/ids";
import { logError } from "../../lib/log";
import { keysetPage } from "../pagination";
import { availableCredits, reserveStatements, wasApplied } from "../credits/ledger";
import { unverifiedDomainMessage } from "../domains/domains";
import { audienceParameters, audienceWhere, countAudience, MAX_AUDIENCE_PARAMETERS } from "./audience";
import { completeIfDone, senderOf } from "./fanout";
import { campaignTotals, zeroCounts } from "../reports/reports";
import { segmentWhere } from "../segments/segments";
import { findAccount } from "../accounts/accounts";
import { findOwned, owned, updateOwned } from "../owned";
import { enqueueVerificationJob, MAX_JOB_ADDRESSES } from "../verification/jobs";
import { failVerificationJob } from "../verification/job-finish";
import { createContactChecks, type ContactChecks } from "../contacts/verify";
import { skipCounts, zeroSkips, type VerificationMode } from "./hygiene";
import { campaignOutcome, emptyCounters, lifecycleFrom, type CampaignCounters } from "./lifecycle";

export type CampaignRow = typeof campaigns.$inferSelect;
export type CampaignStatus = (typeof campaignStatuses)[number];

/** Scheduling horizon of POST /campaigns/{id}/send. */
export const MAX_SCHEDULE_DAYS = 30;

export type CampaignInput = {
  name: string;
  senderId: string | null;
  subject: string | null;
  preheader: string | null;
  html: string | null;
  text: string | null;
  templateId: string | null;
  variables: Record<string, string>;
  tags: string[];
  lists: string[];
  segments: string[];
  excludeLists: string[];
  topicId: string | null;
  trackOpens: boolean;
  trackClicks: boolean;
  verification: VerificationMode;
};

export async function campaignCounters(db: AccountDb, campaignIds: string[]): Promise<Map<string, CampaignCounters>> {
  const result = new Map<string, CampaignCounters>();
  if (campaignIds.length === 0) return result;
  const [[stored, purged], totals, skips] = await Promise.all([
    db.batch([
      db
        .select({ campaignId: messages.campaignId, status: messages.status, total: count() })
        .from(messages)
        .where(inJsonArray(messages.campaignId, campaignIds))
        .groupBy(messages.campaignId, messages.status),
      db
        .select({ campaignId: campaignPurgedMessages.campaignId, status: campaignPurgedMessages.status, total: campaignPurgedMessages.total })
        .from(campaignPurgedMessages)
        .where(inJsonArray(campaignPurgedMessages.campaignId, campaignIds)),
    ]),
    campaignTotals(db, campaignIds),
    skipCounts(db, campaignIds),
  ]);
  const byCampaign = new Map<string, { status: string; total: number }[]>();
  for (const row of [...stored, ...purged]) byCampaign.set(row.campaignId!, [...(byCampaign.get(row.campaignId!) ?? []), row]);
  for (const id of campaignIds) {
    result.set(id, { ...lifecycleFrom(byCampaign.get(id) ?? []), ...(totals.get(id) ?? zeroCounts()), skipped: skips.get(id) ?? zeroSkips() });
  }
  return result;
}

export function serializeCampaign(row: CampaignRow, counters: CampaignCounters = emptyCounters()) {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    sender_id: row.senderId,
    subject: row.subject,
    preheader: row.preheader,
    html: row.html,
    text: row.text,
    template_id: row.templateId,
    variables: row.variables,
    tags: row.tags,
    lists: row.lists,
    segments: row.segments,
    exclude_lists: row.excludeLists,
    topic_id: row.topicId,
    track_opens: row.trackOpens,
    track_clicks: row.trackClicks,
    verification: row.verification,
    verification_job_id: row.verificationJobId,
    send_at: row.sendAt,
    started_at: row.startedAt,
    completed_at: row.completedAt,
    credits_reserved: row.creditsReserved,
    counters,
    outcome: campaignOutcome(row, counters),
    error: row.error,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

/**
 * A campaign not finished yet (draft, scheduled, sending) whose audience names the list or segment: deleting it would
 * change who that campaign reaches (the audience is read again when it fans out). Undefined when none does.
 */
export async function campaignUsing(db: AccountDb, accountId: string, audienceId: string): Promise<{ id: string; name: string } | undefined> {
  return db
    .select({ id: campaigns.id, name: campaigns.name })
    .from(campaigns)
    .where(
      and(
        eq(campaigns.accountId, accountId),
        inArray(campaigns.status, ["draft", "scheduled", "sending"]),
        sql`(EXISTS (SELECT 1 FROM json_each(${campaigns.lists}) WHERE value = ${audienceId})
          OR EXISTS (SELECT 1 FROM json_each(${campaigns.excludeLists}) WHERE value = ${audienceId})
          OR EXISTS (SELECT 1 FROM json_each(${campaigns.segments}) WHERE value = ${audienceId}))`,
      ),
    )
    .limit(1)
    .get();
}

export async function findCampaign(db: AccountDb, accountId: string, id: string): Promise<CampaignRow | undefined> {
  return findOwned(db, campaigns, accountId, id);
}

/** A page of the account's campaigns, newest first (`limit + 1` rows, for `pageOf`). */
export async function listCampaigns(db: AccountDb, accountId: string, page: { cursor?: string; limit: number; status?: CampaignStatus }) {
  const keyset = keysetPage(campaigns, page.cursor);
  return db
    .select()
    .from(campaigns)
    .where(and(eq(campaigns.accountId, accountId), page.status ? eq(campaigns.status, page.status) : undefined, keyset.where))
    .orderBy(...keyset.orderBy)
    .limit(page.limit + 1)
    .all();
}

type References = Pick<CampaignInput, "senderId" | "templateId" | "lists" | "segments" | "excludeLists" | "topicId">;

/** Each id the campaign names that is not the account's, keyed by its field path (`lists.2`); one round trip. */
async function referenceProblems(db: AccountDb, accountId: string, refs: References): Promise<FieldErrors> {
  const listIds = [...new Set([...refs.lists, ...refs.excludeLists])];
  const [foundLists, foundSegments, foundSenders, foundTemplates, foundTopics] = await db.batch([
    db
      .select({ id: lists.id })
      .from(lists)
      .where(and(eq(lists.accountId, accountId), inJsonArray(lists.id, listIds))),
    db
      .select({ id: segments.id })
      .from(segments)
      .where(and(eq(segments.accountId, accountId), inJsonArray(segments.id, refs.segments))),
    db
      .select({ id: senders.id })
      .from(senders)
      .where(owned(senders, accountId, refs.senderId ?? "")),
    db
      .select({ id: templates.id })
      .from(templates)
      .where(owned(templates, accountId, refs.templateId ?? "")),
    db
      .select({ id: topics.id })
      .from(topics)
      .where(owned(topics, accountId, refs.topicId ?? "")),
  ]);
  const known = new Set([...foundLists, ...foundSegments].map((row) => row.id));
  const errors: FieldErrors = {};
  const check = (field: "lists" | "segments" | "exclude_lists", ids: string[], what: string) =>
    ids.forEach((id, i) => {
      if (!known.has(id)) errors[`${field}.${i}`] = [`No ${what} ${id} in this account`];
    });
  check("lists", refs.lists, "list");
  check("segments", refs.segments, "segment");
  check("exclude_lists", refs.excludeLists, "list");
  if (refs.senderId && foundSenders.length === 0) errors.sender_id = [`No sender ${refs.senderId} in this account`];
  if (refs.templateId && foundTemplates.length === 0) errors.template_id = [`No template ${refs.templateId} in this account`];
  if (refs.topicId && foundTopics.length === 0) errors.topic_id = [`No topic ${refs.topicId} in this account`];
  return errors;
}

export type SaveOutcome =
  | { kind: "saved"; campaign: CampaignRow }
  | { kind: "invalid"; errors: FieldErrors }
  | { kind: "not_found" }
  | { kind: "not_draft"; status: CampaignStatus };

export async function createCampaign(db: AccountDb, accountId: string, input: CampaignInput): Promise<SaveOutcome> {
  const errors = await referenceProblems(db, accountId, input);
  if (Object.keys(errors).length > 0) return { kind: "invalid", errors };
  const campaign = await draftInsert(db, accountId, newId("cmp"), input).returning().get();
  return { kind: "saved", campaign };
}

/**
 * The insert of a new draft, for a caller that writes it in its own D1 batch (AI drafts, with ids derived from their
 * request so a retried batch cannot write them twice). Its references must have been checked, or be empty.
 */
export function draftInsert(db: AccountDb, accountId: string, id: string, input: CampaignInput) {
  return db.insert(campaigns).values({ id, accountId, status: "draft", ...input });
}

/** Changes a draft; `undefined` fields stay as they are. Only a draft can change (its audience and content are fixed once sending). */
export async function updateDraft(db: AccountDb, accountId: string, id: string, change: Partial<CampaignInput>): Promise<SaveOutcome> {
  const current = await findCampaign(db, accountId, id);
  if (!current) return { kind: "not_found" };
  if (current.status !== "draft") return { kind: "not_draft", status: current.status };
  const merged = { ...current, ...Object.fromEntries(Object.entries(change).filter(([, value]) => value !== undefined)) } as CampaignRow;
  const errors = await referenceProblems(db, accountId, merged);
  if (merged.html !== null && merged.templateId !== null) errors.html = ["Give html (and text) or a template_id, not both"];
  if (Object.keys(errors).length > 0) return { kind: "invalid", errors };
  const updated = await updateOwned(db, campaigns, accountId, id, { ...change, updatedAt: nowIso() }, eq(campaigns.status, "draft"));
  if (!updated) return { kind: "not_draft", status: (await findCampaign(db, accountId, id))?.status ?? "draft" };
  return { kind: "saved", campaign: updated };
}

export async function deleteDraft(
  db: AccountDb,
  accountId: string,
  id: string,
): Promise<{ kind: "deleted" } | { kind: "not_found" } | { kind: "not_draft"; status: CampaignStatus }> {
  const deleted = await db
    .delete(campaigns)
    .where(owned(campaigns, accountId, id, eq(campaigns.status, "draft")))
    .returning({ id: campaigns.id })
    .get();
  if (deleted) return { kind: "deleted" };
  const current = await findCampaign(db, accountId, id);
  return current ? { kind: "not_draft", status: current.status } : { kind: "not_found" };
}

/** The compiled conditions of the campaign's segments; a segment deleted since the campaign was saved matches nobody. */
export async function segmentConditions(db: AccountDb, campaign: Pick<CampaignRow, "accountId" | "segments">): Promise<SQL[]> {
  if (campaign.segments.length === 0) return [];
  const rows = await db
    .select({ match: segments.match, conditions: segments.conditions })
    .from(segments)
    .where(and(eq(segments.accountId, campaign.accountId), inJsonArray(segments.id, campaign.segments)));
  return rows.map((row) => segmentWhere(campaign.accountId, row));
}

/** What is wrong with a send time: not a time, not in the future, or more than MAX_SCHEDULE_DAYS ahead. */
function scheduleProblemOf(sendAt: Date, now: Date): string | undefined {
  const ahead = sendAt.getTime() - now.getTime();
  if (Number.isNaN(ahead)) return "Must be a date and time";
  if (ahead <= 0) return "Must be in the future";
  if (ahead > MAX_SCHEDULE_DAYS * 86_400_000) return `At most ${MAX_SCHEDULE_DAYS} days ahead`;
  return undefined;
}

export type SendOutcome =
  | { kind: "started"; campaign: CampaignRow; recipients: number }
  | { kind: "not_found" }
  | { kind: "not_draft"; status: CampaignStatus }
  | { kind: "invalid"; errors: FieldErrors }
  | { kind: "insufficient_credits"; needed: number; available: number }
  | { kind: "insufficient_verification_credits"; needed: number; available: number }
  | { kind: "reputation_hold"; domain: string; reason: string | null }
  | { kind: "unavailable" };

/**
 * Moves a draft to `sending` (now) or `scheduled` (`sendAt`): checks the sender and content, counts the audience,
 * reserves that many sending credits and changes the status in ONE D1 batch (the status change is guarded by the
 * reservation, so a short balance changes nothing), then arms the campaign's CampaignProgress object. A template's
 * subject and bodies are copied into the campaign here, so editing the template later does not change it.
 */
export async function sendCampaign(ctx: Ctx, accountId: string, id: string, sendAt: Date | undefined): Promise<SendOutcome> {
  const { db } = ctx;
  const scheduleProblem = sendAt && scheduleProblemOf(sendAt, new Date());
  if (scheduleProblem) return { kind: "invalid", errors: { send_at: [scheduleProblem] } };
  const campaign = await findCampaign(db, accountId, id);
  if (!campaign) return { kind: "not_found" };
  if (campaign.status !== "draft") return { kind: "not_draft", status: campaign.status };

  const [sender, template] = await Promise.all([
    senderOf(ctx, campaign),
    db
      .select()
      .from(templates)
      .where(owned(templates, accountId, campaign.templateId ?? ""))
      .get(),
  ]);
  const errors: FieldErrors = {};
  if (!campaign.senderId) errors.sender_id = ["A campaign needs a sender to be sent: choose one"];
  else if (!sender) errors.sender_id = [`No sender ${campaign.senderId} in this account`];
  else if (sender.domainStatus !== "verified") errors.sender_id = [`The sender's domain ${unverifiedDomainMessage(sender.domain ?? sender.email)}`];
  const subject = campaign.subject ?? template?.subject ?? null;
  const html = campaign.html ?? template?.html ?? null;
  const text = campaign.text ?? template?.text ?? null;
  if (campaign.templateId && !template) errors.template_id = [`No template ${campaign.templateId} in this account`];
  if (!subject) errors.subject = ["A campaign needs a subject to be sent"];
  if (html === null && text === null) errors.html = ["A campaign needs html, text or a template_id to be sent"];
  if (Object.keys(errors).length > 0) return { kind: "invalid", errors };
  // The reputation guard (src/domain/feedback/reputation.ts): a domain past the bounce or complaint limits sends no
  // new campaign until an operator clears it.
  if (sender?.reputationStatus === "held") return { kind: "reputation_hold", domain: sender.domain ?? sender.email, reason: sender.reputationReason };

  const where = audienceWhere(campaign, await segmentConditions(db, campaign));
  if (audienceParameters(where) > MAX_AUDIENCE_PARAMETERS) {
    return {
      kind: "invalid",
      errors: { segments: ["These lists and segments have too many conditions together for one query; use fewer segments or conditions"] },
    };
  }
  const recipients = await countAudience(db, where);
  if (recipients === 0) {
    return {
      kind: "invalid",
      errors: { lists: ["The audience is empty: no subscribed, unsuppressed contact is in these lists or segments (after exclusions)"] },
    };
  }

  // Pre-send hygiene: the addresses without a fresh result are checked by a job created (and charged) before the
  // campaign starts, so a balance that cannot pay for them refuses the send before anything else is taken.
  let checks: ContactChecks = { kind: "none" };
  if (campaign.verification !== "off") {
    const [account, available] = await Promise.all([findAccount(ctx.shared, accountId), availableCredits(db, accountId, "send")]);
    if (!account) return { kind: "not_found" };
    if (available < recipients) return { kind: "insufficient_credits", needed: recipients, available: Math.max(0, available) };
    checks = await createContactChecks(ctx, account, where, { source: "campaign", name: `campaign ${campaign.name}`, campaignId: campaign.id });
    if (checks.kind === "insufficient_credits") return { ...checks, kind: "insufficient_verification_credits" };
    if (checks.kind === "too_many") {
      return {
        kind: "invalid",
        errors: {
          verification: [
            `More than ${MAX_JOB_ADDRESSES} audience addresses have no fresh verification, more than one campaign checks: verify its lists first (POST /contacts/verify)`,
          ],
        },
      };
    }
  }
  const job = checks.kind === "created" ? checks : undefined;

  const status = sendAt ? "scheduled" : "sending";
  const now = nowIso();
  const reservation = reserveStatements(db, { accountId, amount: recipients, referenceId: campaign.id, note: `campaign ${campaign.name}` });
  let written: D1Result[];
  try {
    written = await batch(db, [
      ...reservation,
      statement(
        db,
        db
          .update(campaigns)
          .set({
            status,
            subject,
            html,
            text,
            sendAt: sendAt?.toISOString() ?? now,
            startedAt: sendAt ? null : now,
            creditsReserved: recipients,
            verificationJobId: job?.job.id ?? null,
            updatedAt: now,
          })
          .where(
            and(
              owned(campaigns, accountId, id),
              eq(campaigns.status, "draft"),
              sql`EXISTS (SELECT 1 FROM credit_ledger WHERE balance = 'send' AND kind = 'reservation' AND reference_id = ${id})`,
            ),
          ),
      ),
    ]);
  } catch (error) {
    if (job) await failVerificationJob(ctx, job.job.id, "The campaign did not start");
    // The reservation's reference is the campaign: a second send (even a concurrent one) hits the unique index.
    if (error instanceof Error && /UNIQUE constraint failed: credit_ledger/.test(error.message)) return { kind: "not_draft", status: "sending" };
    throw error;
  }
  if (!wasApplied(written[0]!)) {
    // The checks were charged for a campaign that does not start: their job fails and refunds them.
    if (job) await failVerificationJob(ctx, job.job.id, "The campaign did not start: not enough sending credits");
    return { kind: "insufficient_credits", needed: recipients, available: Math.max(0, await availableCredits(db, accountId, "send")) };
  }

  if (job && (await enqueueVerificationJob(ctx, job.job, job.plan.chunks)) === "queue_unavailable") {
    await failUnstarted(ctx, accountId, campaign.id);
    return { kind: "unavailable" };
  }
  try {
    await armProgress(ctx, campaign.id, accountId, sendAt?.getTime() ?? Date.now());
  } catch (error) {
    logError("campaign: arming its progress object failed", { campaign_id: id, error: String(error) });
    await failUnstarted(ctx, accountId, campaign.id);
    return { kind: "unavailable" };
  }
  const started = await findCampaign(db, accountId, id);
  return { kind: "started", campaign: started!, recipients };
}

async function armProgress({ env, db }: Ctx, campaignId: string, accountId: string, runAt: number) {
  const database = databaseNameOf(db);
  for (let attempt = 1; ; attempt++) {
    try {
      return await env.CAMPAIGN_PROGRESS.getByName(campaignId).start(campaignId, accountId, runAt, database);
    } catch (error) {
      if (attempt === 2) throw error;
    }
  }
}

/**
 * The fan-out could not be armed, so nothing will ever send the campaign: it fails and its reservation is released
 * (the reservation's reference is the campaign, so it cannot be taken again; duplicating the campaign is the retry).
 * Only a campaign still scheduled or sending fails: one cancelled meanwhile stays cancelled. The release is
 * completeIfDone's settlement, which holds back while any message is pending (should the object have started after
 * all, it drains and settles the campaign itself, seeing it failed).
 */
export async function failUnstarted(ctx: Ctx, accountId: string, campaignId: string): Promise<void> {
  const { db } = ctx;
  await db
    .update(campaigns)
    .set({ status: "failed", error: "the fan-out could not be started", updatedAt: nowIso() })
    .where(owned(campaigns, accountId, campaignId, inArray(campaigns.status, ["scheduled", "sending"])));
  await completeIfDone(ctx, campaignId);
}

export type CancelOutcome =
  | { kind: "cancelled"; campaign: CampaignRow }
  | { kind: "not_found" }
  | { kind: "not_cancellable"; status: CampaignStatus };

/**
 * Stops a scheduled or sending campaign: messages not yet enqueued are cancelled and their credits released by the
 * campaign's progress object; messages already enqueued are cancelled by the send consumer if it has not sent them.
 */
export async function cancelCampaign(ctx: Ctx, accountId: string, id: string): Promise<CancelOutcome> {
  const { env, db } = ctx;
  const cancelled = await db
    .update(campaigns)
    .set({ status: "cancelled", updatedAt: nowIso() })
    .where(owned(campaigns, accountId, id, inArray(campaigns.status, ["scheduled", "sending"])))
    .returning()
    .get();
  if (!cancelled) {
    const current = await findCampaign(db, accountId, id);
    return current ? { kind: "not_cancellable", status: current.status } : { kind: "not_found" };
  }
  try {
    await env.CAMPAIGN_PROGRESS.getByName(id).wake();
  } catch (error) {
    // The cancel is stored; the cron's stalled-campaign sweep settles the campaign if its object never hears of it.
    logError("campaign: waking its progress object after a cancel failed", { campaign_id: id, error: String(error) });
  }
  return { kind: "cancelled", campaign: cancelled };
}
