import { inDatabase, openCtx } from "../db/client";
import { createResolver } from "../domain/dns/doh";
import { readJobInput, type JobInput, type VerificationChunkMessage } from "../domain/verification/jobs";
import { failVerificationJob } from "../domain/verification/job-finish";
import { processVerificationChunk } from "../domain/verification/job-chunk";
import type { VerificationJob } from "../domain/verification/job-rows";
import { createMailboxProber } from "../domain/verification/mailbox";
import { logError } from "../lib/log";
import { config } from "../config";

/** A queue message whose body was parsed as a verification chunk by the verify queue's router. */
export type ChunkDelivery = { message: Message<unknown>; chunk: VerificationChunkMessage };

// Retries of a chunk that threw (D1 or R2 trouble; DNS failures are results, not errors): 10 s, 20 s, 40 s, then
// the DLQ (wrangler.toml: max_retries 3), which fails the job and refunds what it did not verify.
const RETRY_BASE_SECONDS = 10;

/**
 * The chunks of one queue batch, run concurrently with ONE resolver, so a domain shared by chunks of the batch is
 * looked up once, and each job's input read from R2 once. Each message is acked or retried on its own.
 */
export async function consumeVerificationChunks(deliveries: ChunkDelivery[], env: Env): Promise<void> {
  const ctx = openCtx(env);
  // No waitUntil: the D1 cache write finishes before the chunk does, so the next batch's chunks find it.
  const settings = config(env);
  const resolver = createResolver({ url: settings.dohUrl, db: ctx.shared });
  const prober = settings.prober && createMailboxProber(settings.prober);
  const inputs = new Map<string, Promise<JobInput>>();
  const loadInput = (job: VerificationJob) => {
    let input = inputs.get(job.id);
    if (!input) {
      input = readJobInput(env, job).then(
        (found) => found ?? Promise.reject(new Error(`verification job ${job.id}: input ${job.inputKey} is missing`)),
      );
      inputs.set(job.id, input);
      // A failed read must not be served to the batch's other chunks of the job: they retry it themselves.
      input.catch(() => inputs.delete(job.id));
    }
    return input;
  };

  await Promise.all(
    deliveries.map(async ({ message, chunk }) => {
      try {
        await processVerificationChunk(inDatabase(ctx, chunk.database), chunk, { resolver, prober, loadInput });
        message.ack();
      } catch (error) {
        logError("verification chunk failed; retrying", {
          job_id: chunk.job_id,
          offset: chunk.offset,
          attempts: message.attempts,
          error: error instanceof Error ? error.message : String(error),
        });
        message.retry({ delaySeconds: RETRY_BASE_SECONDS * 2 ** Math.max(0, message.attempts - 1) });
      }
    }),
  );
}

/** Chunks that exhausted their retries: their job fails (once) and is refunded for what it did not verify. */
export async function failVerificationChunks(deliveries: ChunkDelivery[], env: Env): Promise<void> {
  const ctx = openCtx(env);
  for (const { message, chunk } of deliveries) {
    try {
      await failVerificationJob(
        inDatabase(ctx, chunk.database),
        chunk.job_id,
        `Addresses ${chunk.offset} to ${chunk.offset + chunk.count - 1} could not be verified`,
      );
      message.ack();
    } catch (error) {
      logError("failing a verification job from the DLQ failed; retrying", {
        job_id: chunk.job_id,
        error: error instanceof Error ? error.message : String(error),
      });
      message.retry({ delaySeconds: RETRY_BASE_SECONDS });
    }
  }
}
