// Putting messages on SEND_QUEUE, the one way every producer of more than one does it (the cron's recovery, warm-up
// holds, a campaign's fan-out): one queue message per message id, the body the send consumer parses.

import { chunk } from "../../lib/chunk";
import type { SendQueueMessage } from "./content";

// sendBatch takes at most 100 messages.
const SEND_BATCH_MAX = 100;

export type SendRequest = { id: string; delaySeconds?: number };

/**
 * Enqueues the messages, 100 per sendBatch, the calls made together (one after another, their round trips were most
 * of a fan-out step). Never throws: returns the ids of the slices the queue refused and its first error, so the
 * caller decides what a refusal means for its rows.
 */
export async function enqueueMessages(
  env: Pick<Env, "SEND_QUEUE">,
  requests: readonly SendRequest[],
): Promise<{ refused: string[]; error?: unknown }> {
  const slices = chunk(requests, SEND_BATCH_MAX);
  const sent = await Promise.allSettled(
    slices.map((slice) =>
      env.SEND_QUEUE.sendBatch(
        slice.map(({ id, delaySeconds }) => ({
          body: { message_id: id } satisfies SendQueueMessage,
          contentType: "json" as const,
          ...(delaySeconds === undefined ? {} : { delaySeconds }),
        })),
      ),
    ),
  );
  const refused = slices.flatMap((slice, i) => (sent[i]!.status === "rejected" ? slice.map(({ id }) => id) : []));
  const error = sent.find((result): result is PromiseRejectedResult => result.status === "rejected")?.reason;
  return { refused, error };
}
