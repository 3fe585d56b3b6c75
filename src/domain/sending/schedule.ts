// Scheduled sends (POST /send with scheduled_at): accepted and charged at once, stored `scheduled` with the time,
// sent at that time. A message due within the queue's delay limit gets a delayed queue message when it is accepted
// or moved; a later one is handed to the queue by the cron once it comes within reach. Whichever queue message
// arrives, the consumer's claim only takes a `scheduled` message whose time has come (deliver.ts), so a copy that
// arrives early (the time was moved) is put back for the rest of the wait, and one that arrives after a cancel
// finds nothing to send. Cancelling is a conditional update too: of a cancel and a claim, only one succeeds.

import { and, eq, inArray, isNotNull, isNull, lte, sql } from "drizzle-orm";
import { sqlNow, statement, type AccountDb, batch, type Ctx } from "../../db/client";
import { messageRecipients, messages } from "../../db/schema";
import { logWarning } from "../../lib/log";
import { refuseTestKeyOnLive, type ApiKeyMode, type LiveKeyRequired } from "../accounts/api-keys";
import { refundStatements } from "../credits/ledger";
import { eventStatement } from "../events/events";
import { owned } from "../owned";
import { dispatchEvents } from "../webhooks/dispatch";
import { enqueueMessages } from "./enqueue";
import { displayFrom } from "./mime";
import type { MessageStatus } from "./messages";

/** How far ahead a send can be scheduled. */
export const scheduleLimitDays = 30;
/** Cloudflare Queues' longest delivery delay (`delaySeconds`): 12 hours. */
export const queueDelayLimitSeconds = 12 * 60 * 60;
// A queue message is only sent for a time this far inside the limit, and the cron takes over from this far inside
// it: times on the boundary are covered twice rather than not at all (a second copy finds nothing to claim).
const delayMarginSeconds = 60;
// The cron runs every 15 minutes: it hands over what falls due before its next run, with a margin.
const cronReachSeconds = 20 * 60;
// Still `scheduled` this long after its time: its queue message was lost, so the cron sends another.
const overdueSeconds = 5 * 60;
const sweepLimit = 500;

/** Why `at` cannot be a send's scheduled time, or undefined when it can. */
export function checkScheduledAt(at: Date, now: Date): string | undefined {
  if (Number.isNaN(at.getTime())) return "Must be an ISO 8601 date and time";
  if (at.getTime() <= now.getTime()) return "Must be in the future; leave scheduled_at out to send now";
  if (at.getTime() > now.getTime() + scheduleLimitDays * 86_400_000) return `At most ${scheduleLimitDays} days ahead`;
  return undefined;
}

/** The queue delay (whole seconds, at least 0) that delivers at `at`, or undefined when that is past the queue's limit. */
export function scheduledDelay(at: Date, now: Date): number | undefined {
  const seconds = Math.max(0, Math.ceil((at.getTime() - now.getTime()) / 1000));
  return seconds <= queueDelayLimitSeconds - delayMarginSeconds ? seconds : undefined;
}

// A test key may move or cancel only test mail: live mail is not its to change (docs/api.md).
const isScheduledSend = (accountId: string, messageId: string, callerMode: ApiKeyMode) =>
  and(
    eq(messages.id, messageId),
    eq(messages.accountId, accountId),
    eq(messages.status, "scheduled"),
    isNotNull(messages.scheduledAt),
    callerMode === "test" ? eq(messages.testMode, true) : undefined,
  );

/** Why a message cannot be moved or cancelled: it does not exist, a test key asked about live mail, or its state says so. */
export type ScheduleRefusal = { kind: "not_found" } | LiveKeyRequired | { kind: "conflict"; status: MessageStatus; reason: string };

export type RescheduleOutcome =
  | { kind: "rescheduled"; message: { id: string; status: "scheduled"; scheduled_at: string } }
  | { kind: "invalid"; errors: Record<string, string[]> }
  | ScheduleRefusal;

/** Why the message is not waiting any more, in the words of a 409. */
function refusalOf(
  row: Pick<typeof messages.$inferSelect, "status" | "campaignId" | "testMode"> | undefined,
  action: "moved" | "cancelled",
  callerMode: ApiKeyMode,
): ScheduleRefusal {
  if (!row) return { kind: "not_found" };
  const liveOnly = refuseTestKeyOnLive(
    { mode: callerMode },
    row.testMode ? "test" : "live",
    `${action === "moved" ? "move" : "cancel"} a live message`,
  );
  if (liveOnly) return liveOnly;
  if (row.campaignId) {
    return { kind: "conflict", status: row.status, reason: `A campaign message; its campaign's send time and cancel apply to it` };
  }
  if (row.status === "cancelled") return { kind: "conflict", status: row.status, reason: "The message was already cancelled" };
  return {
    kind: "conflict",
    status: row.status,
    reason:
      action === "moved"
        ? `Only a scheduled message can be moved; this one is ${row.status}`
        : `The message has left (it is ${row.status}); only a scheduled or queued message can be cancelled`,
  };
}

/** The refusal for a message a conditional update did not change: read again, since it changed since (or never was). */
async function refusal(
  db: AccountDb,
  accountId: string,
  messageId: string,
  action: "moved" | "cancelled",
  callerMode: ApiKeyMode,
): Promise<ScheduleRefusal> {
  const row = await db
    .select({ status: messages.status, campaignId: messages.campaignId, testMode: messages.testMode })
    .from(messages)
    .where(owned(messages, accountId, messageId))
    .get();
  return refusalOf(row, action, callerMode);
}

/**
 * Moves a scheduled send to `at`, while it is still scheduled (one conditional update), and gives it a delayed queue
 * message when the new time is within the queue's limit. A queue message for the old time finds it not due yet.
 */
export async function rescheduleMessage(
  ctx: Ctx,
  caller: { accountId: string; mode: ApiKeyMode },
  messageId: string,
  at: Date,
  now = new Date(),
): Promise<RescheduleOutcome> {
  const { db } = ctx;
  const { accountId, mode } = caller;
  const wrong = checkScheduledAt(at, now);
  if (wrong) return { kind: "invalid", errors: { scheduled_at: [wrong] } };
  const scheduledAt = at.toISOString();
  const moved = await db
    .update(messages)
    .set({ scheduledAt, updatedAt: now.toISOString() })
    .where(isScheduledSend(accountId, messageId, mode))
    .returning({ id: messages.id });
  if (moved.length === 0) return refusal(db, accountId, messageId, "moved", mode);
  const delaySeconds = scheduledDelay(at, now);
  if (delaySeconds !== undefined) {
    const { refused, error } = await enqueueMessages(ctx, [{ id: messageId, delaySeconds }]);
    // Not lost: the cron hands over a scheduled message that is overdue.
    if (refused.length > 0)
      logWarning("send: a moved scheduled message was not queued; the cron will", { message_id: messageId, error: String(error) });
  }
  return { kind: "rescheduled", message: { id: messageId, status: "scheduled", scheduled_at: scheduledAt } };
}

export type CancelOutcome = { kind: "cancelled"; message: { id: string; status: "cancelled"; credits_refunded: number } } | ScheduleRefusal;

/**
 * Cancels a scheduled or still queued API/SMTP message: status `cancelled`, its waiting recipients `cancelled`, one
 * credit back per charged recipient and a `relay.cancelled` event, all in one transaction that only applies if the
 * conditional update won (a consumer that claimed the message first makes it a 409). Refunds use the consumer's
 * per-recipient references, so the ledger's unique index gives each credit back once whatever else happens.
 */
export async function cancelMessage(ctx: Ctx, caller: { accountId: string; mode: ApiKeyMode }, messageId: string): Promise<CancelOutcome> {
  const { db } = ctx;
  const { accountId, mode } = caller;
  const [rows, waiting] = await db.batch([
    // What the answer and the event need, not the whole row: its inline content can be up to 64 KB.
    db
      .select({
        status: messages.status,
        campaignId: messages.campaignId,
        creditsCharged: messages.creditsCharged,
        testMode: messages.testMode,
        fromName: messages.fromName,
        fromAddress: messages.fromAddress,
        subject: messages.subject,
        source: messages.source,
        stream: messages.stream,
        tags: messages.tags,
        metadata: messages.metadata,
        scheduledAt: messages.scheduledAt,
      })
      .from(messages)
      .where(owned(messages, accountId, messageId)),
    db
      .select({ email: messageRecipients.email })
      .from(messageRecipients)
      .where(and(eq(messageRecipients.messageId, messageId), eq(messageRecipients.status, "queued"))),
  ]);
  const message = rows[0];
  // The row just read says why; reading it again would only cost a round trip.
  if (!message || (mode === "test" && !message.testMode) || message.campaignId || (message.status !== "scheduled" && message.status !== "queued")) {
    return refusalOf(message, "cancelled", mode);
  }
  const refunded = message.creditsCharged > 0 && !message.testMode ? waiting.map((row) => row.email) : [];
  const cancelled = sql`EXISTS (SELECT 1 FROM messages WHERE id = ${messageId} AND status = 'cancelled' AND campaign_id IS NULL)`;
  const dedupeKey = `relay.cancelled:${messageId}`;
  const [update] = await batch(db, [
    statement(
      db,
      db
        .update(messages)
        .set({ status: "cancelled", smtpResponse: "cancelled by request", updatedAt: sqlNow })
        .where(
          and(
            eq(messages.id, messageId),
            eq(messages.accountId, accountId),
            inArray(messages.status, ["scheduled", "queued"]),
            isNull(messages.campaignId),
          ),
        ),
    ),
    ...refunded.flatMap((email) =>
      refundStatements(db, { accountId, balance: "send", amount: 1, referenceId: `${messageId}:${email}`, note: "cancelled" }, cancelled),
    ),
    statement(
      db,
      db
        .update(messageRecipients)
        .set({ status: "cancelled", updatedAt: sqlNow })
        .where(and(eq(messageRecipients.messageId, messageId), eq(messageRecipients.status, "queued"), cancelled)),
    ),
    eventStatement(
      db,
      {
        accountId,
        type: "relay.cancelled",
        subjectId: messageId,
        dedupeKey,
        data: {
          message_id: messageId,
          from: displayFrom(message.fromName ?? undefined, message.fromAddress),
          subject: message.subject,
          source: message.source,
          stream: message.stream,
          tags: message.tags,
          metadata: message.metadata,
          ...(message.testMode ? { test: true } : {}),
          recipients: waiting.map((row) => row.email),
          credits_refunded: refunded.length,
          scheduled_at: message.scheduledAt,
        },
      },
      cancelled,
    ),
  ]);
  // Claimed by a consumer (or cancelled by another request) between the read and this write: nothing was changed.
  if (update!.meta.changes === 0) return refusal(db, accountId, messageId, "cancelled", mode);
  ctx.waitUntil(dispatchEvents(ctx, accountId, [dedupeKey]));
  return { kind: "cancelled", message: { id: messageId, status: "cancelled", credits_refunded: refunded.length } };
}

/**
 * The cron's part: scheduled sends that fall due before its next run and have no queue message, because they were
 * scheduled (or moved) further ahead than the queue's delay limit, or because theirs was lost (still scheduled well
 * past their time). Each gets a queue message delayed to its time. Returns how many were handed over.
 */
export async function enqueueDueScheduledMessages(ctx: Ctx, now = new Date()): Promise<number> {
  const { db } = ctx;
  const reach = new Date(now.getTime() + cronReachSeconds * 1000).toISOString();
  const overdue = new Date(now.getTime() - overdueSeconds * 1000).toISOString();
  const rows = await db
    .select({ id: messages.id, scheduledAt: messages.scheduledAt })
    .from(messages)
    .where(
      and(
        eq(messages.status, "scheduled"),
        isNotNull(messages.scheduledAt),
        lte(messages.scheduledAt, reach),
        sql`(${messages.scheduledAt} < ${overdue}
          OR (julianday(${messages.scheduledAt}) - julianday(${messages.updatedAt})) * 86400 > ${queueDelayLimitSeconds - 2 * delayMarginSeconds})`,
      ),
    )
    .orderBy(messages.scheduledAt)
    .limit(sweepLimit)
    .all();
  const { refused, error } = await enqueueMessages(
    ctx,
    rows.map((row) => ({ id: row.id, delaySeconds: scheduledDelay(new Date(row.scheduledAt!), now) ?? 0 })),
  );
  // What the queue refused is still scheduled: the next run finds it again.
  if (refused.length > 0) throw error;
  return rows.length;
}
