import { inDatabase, isAccountDatabase, openCtx } from "../db/client";
import { z } from "zod";
import { contactImportMessageSchema, failContactImport, type ContactImportMessage } from "../domain/contacts/import";
import { verificationChunkSchema } from "../domain/verification/jobs";
import { logError } from "../lib/log";
import { consumeContactImportMessage } from "./contact-import";
import { consumeVerificationChunks, failVerificationChunks, type ChunkDelivery } from "./verification";

// The verify queue carries every kind of background bulk work; a message's `kind` says which consumer owns it.
const verifyQueueMessageSchema = z.discriminatedUnion("kind", [verificationChunkSchema, contactImportMessageSchema]);

type Routed = { chunks: ChunkDelivery[]; imports: { message: Message<unknown>; body: ContactImportMessage }[] };

function route(batch: MessageBatch<unknown>, env: Env, onUnknown: (message: Message<unknown>) => void): Routed {
  const routed: Routed = { chunks: [], imports: [] };
  for (const message of batch.messages) {
    const parsed = verifyQueueMessageSchema.safeParse(message.body);
    if (!parsed.success) {
      logError("unknown verify queue message", { queue: batch.queue, message_id: message.id, issues: parsed.error.issues });
      onUnknown(message);
      continue;
    }
    if (!isAccountDatabase(env, parsed.data.database)) {
      logError("verify queue message for an account database this Worker has no binding for", { queue: batch.queue, message_id: message.id });
      onUnknown(message);
      continue;
    }
    switch (parsed.data.kind) {
      case "verification_chunk":
        routed.chunks.push({ message, chunk: parsed.data });
        break;
      case "contact_import":
        routed.imports.push({ message, body: parsed.data });
        break;
    }
  }
  return routed;
}

export async function consumeVerifyQueue(batch: MessageBatch<unknown>, env: Env, _ctx: ExecutionContext): Promise<void> {
  // An unknown body is retried into the dead-letter queue, where it stays visible instead of being dropped.
  const { chunks, imports } = route(batch, env, (message) => message.retry());
  await Promise.all([
    chunks.length > 0 ? consumeVerificationChunks(chunks, env) : undefined,
    // Imports run one after another: each spends a time budget of D1 batches, and they share the invocation.
    (async () => {
      for (const { message, body } of imports) await consumeContactImportMessage(message, body, env);
    })(),
  ]);
}

/** Messages that exhausted their retries: their job or import is marked failed, so nothing stays `processing`. */
export async function consumeVerifyDeadLetters(batch: MessageBatch<unknown>, env: Env, _ctx: ExecutionContext): Promise<void> {
  const ctx = openCtx(env);
  // Nothing more can be done with an unknown body than the log line `route` writes.
  const { chunks, imports } = route(batch, env, (message) => message.ack());
  if (chunks.length > 0) await failVerificationChunks(chunks, env);
  for (const { message, body } of imports) {
    await failContactImport(
      inDatabase(ctx, body.database),
      body.import_id,
      "The import stopped after repeated errors; rows imported so far are kept",
    );
    message.ack();
  }
}
