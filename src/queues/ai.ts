import { inDatabase, isAccountDatabase, openCtx } from "../db/client";
import { processAiRequest } from "../domain/ai/generation";
import { aiQueueMessageSchema } from "../domain/ai/requests";
import { failAiRequest } from "../domain/ai/requests";
import { logError } from "../lib/log";

// Generations are slow (seconds to minutes each) and independent: a batch runs them side by side.
export async function consumeAiRequests(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const ctx = openCtx(env);
  await Promise.all(
    batch.messages.map(async (message) => {
      const body = aiQueueMessageSchema.safeParse(message.body);
      if (!body.success || !isAccountDatabase(env, body.data.database)) {
        // Retried into the dead-letter queue, where it stays visible instead of being dropped.
        logError("unknown ai queue message", { queue: batch.queue, message_id: message.id, issues: body.error?.issues });
        message.retry();
        return;
      }
      try {
        const outcome = await processAiRequest(inDatabase(ctx, body.data.database), body.data.request_id);
        if (outcome.kind === "retry") message.retry({ delaySeconds: outcome.delaySeconds });
        else message.ack();
      } catch (error) {
        // D1 or a bug, not the provider: this message alone goes back to the queue, then to the dead-letter queue.
        logError("ai: generation failed", { request_id: body.data.request_id, error: String(error) });
        message.retry();
      }
    }),
  );
}

/** Requests whose consumer kept failing (not the provider: that is retried and failed above) end `failed`. */
export async function consumeAiDeadLetters(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const ctx = openCtx(env);
  for (const message of batch.messages) {
    const body = aiQueueMessageSchema.safeParse(message.body);
    if (body.success && isAccountDatabase(env, body.data.database)) {
      await failAiRequest(
        inDatabase(ctx, body.data.database).db,
        body.data.request_id,
        "The generation stopped after repeated errors; it does not count against the quota",
      );
    } else {
      logError("unknown ai dead letter", { queue: batch.queue, message_id: message.id });
    }
    message.ack();
  }
}
