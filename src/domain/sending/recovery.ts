// What the cron does for messages that no consumer will finish on its own. A message moves
// queued/deferred → sending (claimed by one consumer, before any byte goes to the provider) → its outcome. Two
// things can leave it hanging: its queue message is gone (the queue refused it at acceptance and the undo failed too,
// or a deferred retry was lost), or the consumer that claimed it ended before recording the outcome.

import type { Ctx } from "../../db/client";
import { and, eq, exists, inArray, lt, or, sql } from "drizzle-orm";
import { config } from "../../config";
import { messageRecipients, messages } from "../../db/schema";
import { logWarning } from "../../lib/log";
import { enqueueMessages } from "./enqueue";

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
export async function sweepStaleClaims(ctx: Ctx, now = new Date()): Promise<number> {
  const { db } = ctx;
  const cutoff = iso(new Date(now.getTime() - claimTimeoutSeconds * 1000));
  const stale = db
    .select({ id: messages.id })
    .from(messages)
    .where(and(eq(messages.status, "sending"), lt(messages.claimedAt, cutoff)))
    .orderBy(messages.claimedAt)
    .limit(sweepLimit);
  const [, marked] = await db.batch([
    db
      .update(messageRecipients)
      .set({ status: "unknown", smtpResponse: unknownResponse, updatedAt: iso(now) })
      .where(and(inArray(messageRecipients.messageId, stale), inArray(messageRecipients.status, ["queued", "deferred"]))),
    db
      .update(messages)
      .set({ status: "unknown", smtpResponse: unknownResponse, updatedAt: iso(now) })
      .where(inArray(messages.id, stale))
      .returning({ id: messages.id }),
  ]);
  const ids = marked.map((row) => row.id);
  if (ids.length > 0) logWarning("send: stale delivery claims marked unknown", { message_ids: ids });
  return ids.length;
}

/**
 * Messages waiting for a queue message that no longer exists: `queued` for 15 minutes, or `deferred` 15 minutes past
 * their retry time. They are enqueued again; a copy that was not lost after all does no harm, since only one
 * consumer can claim a message. Returns how many were enqueued.
 */
export async function requeueLostMessages(ctx: Ctx, now = new Date()): Promise<number> {
  const { env, db } = ctx;
  const baseSeconds = config(env).send.retryBaseSeconds;
  const pending = db
    .select({ id: messageRecipients.messageId })
    .from(messageRecipients)
    .where(and(sql`${messageRecipients.messageId} = ${messages.id}`, inArray(messageRecipients.status, ["queued", "deferred"])));
  const rows = await db
    .select({ id: messages.id })
    .from(messages)
    .where(
      and(
        or(
          and(eq(messages.status, "queued"), lt(messages.updatedAt, iso(new Date(now.getTime() - lostAfterSeconds * 1000)))),
          // deferred past its retry time: the consumer's back-off (base × 2^(attempts − 1)) plus the grace period
          and(
            eq(messages.status, "deferred"),
            sql`(julianday(${iso(now)}) - julianday(${messages.updatedAt})) * 86400 > ${baseSeconds} * (1 << MIN(MAX(${messages.attempts} - 1, 0), 20)) + ${lostAfterSeconds}`,
            // Held back by a warm-up cap: not due before its next attempt.
            sql`(${messages.nextAttemptAt} IS NULL OR (julianday(${iso(now)}) - julianday(${messages.nextAttemptAt})) * 86400 > ${lostAfterSeconds})`,
          ),
        ),
        exists(pending),
      ),
    )
    .limit(sweepLimit)
    .all();
  const ids = rows.map((row) => row.id);
  const { refused, error } = await enqueueMessages(
    ctx,
    ids.map((id) => ({ id })),
  );
  // What the queue refused is still lost: the next run finds it again.
  if (refused.length > 0) throw error;
  if (ids.length > 0) logWarning("send: messages without a queue message enqueued again", { message_ids: ids });
  return ids.length;
}
