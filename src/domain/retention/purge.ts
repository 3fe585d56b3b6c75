// Data retention: the cron deletes what is older than RETENTION_DAYS, so D1 and R2 stop growing with every email
// (docs/scaling.md, "Growing past one database"). What goes: finished messages with everything stored per message
// (recipients, tags, events and their webhook deliveries, delivery feedback, the R2 content object), then events
// that belong to no stored message, then old webhook delivery log rows, then received mail (inbound_emails and its
// R2 objects). What stays: pending mail, the credit ledger,
// suppressions, contacts, and the rollups reports read (daily_stats, usage_daily, campaign_links); a campaign's
// purged messages are added to campaign_purged_messages so GET /campaigns/{id} counts them still.
//
// Each run is bounded (a cron invocation has 1,000 D1 queries and little CPU): pages of ids are read, then deleted in
// one D1 batch that checks again, per id, that the row may go. Two runs racing, or a late bounce or open landing
// between the read and the batch, therefore delete nothing twice and nothing that changed meanwhile.

import { sql, type SQL } from "drizzle-orm";
import { config } from "../../config";
import { statement, type AccountDb, type Ctx, batch } from "../../db/client";
import { deleteOrphanedObjects } from "../../lib/r2";
import { purgeInbound } from "../inbound/store";
import type { MessageStatus } from "../sending/messages";

/**
 * Statuses the send pipeline is done with: no consumer attempts the message again (`unknown` is never resent). Late
 * feedback may still move one (sent → bounced), which sets `updated_at` and so starts its window again. `scheduled`,
 * `queued`, `sending` and `deferred` are still on their way and are never purged.
 */
const finalStatuses = ["sent", "delivered", "bounced", "failed", "suppressed", "unknown", "cancelled"] as const satisfies readonly MessageStatus[];

// A page's ids travel as one JSON parameter; its batch deletes ~10 rows per message (recipient, tags, ~4 events and
// their deliveries, feedback), so 200 messages keep one batch near 2,000 row deletes: short for D1's single writer.
const MESSAGES_PER_PAGE = 200;
const MESSAGE_PAGES_PER_RUN = 25;
/** The most messages one run purges: 5,000, or 480,000 a day at one run every 15 minutes. */
export const MESSAGES_PER_RUN = MESSAGES_PER_PAGE * MESSAGE_PAGES_PER_RUN;
const EVENTS_PER_PAGE = 500;
const EVENT_PAGES_PER_RUN = 10;
const DELIVERIES_PER_STATEMENT = 1000;
const DELIVERY_STATEMENTS_PER_RUN = 10;

export type PurgeSummary = { messages: number; contentObjects: number; events: number; webhookDeliveries: number; inboundEmails: number };

const dayMs = 86_400_000;
/** A webhook delivery is retried for about 21 hours; an event younger than this may still be read by a retry. */
const WEBHOOK_RETRY_HORIZON_MS = dayMs;

/** Where a run stops: what changed last before `cutoff` goes, unless an event after `eventsSince` keeps it a while. */
type Window = { cutoff: string; eventsSince: string };

const jsonIds = (ids: readonly string[]) => sql`(SELECT value FROM json_each(${JSON.stringify(ids)}))`;
// Constants, written into the SQL: bound, they would cost 7 of D1's 100 parameters at each of the many uses below.
const quoted = (status: MessageStatus) => sql.raw(`'${status}'`);
const finalList = sql.join(finalStatuses.map(quoted), sql`, `);

/**
 * Whether message `m` may go: finished, no status change since the cutoff, not part of a campaign still being
 * settled (its completion counts its messages), and every event of it dispatched and past its webhook retries. An
 * open or click does not keep a message: it is engagement, counted in the rollups, not a change of the message.
 * The unary `+` keeps SQLite from reading the first two terms through the (status, updated_at) index: beside
 * `m.id IN (page)` that index would scan every old message instead of looking up 200 ids.
 */
const purgeable = (window: Window) => sql`+m.status IN (${finalList}) AND +m.updated_at < ${window.cutoff}
  AND (m.campaign_id IS NULL OR EXISTS (SELECT 1 FROM campaigns AS c WHERE c.id = m.campaign_id AND c.completed_at IS NOT NULL))
  AND NOT EXISTS (SELECT 1 FROM events AS e WHERE e.subject_id = m.id AND (e.dispatched_at IS NULL OR e.created_at >= ${window.eventsSince}))`;

/**
 * The oldest purgeable messages of one status, over the (status, updated_at) index: a read stops at `limit` matches
 * however many old messages there are. (One statement per status rather than one UNION ALL: D1 allows a compound
 * SELECT of 5 terms, and IN over the statuses would sort every old message to find the oldest.)
 */
const oldestPurgeable = (window: Window, status: MessageStatus, limit: number) =>
  sql`SELECT m.id, m.updated_at AS updatedAt FROM messages AS m
    WHERE m.status = ${quoted(status)} AND m.updated_at < ${window.cutoff} AND ${purgeable(window)}
    ORDER BY m.updated_at LIMIT ${limit}`;

/** The statements deleting the messages among `ids` that are still purgeable, and everything stored for them. */
function messagePurgeStatements(db: AccountDb, ids: readonly string[], window: Window): D1PreparedStatement[] {
  const doomed = sql`(SELECT m.id FROM messages AS m WHERE m.id IN ${jsonIds(ids)} AND ${purgeable(window)})`;
  return [
    // Before the messages go: what GET /campaigns/{id} would have counted from them.
    statement(
      db,
      sql`INSERT INTO campaign_purged_messages (campaign_id, status, total)
        SELECT m.campaign_id, m.status, count(*) FROM messages AS m
        WHERE m.id IN ${jsonIds(ids)} AND m.campaign_id IS NOT NULL AND ${purgeable(window)}
        GROUP BY m.campaign_id, m.status
        ON CONFLICT (campaign_id, status) DO UPDATE SET total = total + excluded.total`,
    ),
    statement(db, deliveriesOfEvents(sql`e.subject_id IN ${doomed}`)),
    statement(db, sql`DELETE FROM events WHERE subject_id IN ${doomed}`),
    statement(db, sql`DELETE FROM delivery_feedback WHERE message_id IN ${doomed}`),
    statement(db, sql`DELETE FROM message_tags WHERE message_id IN ${doomed}`),
    statement(db, sql`DELETE FROM message_recipients WHERE message_id IN ${doomed}`),
    // Last, since every statement above finds the page through it.
    statement(db, sql`DELETE FROM messages WHERE id IN ${doomed} RETURNING id, content_key AS contentKey, raw_key AS rawKey`),
  ];
}

/**
 * Deletes the webhook deliveries of the events matching `where` (alias `e`). Deliveries are keyed by endpoint first,
 * so they are reached through the event's account's endpoints and the (endpoint_id, event_id, attempt) index.
 */
const deliveriesOfEvents = (where: SQL) =>
  sql`DELETE FROM webhook_deliveries WHERE id IN (SELECT d.id FROM events AS e
    JOIN webhook_endpoints AS w ON w.account_id = e.account_id
    JOIN webhook_deliveries AS d ON d.endpoint_id = w.id AND d.event_id = e.id
    WHERE ${where})`;

/** Returns whether every purgeable message is gone (false: the run's pages ran out first). */
async function purgeMessages(ctx: Ctx, window: Window, summary: PurgeSummary): Promise<boolean> {
  const { env, db } = ctx;
  for (let page = 0; page < MESSAGE_PAGES_PER_RUN; page++) {
    const candidates = await batch<{ id: string; updatedAt: string }>(
      db,
      finalStatuses.map((status) => statement(db, oldestPurgeable(window, status, MESSAGES_PER_PAGE))),
    );
    const results = candidates
      .flatMap((result) => result.results)
      .sort((a, b) => a.updatedAt.localeCompare(b.updatedAt))
      .slice(0, MESSAGES_PER_PAGE);
    if (results.length === 0) return true;
    const outcomes = await batch<{ id: string; contentKey: string | null; rawKey: string | null }>(
      db,
      messagePurgeStatements(
        db,
        results.map((row) => row.id),
        window,
      ),
    );
    const deleted = outcomes.at(-1)?.results ?? [];
    const keys = deleted.flatMap((row) => [row.contentKey, row.rawKey].filter((key) => key !== null));
    await deleteOrphanedObjects(env.BLOBS, keys, "retention: message content left in R2");
    summary.messages += deleted.length;
    summary.contentObjects += keys.length;
    if (results.length < MESSAGES_PER_PAGE) return true;
  }
  return false;
}

/**
 * Events of no stored message (domain warm-up, campaign, verification and automation events, and those a late open
 * wrote for a message purged meanwhile) once dispatched before the cutoff, over the (dispatched_at, …) index.
 * Events of a stored message stay with it. The index also holds the events of old messages not purged yet, which
 * this scan would step over page after page: run it only once the messages are caught up.
 */
async function purgeEvents(ctx: Ctx, cutoff: string, summary: PurgeSummary): Promise<void> {
  const { db } = ctx;
  for (let page = 0; page < EVENT_PAGES_PER_RUN; page++) {
    const { results } = await statement(
      db,
      sql`SELECT e.id FROM events AS e
        WHERE e.dispatched_at < ${cutoff} AND NOT EXISTS (SELECT 1 FROM messages WHERE id = e.subject_id)
        ORDER BY e.dispatched_at LIMIT ${EVENTS_PER_PAGE}`,
    ).all<{ id: string }>();
    if (results.length === 0) return;
    const ids = jsonIds(results.map((row) => row.id));
    const [deliveries, deleted] = await batch(db, [
      statement(db, deliveriesOfEvents(sql`e.id IN ${ids}`)),
      statement(db, sql`DELETE FROM events WHERE id IN ${ids}`),
    ]);
    summary.webhookDeliveries += deliveries!.meta.changes;
    summary.events += deleted!.meta.changes;
    if (results.length < EVENTS_PER_PAGE) return;
  }
}

/**
 * The delivery log past the cutoff, whatever its event (test events have none stored): endpoint by endpoint over the
 * (endpoint_id, created_at) index. A delivery is retried for about 21 hours, so none this old is still pending.
 */
async function purgeWebhookDeliveries(ctx: Ctx, cutoff: string, summary: PurgeSummary): Promise<void> {
  const { db } = ctx;
  for (let round = 0; round < DELIVERY_STATEMENTS_PER_RUN; round++) {
    const { meta } = await statement(
      db,
      sql`DELETE FROM webhook_deliveries WHERE id IN (SELECT d.id FROM webhook_endpoints AS w
        CROSS JOIN webhook_deliveries AS d ON d.endpoint_id = w.id AND d.created_at < ${cutoff}
        LIMIT ${DELIVERIES_PER_STATEMENT})`,
    ).run();
    summary.webhookDeliveries += meta.changes;
    if (meta.changes < DELIVERIES_PER_STATEMENT) return;
  }
}

/**
 * One bounded run of the retention purge (a cron task): what changed last before `now` − RETENTION_DAYS. Nothing
 * when RETENTION_DAYS is 0. What a run leaves (a backlog after the window is shortened) the next runs continue.
 */
export async function purgeExpiredData(ctx: Ctx, now = new Date()): Promise<PurgeSummary> {
  const { env } = ctx;
  const summary: PurgeSummary = { messages: 0, contentObjects: 0, events: 0, webhookDeliveries: 0, inboundEmails: 0 };
  const days = config(env).retentionDays;
  if (days === undefined) return summary;
  const window: Window = {
    cutoff: new Date(now.getTime() - days * dayMs).toISOString(),
    eventsSince: new Date(now.getTime() - WEBHOOK_RETRY_HORIZON_MS).toISOString(),
  };
  const caughtUp = await purgeMessages(ctx, window, summary);
  if (caughtUp) await purgeEvents(ctx, window.cutoff, summary);
  await purgeWebhookDeliveries(ctx, window.cutoff, summary);
  // Received mail (docs/inbound.md): kept as long as sent mail, with its raw bytes and attachments in R2.
  summary.inboundEmails = await purgeInbound(ctx, window.cutoff);
  return summary;
}
