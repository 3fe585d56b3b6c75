// The accept path's last step (accept.ts): the stored and charged messages onto the send queue, or, when the queue
// refuses them, the acceptance undone.

import { and, eq, inArray } from "drizzle-orm";
import { inJsonArray, statement, batch, type Ctx } from "../../db/client";
import { messageRecipients, messages } from "../../db/schema";
import { logError } from "../../lib/log";
import type { Account } from "../accounts/accounts";
import { refundStatements } from "../credits/ledger";
import { releaseDailySends, type DailyReservation } from "./daily-limit";
import { enqueueMessages, type SendRequest } from "./enqueue";
import { releaseKeyStatement, type Idempotency } from "./idempotency";
import { scheduledDelay } from "./schedule";

/** What queueing a stored message, or undoing it, needs to know of it (accept.ts plans more). */
export type StoredMessage = {
  id: string;
  input: { scheduledAt?: Date };
  accepted: { status: "queued" | "scheduled" | "suppressed" };
  charge: number;
  recipients: { email: string; status: "queued" | "suppressed" }[];
};

/**
 * The messages are stored and charged; one that cannot be queued must not stay `queued` with nobody to send it.
 * What is due now, or within the queue's delay limit (a delayed queue message), goes in one sendBatch; a later
 * scheduled send is the cron's (schedule.ts). One retry, then the acceptance is undone (failed, refunded per
 * recipient, idempotency key freed) and the client gets a 429 with Retry-After. The undo only applies while a
 * message is still waiting, so a send that did reach the queue after all is never refunded. Returns false if undone.
 */
export async function enqueueOrUndo(
  ctx: Ctx,
  account: Account,
  planned: StoredMessage[],
  day: DailyReservation | undefined,
  idempotency: Idempotency | undefined,
  now: Date,
): Promise<boolean> {
  const { env, db } = ctx;
  const requests: SendRequest[] = planned.flatMap((plan) => {
    if (plan.accepted.status === "suppressed") return [];
    if (!plan.input.scheduledAt) return [{ id: plan.id }];
    const delaySeconds = scheduledDelay(plan.input.scheduledAt, now);
    return delaySeconds === undefined ? [] : [{ id: plan.id, delaySeconds }];
  });
  if (requests.length === 0) return true;
  for (let attempt = 1; ; attempt++) {
    const { refused, error } = await enqueueMessages(ctx, requests);
    if (refused.length === 0) return true;
    if (attempt === 2) {
      logError("send queue unavailable; undoing the acceptance", { message_ids: refused, error: String(error) });
      break;
    }
  }
  const ids = planned.filter((plan) => plan.accepted.status !== "suppressed").map((plan) => plan.id);
  try {
    const claimed = await db
      .update(messages)
      .set({ status: "failed", smtpResponse: "not queued: queue unavailable" })
      .where(and(inJsonArray(messages.id, ids), inArray(messages.status, ["queued", "scheduled"])))
      .returning({ id: messages.id });
    const undone = new Set(claimed.map((row) => row.id));
    if (undone.size > 0) {
      await batch(db, [
        statement(
          db,
          db
            .update(messageRecipients)
            .set({ status: "failed" })
            .where(and(inJsonArray(messageRecipients.messageId, [...undone]), eq(messageRecipients.status, "queued"))),
        ),
        // The consumer's refund reference per recipient, so the ledger's unique index never lets both apply.
        ...planned
          .filter((plan) => undone.has(plan.id) && plan.charge > 0)
          .flatMap((plan) =>
            plan.recipients
              .filter((recipient) => recipient.status === "queued")
              .flatMap((recipient) =>
                refundStatements(db, {
                  accountId: account.id,
                  balance: "send",
                  amount: 1,
                  referenceId: `${plan.id}:${recipient.email}`,
                  note: "queue unavailable",
                }),
              ),
          ),
        ...(idempotency ? [releaseKeyStatement(db, account.id, idempotency)] : []),
      ]);
      if (day) await releaseDailySends(env, account, day);
    }
  } catch (error) {
    // Stored, charged and not queued: visible in the log with its ids so an operator can requeue or refund them.
    logError("undoing unqueued messages failed; they stay queued", { message_ids: ids, error: String(error) });
  }
  return false;
}
