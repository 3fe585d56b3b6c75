// The steps of a campaign's fan-out, run by its CampaignProgress object (the single writer of its cursor):
// materialise the audience as messages (`scheduled`), move them to `queued` and onto SEND_QUEUE page by page within
// the daily sending limit, and once every message is final, settle the reservation and emit campaign.completed.
// Every step is idempotent, so an alarm that runs again after a crash or a redeploy repeats nothing.
//
// Rows written per recipient before delivery: its message, its message_recipients row, and the message's move to
// `queued` (campaign messages get no message_tags rows).

import { and, eq, inArray, isNull, sql } from "drizzle-orm";
import { inJsonArray, sqlNow, statement, type AccountDb, batch, type Ctx } from "../../db/client";
import { campaignSkips, campaigns, creditLedger, messageRecipients, messages, senders } from "../../db/schema";
import { idFromDigest, nowIso } from "../../lib/ids";
import { logError } from "../../lib/log";
import { releaseStatements } from "../credits/ledger";
import { eventStatement } from "../events/events";
import { campaignTotalsQuery, countsOf, zeroCounts } from "../reports/reports";
import { enqueueMessages } from "../sending/enqueue";
import { dispatchEvents } from "../webhooks/dispatch";
import { sendingDomainsByIds, type SendingDomain } from "../domains/lookup";
import { audiencePage } from "./audience";
import { skipCounts, skipOf, zeroSkips } from "./hygiene";
import { campaignOutcome, lifecycleFrom, pendingMessageStatuses } from "./lifecycle";

type CampaignRow = typeof campaigns.$inferSelect;

/** Contacts per materialisation statement pair; D1 binds the chunk as one JSON parameter. */
export const MATERIALISE_CHUNK = 500;
const encoder = new TextEncoder();

/** The ledger reference of one recipient's charge or release: the campaign's references sort together. */
export const recipientReference = (campaignId: string, messageId: string) => `${campaignId}:${messageId}`;

export async function loadCampaign(db: AccountDb, id: string): Promise<CampaignRow | undefined> {
  return db.select().from(campaigns).where(eq(campaigns.id, id)).get();
}

export type CampaignSender = {
  email: string;
  name: string;
  replyTo: string | null;
  domainId: string;
  /** The sender's domain (null once deleted) and its status and reputation hold. */
  domain: string | null;
  domainStatus: string | null;
  reputationStatus: SendingDomain["reputationStatus"] | null;
  reputationReason: string | null;
};

/**
 * A campaign's sender (account database) with its domain (`DB`, through the isolate's domain cache): two databases,
 * so no join.
 */
export async function senderOf(
  ctx: Pick<Ctx, "db" | "shared">,
  campaign: Pick<CampaignRow, "accountId" | "senderId">,
): Promise<CampaignSender | undefined> {
  const sender = await ctx.db
    .select({ email: senders.email, name: senders.name, replyTo: senders.replyTo, domainId: senders.domainId })
    .from(senders)
    .where(and(eq(senders.id, campaign.senderId ?? ""), eq(senders.accountId, campaign.accountId)))
    .get();
  if (!sender) return undefined;
  const found = (await sendingDomainsByIds(ctx.shared, [sender.domainId])).get(sender.domainId);
  // A domain of another account is none of this sender's (its own was deleted).
  const domain = found?.accountId === campaign.accountId ? found : undefined;
  return {
    ...sender,
    domain: domain?.name ?? null,
    domainStatus: domain?.status ?? null,
    reputationStatus: domain?.reputationStatus ?? null,
    reputationReason: domain?.reputationReason ?? null,
  };
}

/** A scheduled campaign's time has come. False if it is no longer scheduled (cancelled meanwhile). */
export async function beginSending(db: AccountDb, campaignId: string): Promise<boolean> {
  const now = nowIso();
  const moved = await db
    .update(campaigns)
    .set({ status: "sending", startedAt: now, updatedAt: now })
    .where(and(eq(campaigns.id, campaignId), eq(campaigns.status, "scheduled")))
    .returning({ id: campaigns.id })
    .get();
  return moved !== undefined;
}

/**
 * The campaign cannot be sent (its sender went away, its audience query no longer fits): `failed`, and from then on
 * settled like a cancelled campaign (see settle in CampaignProgress): its unqueued messages are swept, its queued ones
 * are skipped by the consumer, and completeIfDone releases what is left once they have drained. Releasing the whole
 * reservation here would let messages already on the queue charge credits that other campaigns hold.
 */
export async function failCampaign(db: AccountDb, campaignId: string, error: string): Promise<void> {
  await db
    .update(campaigns)
    .set({ status: "failed", error, updatedAt: nowIso() })
    .where(and(eq(campaigns.id, campaignId), inArray(campaigns.status, ["scheduled", "sending"])));
}

/** Same campaign and contact, same message id: a chunk written twice (a retried alarm) inserts nothing the second time. */
async function messageIdFor(campaignId: string, contactId: string): Promise<string> {
  return idFromDigest("msg", new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(`${campaignId}:${contactId}`))));
}

/**
 * Writes the next `limit` audience contacts after `cursor` as `scheduled` messages with their recipient rows, in
 * one D1 batch. Returns how many messages were new and the last contact id (the next cursor), or none when done.
 */
export async function materialiseChunk(
  db: AccountDb,
  campaign: CampaignRow,
  sender: CampaignSender,
  where: ReturnType<typeof sql>,
  cursor: string,
  limit: number,
) {
  const contacts = await audiencePage(db, where, cursor, limit);
  if (contacts.length === 0) return { inserted: 0, last: undefined };
  // The campaign's verification leaves some contacts out: a campaign_skips row instead of a message (hygiene.ts).
  const skipped: { contact_id: string; email: string; result: string; reason: string }[] = [];
  const sent: typeof contacts = [];
  for (const contact of contacts) {
    const skip = skipOf(campaign.verification, contact);
    if (skip) skipped.push({ contact_id: contact.id, email: contact.email, ...skip });
    else sent.push(contact);
  }
  const rows = await Promise.all(
    sent.map(async (contact) => ({ id: await messageIdFor(campaign.id, contact.id), contact_id: contact.id, email: contact.email })),
  );
  const chunk = JSON.stringify(rows);
  // INSERT … SELECT over json_each: one statement per table for the whole chunk, within D1's 100 parameters.
  const [written, , skipsWritten] = await batch(db, [
    statement(
      db,
      sql`INSERT OR IGNORE INTO ${messages} (id, account_id, source, status, from_address, from_name, domain_id, reply_to, subject, tags, metadata,
           content, credits_charged, campaign_id, track_opens, track_clicks, stream, topic_id)
         SELECT value ->> '$.id', ${campaign.accountId}, 'campaign', 'scheduled', ${sender.email}, ${sender.name}, ${sender.domainId},
           ${sender.replyTo}, ${campaign.subject ?? ""}, ${JSON.stringify(campaign.tags)}, '{}',
           json_object('kind', 'campaign', 'contact_id', value ->> '$.contact_id'), 1, ${campaign.id},
           ${campaign.trackOpens ? 1 : 0}, ${campaign.trackClicks ? 1 : 0}, 'broadcast', ${campaign.topicId}
         FROM json_each(${chunk})`,
    ),
    statement(
      db,
      sql`INSERT OR IGNORE INTO ${messageRecipients} (message_id, email, account_id, status)
         SELECT value ->> '$.id', value ->> '$.email', ${campaign.accountId}, 'queued' FROM json_each(${chunk})`,
    ),
    statement(
      db,
      sql`INSERT OR IGNORE INTO ${campaignSkips} (campaign_id, contact_id, account_id, email, result, reason)
         SELECT ${campaign.id}, value ->> '$.contact_id', ${campaign.accountId}, value ->> '$.email', value ->> '$.result', value ->> '$.reason'
         FROM json_each(${JSON.stringify(skipped)})`,
    ),
  ]);
  return { inserted: written!.meta.changes + skipsWritten!.meta.changes, last: contacts.at(-1)!.id };
}

/**
 * How many audience contacts the campaign has in D1 (its messages and the contacts its verification left out): what
 * the fan-out has materialised, whatever its own storage says.
 */
export async function materialisedCount(db: AccountDb, campaignId: string): Promise<number> {
  const row = await db
    .select({
      total: sql<number>`(SELECT count(*) FROM ${messages} WHERE ${messages.campaignId} = ${campaignId})
        + (SELECT count(*) FROM ${campaignSkips} WHERE ${campaignSkips.campaignId} = ${campaignId})`,
    })
    .from(campaigns)
    .where(eq(campaigns.id, campaignId))
    .get();
  return row?.total ?? 0;
}

/**
 * Moves up to `limit` scheduled messages to `queued` and enqueues them. Status first, then the queue: a consumer that
 * gets a message before its row says `queued` would skip it. The slices the queue refuses go back to `scheduled`; the
 * result says how many did go and carries the queue's error, so the caller can give the rest back to the daily limit
 * before it rethrows.
 */
export async function enqueueScheduled(ctx: Ctx, campaignId: string, limit: number): Promise<{ enqueued: number; error?: unknown }> {
  const { db } = ctx;
  if (limit <= 0) return { enqueued: 0 };
  const page = db
    .select({ id: messages.id })
    .from(messages)
    .where(and(eq(messages.campaignId, campaignId), eq(messages.status, "scheduled")))
    .limit(limit);
  const moved = await db
    .update(messages)
    .set({ status: "queued", updatedAt: sqlNow })
    .where(inArray(messages.id, page))
    .returning({ id: messages.id })
    .all();
  const ids = moved.map((row) => row.id);
  const { refused, error } = await enqueueMessages(
    ctx,
    ids.map((id) => ({ id })),
  );
  if (refused.length === 0) return { enqueued: ids.length };
  await db
    .update(messages)
    .set({ status: "scheduled" })
    .where(and(eq(messages.status, "queued"), inJsonArray(messages.id, refused)));
  return { enqueued: ids.length - refused.length, error };
}

/** Whether any message of the campaign still waits to be enqueued (one row of the (campaign_id, status) index). */
export async function hasScheduled(db: AccountDb, campaignId: string): Promise<boolean> {
  const row = await db
    .select({ id: messages.id })
    .from(messages)
    .where(and(eq(messages.campaignId, campaignId), eq(messages.status, "scheduled")))
    .limit(1)
    .get();
  return row !== undefined;
}

/**
 * A cancelled or failed campaign's messages that were never enqueued: cancelled. Their credits are released with
 * the rest of the reservation when the campaign is settled (one ledger row, not one per recipient).
 */
export async function sweepUnqueued(db: AccountDb, campaignId: string): Promise<void> {
  const unqueued = and(eq(messages.campaignId, campaignId), eq(messages.status, "scheduled"));
  await db.batch([
    db
      .update(messageRecipients)
      .set({ status: "cancelled", updatedAt: sqlNow })
      .where(
        and(
          inArray(messageRecipients.messageId, db.select({ id: messages.id }).from(messages).where(unqueued)),
          eq(messageRecipients.status, "queued"),
        ),
      ),
    db.update(messages).set({ status: "cancelled", updatedAt: sqlNow }).where(unqueued),
  ]);
}

/**
 * Completion: once no message of the campaign is pending, the campaign becomes `sent` (a cancelled or failed one
 * keeps its status), whatever is still reserved is released (reservation − per-recipient charges − per-recipient
 * releases), and a sent campaign emits campaign.completed with its counters, all in one D1 batch. Returns whether
 * the campaign is complete. Call it only once the fan-out has materialised and enqueued everything.
 *
 * The send consumer has it checked after every batch while the campaign drains, so a campaign with messages still
 * pending costs one row of the (campaign_id, status) index; only then are its messages counted.
 */
export async function completeIfDone(ctx: Ctx, campaignId: string): Promise<boolean> {
  const { db } = ctx;
  const pending = await db
    .select({ id: messages.id })
    .from(messages)
    .where(and(eq(messages.campaignId, campaignId), inArray(messages.status, pendingMessageStatuses)))
    .limit(1)
    .get();
  if (pending) return false;

  const [campaignRows, statusRows, ledgerRows, totalRows] = await db.batch([
    db
      .select({
        accountId: campaigns.accountId,
        name: campaigns.name,
        status: campaigns.status,
        creditsReserved: campaigns.creditsReserved,
        completedAt: campaigns.completedAt,
      })
      .from(campaigns)
      .where(eq(campaigns.id, campaignId)),
    db
      .select({ status: messages.status, total: sql<number>`count(*)` })
      .from(messages)
      .where(eq(messages.campaignId, campaignId))
      .groupBy(messages.status),
    // The per-recipient references are `<campaign id>:<message id>`: a range of the (balance, kind, reference_id) index.
    db
      .select({ total: sql<number>`count(*)` })
      .from(creditLedger)
      .where(
        and(
          eq(creditLedger.balance, "send"),
          inArray(creditLedger.kind, ["charge", "release"]),
          sql`${creditLedger.referenceId} > ${`${campaignId}:`} AND ${creditLedger.referenceId} < ${`${campaignId};`}`,
        ),
      ),
    campaignTotalsQuery(db, [campaignId]),
  ]);
  const campaign = campaignRows[0];
  if (!campaign || campaign.completedAt) return true;
  if (statusRows.some((row) => (pendingMessageStatuses as readonly string[]).includes(row.status) && row.total > 0)) return false;

  // The counters GET /campaigns/{id} shows, with the outcome it will show once this batch has completed it.
  const skipped = (await skipCounts(db, [campaignId])).get(campaignId) ?? zeroSkips();
  const counters = { ...lifecycleFrom(statusRows), ...(totalRows[0] ? countsOf(totalRows[0]) : zeroCounts()), skipped };
  const outcome = campaignOutcome({ completedAt: nowIso() }, counters);
  const remaining = Math.max(0, campaign.creditsReserved - (ledgerRows[0]?.total ?? 0));
  const dedupeKey = `campaign.completed:${campaignId}`;
  const [completed] = await batch(db, [
    statement(
      db,
      db
        .update(campaigns)
        .set({
          status: sql`CASE ${campaigns.status} WHEN 'sending' THEN 'sent' ELSE ${campaigns.status} END`,
          completedAt: sqlNow,
          updatedAt: sqlNow,
        })
        .where(and(eq(campaigns.id, campaignId), isNull(campaigns.completedAt), inArray(campaigns.status, ["sending", "cancelled", "failed"])))
        .returning({ status: campaigns.status }),
    ),
    ...(remaining > 0
      ? releaseStatements(db, { accountId: campaign.accountId, amount: remaining, referenceId: campaignId, note: "campaign settled" })
      : []),
    // Guarded in SQL: a cancel landing between the reads above and this batch leaves the campaign cancelled, and a
    // cancelled campaign emits no campaign.completed.
    ...(campaign.status === "sending"
      ? [
          eventStatement(
            db,
            {
              accountId: campaign.accountId,
              type: "campaign.completed",
              subjectId: campaignId,
              dedupeKey,
              data: { campaign_id: campaignId, name: campaign.name, outcome, ...counters },
            },
            sql`EXISTS (SELECT 1 FROM ${campaigns} WHERE ${campaigns.id} = ${campaignId} AND ${campaigns.status} = 'sent')`,
          ),
        ]
      : []),
  ]);
  const becameSent = (completed!.results as { status: string }[]).some((row) => row.status === "sent");
  if (becameSent) await dispatchEvents(ctx, campaign.accountId, [dedupeKey]);
  return true;
}

/**
 * Tells the progress object of each campaign among `recorded` that outcomes were written, so it checks completion
 * soon. Never throws: the object's own poll finds completion anyway, only later.
 */
export async function notifyCampaigns(env: Env, recorded: { campaignId: string | null }[]): Promise<void> {
  const ids = [...new Set(recorded.map((message) => message.campaignId).filter((id): id is string => id !== null))];
  await Promise.all(
    ids.map((id) =>
      env.CAMPAIGN_PROGRESS.getByName(id)
        .messagesSettled()
        .catch((error: unknown) => logError("campaign: completion notice failed", { campaign_id: id, error: String(error) })),
    ),
  );
}
