import { inDatabase, isAccountDatabase, openCtx, type DatabaseName } from "../db/client";
import { sendQueueMessageSchema } from "../domain/sending/content";
import { abandonMessages, deliverMessages, type DeliveryOptions } from "../domain/sending/deliver";
import { logError } from "../lib/log";

/**
 * The message ids of a send-queue batch, by the account database each message is in. Unreadable bodies (and ones
 * naming a database this Worker has no binding for) are acknowledged, since retrying cannot make them readable.
 */
function messageIds(batch: MessageBatch<unknown>, env: Env): Map<DatabaseName, Map<string, Message<unknown>>> {
  const wanted = new Map<DatabaseName, Map<string, Message<unknown>>>();
  for (const queued of batch.messages) {
    const parsed = sendQueueMessageSchema.safeParse(queued.body);
    if (parsed.success && isAccountDatabase(env, parsed.data.database)) {
      const inOne = wanted.get(parsed.data.database) ?? new Map<string, Message<unknown>>();
      inOne.set(parsed.data.message_id, queued);
      wanted.set(parsed.data.database, inOne);
    } else {
      logError("send queue: unreadable message body dropped", { body: queued.body });
      queued.ack();
    }
  }
  return wanted;
}

/**
 * Delivers a batch (see deliverMessages), the messages of each account database together, and acknowledges each queue
 * message, or retries it after its delay.
 */
export async function consumeSendBatch(batch: MessageBatch<unknown>, env: Env, options?: DeliveryOptions): Promise<void> {
  const ctx = openCtx(env);
  await Promise.all(
    [...messageIds(batch, env)].map(async ([database, wanted]) => {
      const result = await deliverMessages(inDatabase(ctx, database), [...wanted.keys()], options);
      for (const [id, queued] of wanted) {
        const retry = result.get(id);
        if (retry) queued.retry({ delaySeconds: retry.retryDelaySeconds });
        else queued.ack();
      }
    }),
  );
}

/** Dead-letter queue: the queue gave up on these messages; they are failed and refunded, never left queued. */
export async function consumeSendDeadLetters(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const ctx = openCtx(env);
  for (const [database, wanted] of messageIds(batch, env)) await abandonMessages(inDatabase(ctx, database), [...wanted.keys()]);
  batch.ackAll();
}
