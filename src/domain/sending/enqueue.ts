// Putting messages on SEND_QUEUE, the one way every producer of more than one does it (the cron's recovery, warm-up
// holds, a campaign's fan-out): one queue message per message id, the body the send consumer parses.

import { databaseNameOf, type Ctx } from "../../db/client";
import { chunk } from "../../lib/chunk";
import type { SendQueueMessage } from "./content";

// sendBatch takes at most 100 messages.
const SEND_BATCH_MAX = 100;

export type SendRequest = { id: string; delaySeconds?: number };

/**
 * Enqueues the messages of the context's account database (each body names it, so the consumer opens that database
 * without asking `DB`), 100 per sendBatch, the calls made together (one after another, their round trips were most
 * of a fan-out step). Never throws: returns the ids of the slices the queue refused and its first error, so the
 * caller decides what a refusal means for its rows.
 */
export async function enqueueMessages(
  ctx: Pick<Ctx, "env" | "db">,
  requests: readonly SendRequest[],
): Promise<{ refused: string[]; error?: unknown }> {
  const { env } = ctx;
  const database = databaseNameOf(ctx.db);
  const slices = chunk(requests, SEND_BATCH_MAX);
  const sent = await Promise.allSettled(
    slices.map((slice) =>
      env.SEND_QUEUE.sendBatch(
        slice.map(({ id, delaySeconds }) => ({
          body: { message_id: id, database } satisfies SendQueueMessage,
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
