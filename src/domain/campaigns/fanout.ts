// The steps of a campaign's fan-out, run by its CampaignProgress object (the single writer of its cursor):
// materialise the audience as messages (`scheduled`), move them to `queued` and onto SEND_QUEUE page by page within
// the daily sending limit, and once every message is final, settle the reservation and emit campaign.completed.
// Every step is idempotent, so an alarm that runs again after a crash or a redeploy repeats nothing.
//
// Rows written per recipient before delivery: its message, its message_recipients row, and the message's move to
// `queued` (campaign messages get no message_tags rows).

import { and, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { statement } from "../../db/client";
import { campaigns, domains, senders } from "../../db/schema";
import { idFromDigest, nowIso } from "../../lib/ids";
import { releaseStatements } from "../credits/ledger";
import { eventStatement } from "../events/events";
import type { SendQueueMessage } from "../sending/content";
import { dispatchEvents } from "../webhooks/dispatch";
import { logError } from "../../lib/log";
import { audiencePage } from "./audience";
import { countersFrom, type CampaignCounters, type CampaignRow } from "./campaigns";

/** Contacts per materialisation statement pair; D1 binds the chunk as one JSON parameter. */
export const MATERIALISE_CHUNK = 500;
const SEND_BATCH = 100;
const pendingStatuses = ["scheduled", "queued", "sending", "deferred"];
const encoder = new TextEncoder();

/** The ledger reference of one recipient's charge or release: the campaign's references sort together. */
export const recipientReference = (campaignId: string, messageId: string) => `${campaignId}:${messageId}`;

export async function loadCampaign(d1: D1Database, id: string): Promise<CampaignRow | undefined> {
  return drizzle(d1).select().from(campaigns).where(eq(campaigns.id, id)).get();
}

export type CampaignSender = {
  email: string;
  name: string;
  replyTo: string | null;
  domainId: string;
  domain: string | null;
  domainStatus: string | null;
};

export async function senderOf(d1: D1Database, campaign: CampaignRow): Promise<CampaignSender | undefined> {
  return drizzle(d1)
    .select({
      email: senders.email,
      name: senders.name,
      replyTo: senders.replyTo,
      domainId: senders.domainId,
      domain: domains.name,
      domainStatus: domains.status,
    })
    .from(senders)
    .leftJoin(domains, eq(domains.id, senders.domainId))
    .where(and(eq(senders.id, campaign.senderId ?? ""), eq(senders.accountId, campaign.accountId)))
    .get();
}

/** A scheduled campaign's time has come. False if it is no longer scheduled (cancelled meanwhile). */
export async function beginSending(d1: D1Database, campaignId: string): Promise<boolean> {
  const now = nowIso();
  const moved = await drizzle(d1)
    .update(campaigns)
    .set({ status: "sending", startedAt: now, updatedAt: now })
    .where(and(eq(campaigns.id, campaignId), eq(campaigns.status, "scheduled")))
    .returning({ id: campaigns.id })
    .get();
  return moved !== undefined;
}

/** The campaign cannot be sent (its sender went away): failed, with its whole reservation released. */
export async function failCampaign(d1: D1Database, campaign: CampaignRow, error: string): Promise<void> {
  const now = nowIso();
  await d1.batch([
    statement(
      d1,
      drizzle(d1)
        .update(campaigns)
        .set({ status: "failed", error, completedAt: now, updatedAt: now })
        .where(and(eq(campaigns.id, campaign.id), sql`${campaigns.status} IN ('scheduled', 'sending')`)),
    ),
    ...releaseStatements(d1, { accountId: campaign.accountId, amount: campaign.creditsReserved, referenceId: campaign.id, note: "campaign failed" }),
  ]);
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
  d1: D1Database,
  campaign: CampaignRow,
  sender: CampaignSender,
  where: ReturnType<typeof sql>,
  cursor: string,
  limit: number,
) {
  const contacts = await audiencePage(d1, where, cursor, limit);
  if (contacts.length === 0) return { inserted: 0, last: undefined };
  const rows = await Promise.all(
    contacts.map(async (contact) => ({ id: await messageIdFor(campaign.id, contact.id), contact_id: contact.id, email: contact.email })),
  );
  const chunk = JSON.stringify(rows);
  const [written] = await d1.batch([
    d1
      .prepare(
        `INSERT OR IGNORE INTO messages (id, account_id, source, status, from_address, from_name, domain_id, reply_to, subject, tags, metadata,
           content, credits_charged, campaign_id)
         SELECT value ->> '$.id', ?1, 'campaign', 'scheduled', ?2, ?3, ?4, ?5, ?6, ?7, '{}',
           json_object('kind', 'campaign', 'contact_id', value ->> '$.contact_id'), 1, ?8
         FROM json_each(?9)`,
      )
      .bind(
        campaign.accountId,
        sender.email,
        sender.name,
        sender.domainId,
        sender.replyTo,
        campaign.subject ?? "",
        JSON.stringify(campaign.tags),
        campaign.id,
        chunk,
      ),
    d1
      .prepare(
        `INSERT OR IGNORE INTO message_recipients (message_id, email, account_id, status)
         SELECT value ->> '$.id', value ->> '$.email', ?1, 'queued' FROM json_each(?2)`,
      )
      .bind(campaign.accountId, chunk),
  ]);
  return { inserted: written!.meta.changes, last: contacts.at(-1)!.id };
}

/**
 * Moves up to `limit` scheduled messages to `queued` and enqueues them (sendBatch, 100 per call). Status first,
 * then the queue: a consumer that gets a message before its row says `queued` would skip it. If the queue refuses,
 * the messages not enqueued go back to `scheduled` and the error propagates (the alarm retries).
 */
export async function enqueueScheduled(env: Env, campaignId: string, limit: number): Promise<number> {
  if (limit <= 0) return 0;
  const moved = await env.DB.prepare(
    `UPDATE messages SET status = 'queued', updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
     WHERE id IN (SELECT id FROM messages WHERE campaign_id = ?1 AND status = 'scheduled' LIMIT ?2) RETURNING id`,
  )
    .bind(campaignId, limit)
    .all<{ id: string }>();
  const ids = moved.results.map((row) => row.id);
  for (let i = 0; i < ids.length; i += SEND_BATCH) {
    const page = ids.slice(i, i + SEND_BATCH);
    try {
      await env.SEND_QUEUE.sendBatch(page.map((id) => ({ body: { message_id: id } satisfies SendQueueMessage, contentType: "json" as const })));
    } catch (error) {
      await env.DB.prepare("UPDATE messages SET status = 'scheduled' WHERE status = 'queued' AND id IN (SELECT value FROM json_each(?1))")
        .bind(JSON.stringify(ids.slice(i)))
        .run();
      throw error;
    }
  }
  return ids.length;
}

/** Whether any message of the campaign still waits to be enqueued (one row of the (campaign_id, status) index). */
export async function hasScheduled(d1: D1Database, campaignId: string): Promise<boolean> {
  const row = await d1.prepare("SELECT 1 AS found FROM messages WHERE campaign_id = ?1 AND status = 'scheduled' LIMIT 1").bind(campaignId).first();
  return row !== null;
}

/** A cancelled campaign's messages that were never enqueued: cancelled, their credits left to the settlement. */
export async function sweepCancelled(d1: D1Database, campaignId: string): Promise<void> {
  const scheduled = "SELECT id FROM messages WHERE campaign_id = ?1 AND status = 'scheduled'";
  await d1.batch([
    d1
      .prepare(
        `UPDATE message_recipients SET status = 'cancelled', updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE message_id IN (${scheduled}) AND status = 'queued'`,
      )
      .bind(campaignId),
    d1
      .prepare(
        "UPDATE messages SET status = 'cancelled', updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE campaign_id = ?1 AND status = 'scheduled'",
      )
      .bind(campaignId),
  ]);
}

/**
 * Completion: once no message of the campaign is pending, the campaign becomes `sent` (a cancelled one stays
 * `cancelled`), whatever is still reserved is released (reservation − per-recipient charges − per-recipient
 * releases), and a sent campaign emits campaign.completed with its counters, all in one D1 batch. Returns whether
 * the campaign is complete. Call it only once the fan-out has materialised and enqueued everything.
 */
export async function completeIfDone(env: Env, campaignId: string): Promise<{ complete: boolean; counters?: CampaignCounters }> {
  const d1 = env.DB;
  const [campaignRows, statusRows, ledgerRows] = await d1.batch([
    d1.prepare("SELECT account_id, name, status, credits_reserved, completed_at FROM campaigns WHERE id = ?1").bind(campaignId),
    d1.prepare("SELECT status, count(*) AS total FROM messages WHERE campaign_id = ?1 GROUP BY status").bind(campaignId),
    // The per-recipient references are `<campaign id>:<message id>`: a range of the (balance, kind, reference_id) index.
    d1
      .prepare(
        "SELECT count(*) AS total FROM credit_ledger WHERE balance = 'send' AND kind IN ('charge', 'release') AND reference_id > ?1 AND reference_id < ?2",
      )
      .bind(`${campaignId}:`, `${campaignId};`),
  ]);
  type CampaignState = { account_id: string; name: string; status: string; credits_reserved: number; completed_at: string | null };
  const campaign = campaignRows!.results[0] as CampaignState | undefined;
  if (!campaign) return { complete: true };
  const statuses = statusRows!.results as { status: string; total: number }[];
  const counters = countersFrom(statuses);
  if (campaign.completed_at) return { complete: true, counters };
  if (statuses.some((row) => pendingStatuses.includes(row.status) && row.total > 0)) return { complete: false, counters };

  const settled = (ledgerRows!.results[0] as { total: number }).total;
  const remaining = Math.max(0, campaign.credits_reserved - settled);
  const sent = campaign.status === "sending";
  const dedupeKey = `campaign.completed:${campaignId}`;
  await d1.batch([
    d1
      .prepare(
        `UPDATE campaigns SET status = CASE status WHEN 'sending' THEN 'sent' ELSE status END, completed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
           updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1 AND completed_at IS NULL AND status IN ('sending', 'cancelled')`,
      )
      .bind(campaignId),
    ...(remaining > 0
      ? releaseStatements(d1, { accountId: campaign.account_id, amount: remaining, referenceId: campaignId, note: "campaign settled" })
      : []),
    ...(sent
      ? [
          eventStatement(d1, {
            accountId: campaign.account_id,
            type: "campaign.completed",
            subjectId: campaignId,
            dedupeKey,
            data: { campaign_id: campaignId, name: campaign.name, ...counters },
          }),
        ]
      : []),
  ]);
  if (sent) await dispatchEvents(env, campaign.account_id, [dedupeKey]);
  return { complete: true, counters };
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
