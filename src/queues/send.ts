import { openCtx } from "../db/client";
import { sendQueueMessageSchema } from "../domain/sending/content";
import { abandonMessages, deliverMessages, type DeliveryOptions } from "../domain/sending/deliver";
import { logError } from "../lib/log";

/** Message ids of a send-queue batch; unreadable bodies are acknowledged, since retrying cannot make them readable. */
function messageIds(batch: MessageBatch<unknown>): Map<string, Message<unknown>> {
  const wanted = new Map<string, Message<unknown>>();
  for (const queued of batch.messages) {
    const parsed = sendQueueMessageSchema.safeParse(queued.body);
    if (parsed.success) wanted.set(parsed.data.message_id, queued);
    else {
      logError("send queue: unreadable message body dropped", { body: queued.body });
      queued.ack();
    }
  }
  return wanted;
}

/** Delivers a batch (see deliverMessages) and acknowledges each queue message, or retries it after its delay. */
export async function consumeSendBatch(batch: MessageBatch<unknown>, env: Env, options?: DeliveryOptions): Promise<void> {
  const ctx = openCtx(env);
  const wanted = messageIds(batch);
  if (wanted.size === 0) return;
  const result = await deliverMessages(ctx, [...wanted.keys()], options);
  for (const [id, queued] of wanted) {
    const retry = result.get(id);
    if (retry) queued.retry({ delaySeconds: retry.retryDelaySeconds });
    else queued.ack();
  }
}

/** Dead-letter queue: the queue gave up on these messages; they are failed and refunded, never left queued. */
export async function consumeSendDeadLetters(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const ctx = openCtx(env);
  const ids = [...messageIds(batch).keys()];
  if (ids.length > 0) await abandonMessages(ctx, ids);
  batch.ackAll();
}
