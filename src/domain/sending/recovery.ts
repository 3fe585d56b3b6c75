// What the cron does for messages that no consumer will finish on its own. A message moves
// queued/deferred → sending (claimed by one consumer, before any byte goes to the provider) → its outcome. Two
// things can leave it hanging: its queue message is gone (the queue refused it at acceptance and the undo failed too,
// or a deferred retry was lost), or the consumer that claimed it ended before recording the outcome.

import { config } from "../../config";
import { logWarning } from "../../lib/log";
import type { SendQueueMessage } from "./content";

/**
 * A claim older than this belongs to a consumer invocation that has ended: Cloudflare Queues stops a consumer after
 * 15 minutes of wall time, so nobody is still sending it.
 */
export const claimTimeoutSeconds = 15 * 60;
/** A queued message this much older than its expected delivery time has lost its queue message. */
const lostAfterSeconds = 15 * 60;
const sweepLimit = 500;
const unknownResponse = "delivery attempt interrupted after the hand-off may have happened; not retried to avoid a duplicate";

const iso = (date: Date) => date.toISOString();

/**
 * Claims whose consumer died: the message may or may not have reached the provider, and we cannot tell. Sending it
 * again could deliver it twice, so the message and its pending recipients become `unknown`: shown as such, never
 * resent, not refunded. (A consumer that could not write its outcome retries the write first; see the send
 * consumer.) Returns how many messages were marked.
 */
export async function sweepStaleClaims(env: Env, now = new Date()): Promise<number> {
  const cutoff = iso(new Date(now.getTime() - claimTimeoutSeconds * 1000));
  const stale = `SELECT id FROM messages WHERE status = 'sending' AND claimed_at < ?1 ORDER BY claimed_at LIMIT ${sweepLimit}`;
  const [, marked] = await env.DB.batch([
    env.DB.prepare(
      `UPDATE message_recipients SET status = 'unknown', smtp_response = ?2, updated_at = ?3
       WHERE message_id IN (${stale}) AND status IN ('queued', 'deferred')`,
    ).bind(cutoff, unknownResponse, iso(now)),
    env.DB.prepare(`UPDATE messages SET status = 'unknown', smtp_response = ?2, updated_at = ?3 WHERE id IN (${stale}) RETURNING id`).bind(
      cutoff,
      unknownResponse,
      iso(now),
    ),
  ]);
  const ids = ((marked?.results ?? []) as { id: string }[]).map((row) => row.id);
  if (ids.length > 0) logWarning("send: stale delivery claims marked unknown", { message_ids: ids });
  return ids.length;
}

/**
 * Messages waiting for a queue message that no longer exists: `queued` for 15 minutes, or `deferred` 15 minutes past
 * their retry time. They are enqueued again; a copy that was not lost after all does no harm, since only one
 * consumer can claim a message. Returns how many were enqueued.
 */
export async function requeueLostMessages(env: Env, now = new Date()): Promise<number> {
  const baseSeconds = config(env).send.retryBaseSeconds;
  const rows = await env.DB.prepare(
    `SELECT id FROM messages
     WHERE ((status = 'queued' AND updated_at < ?1)
        OR (status = 'deferred' AND (julianday(?2) - julianday(updated_at)) * 86400 > ?3 * (1 << MIN(MAX(attempts - 1, 0), 20)) + ?4))
       AND EXISTS (SELECT 1 FROM message_recipients r WHERE r.message_id = messages.id AND r.status IN ('queued', 'deferred'))
     LIMIT ${sweepLimit}`,
  )
    .bind(iso(new Date(now.getTime() - lostAfterSeconds * 1000)), iso(now), baseSeconds, lostAfterSeconds)
    .all<{ id: string }>();
  const ids = rows.results.map((row) => row.id);
  // sendBatch takes at most 100 messages.
  for (let i = 0; i < ids.length; i += 100) {
    await env.SEND_QUEUE.sendBatch(ids.slice(i, i + 100).map((id) => ({ body: { message_id: id } satisfies SendQueueMessage, contentType: "json" as const })));
  }
  if (ids.length > 0) logWarning("send: messages without a queue message enqueued again", { message_ids: ids });
  return ids.length;
}
