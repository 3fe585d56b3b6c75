import { batch, databaseHandle, databaseNameOf, isAccountDatabase, type AccountDb, type DatabaseName } from "../db/client";
import { z } from "zod";
import {
  attemptDelivery,
  deliveryContext,
  MAX_ATTEMPTS,
  RETRY_DELAYS_SECONDS,
  type AttemptResult,
  type DeliveryContext,
} from "../domain/webhooks/delivery";
import { findDispatchedEvents, type DispatchedEvent, type WebhookDeliveryMessage } from "../domain/webhooks/dispatch";
import {
  deliverySucceededStatements,
  findEndpointsByIds,
  logDeadLetteredDelivery,
  logDeliveryAttempt,
  recordEndpointFailure,
  type WebhookEndpointRow,
} from "../domain/webhooks/endpoints";
import { logError, logWarning } from "../lib/log";

// Consumer of `mailforge-webhooks`: one message is one attempt to deliver one event to one endpoint.
//
// Retries are fresh messages, not `message.retry()`: after a failed attempt the consumer logs it, sends
// `{attempt: n + 1}` with `delaySeconds` from the schedule and acks the original. The attempt number is therefore
// ours (not the platform's `message.attempts`, which also counts crashes of this consumer), `next_retry_at` is
// exactly the time the retry was scheduled for, and the queue's own retries (max_retries = 10, then the DLQ) are
// left for failures of the consumer itself (D1 or the queue unavailable).
//
// Attempts are handed to one WebhookEndpointQueue Durable Object per endpoint and delivered there, concurrently,
// each with its own timeout: a slow or dead receiver delays only the attempts to itself.

const messageSchema = z.object({
  event_id: z.string().min(1).max(64),
  endpoint_id: z.string().min(1).max(64),
  attempt: z.number().int().min(1).max(MAX_ATTEMPTS),
  // Messages enqueued before account databases name none; their rows are in DB.
  database: z.string().max(64).default("DB"),
}) satisfies z.ZodType<WebhookDeliveryMessage>;

export type WebhookConsumerOptions = {
  /** Per-request timeout; 10 s unless a test shortens it. */
  timeoutMs?: number;
};

/**
 * One attempt. A success returns its log row (and the end of a failure streak) instead of writing it, so the caller
 * writes those of all attempts of the run in one D1 batch: the common case costs no round trip of its own.
 */
async function processMessage(
  db: AccountDb,
  context: DeliveryContext,
  message: WebhookDeliveryMessage,
  event: DispatchedEvent | undefined,
  endpoint: WebhookEndpointRow | undefined,
): Promise<D1PreparedStatement[]> {
  const { env } = context;
  const fields = { event_id: message.event_id, endpoint_id: message.endpoint_id, attempt: message.attempt };
  if (!event) {
    logError("webhook delivery dropped: the event does not exist", fields);
    return [];
  }
  // An endpoint of another account can only come from a forged or corrupted message; treat it as deleted.
  if (!endpoint || endpoint.accountId !== event.accountId) {
    logWarning("webhook delivery dropped: the endpoint was deleted", fields);
    return [];
  }
  const base = { endpointId: endpoint.id, accountId: endpoint.accountId, eventId: event.id, eventType: event.type, attempt: message.attempt };
  if (!endpoint.enabled) {
    await logDeliveryAttempt(db, {
      ...base,
      status: "failed",
      statusCode: null,
      responseSnippet: "Not sent: the endpoint is disabled",
      durationMs: null,
      nextRetryAt: null,
      createdAt: new Date().toISOString(),
    });
    return [];
  }

  const result: AttemptResult = await attemptDelivery(context, endpoint, event);
  const finishedAt = new Date();
  const at = finishedAt.toISOString();
  const attempt = { ...base, statusCode: result.statusCode, responseSnippet: result.responseSnippet, durationMs: result.durationMs, createdAt: at };

  if (result.ok) return deliverySucceededStatements(db, endpoint, attempt);

  const stillEnabled = await recordEndpointFailure(db, endpoint.id, at);
  const delaySeconds = RETRY_DELAYS_SECONDS[message.attempt - 1];
  const retry = stillEnabled && delaySeconds !== undefined;
  await logDeliveryAttempt(db, {
    ...attempt,
    status: retry ? "retrying" : "failed",
    nextRetryAt: retry ? new Date(finishedAt.getTime() + delaySeconds * 1000).toISOString() : null,
  });
  if (retry) {
    const next: WebhookDeliveryMessage = { event_id: event.id, endpoint_id: endpoint.id, attempt: message.attempt + 1, database: databaseNameOf(db) };
    await env.WEBHOOK_QUEUE.send(next, { delaySeconds, contentType: "json" });
  }
  return [];
}

function parseBatch(batch: MessageBatch<unknown>): { message: Message<unknown>; body: WebhookDeliveryMessage }[] {
  const parsed: { message: Message<unknown>; body: WebhookDeliveryMessage }[] = [];
  for (const message of batch.messages) {
    const body = messageSchema.safeParse(message.body);
    if (body.success) {
      parsed.push({ message, body: body.data });
    } else {
      // Retrying cannot fix a malformed body.
      logError("webhook queue message dropped: invalid body", { message_id: message.id, issues: body.error.issues });
      message.ack();
    }
  }
  return parsed;
}

/**
 * The attempts by the account database their rows are in. One naming a database this Worker has no binding for can
 * never be delivered: it is logged and left out.
 */
function byDatabase<T extends { database?: DatabaseName }>(env: Env, items: readonly T[]): Map<DatabaseName, number[]> {
  const groups = new Map<DatabaseName, number[]>();
  items.forEach((item, i) => {
    const database = item.database ?? "DB";
    if (!isAccountDatabase(env, database)) logError("webhook delivery dropped: unknown account database", { ...item });
    else groups.set(database, [...(groups.get(database) ?? []), i]);
  });
  return groups;
}

/**
 * Delivers attempts concurrently, each with its own timeout. Per attempt: `done` (delivered, or failed and its
 * retry scheduled, or dropped) or `again` (D1 or the queue failed around it: run it again later; the receiver may
 * then see it twice and de-duplicates by event id).
 */
export async function deliverWebhookMessages(
  env: Env,
  messages: WebhookDeliveryMessage[],
  options: WebhookConsumerOptions = {},
): Promise<("done" | "again")[]> {
  // An attempt byDatabase leaves out (no binding for its database) is dropped: done.
  const outcomes: ("done" | "again")[] = messages.map(() => "done");
  await Promise.all(
    [...byDatabase(env, messages)].map(async ([database, indexes]) => {
      const done = await deliverInDatabase(
        env,
        databaseHandle(env, database),
        indexes.map((i) => messages[i]!),
        options,
      );
      for (const [i, index] of indexes.entries()) outcomes[index] = done[i]!;
    }),
  );
  return outcomes;
}

/** `deliverWebhookMessages` for attempts whose rows are all in `db`. */
async function deliverInDatabase(
  env: Env,
  db: AccountDb,
  messages: WebhookDeliveryMessage[],
  options: WebhookConsumerOptions,
): Promise<("done" | "again")[]> {
  let eventsById: Map<string, DispatchedEvent>;
  let endpointsById: Map<string, WebhookEndpointRow>;
  try {
    [eventsById, endpointsById] = await Promise.all([
      findDispatchedEvents(db, [...new Set(messages.map((message) => message.event_id))]),
      findEndpointsByIds(db, [...new Set(messages.map((message) => message.endpoint_id))]),
    ]);
  } catch (error) {
    logError("webhook deliveries could not be loaded; they will run again", { error: error instanceof Error ? error.message : String(error) });
    return messages.map(() => "again");
  }
  const context = deliveryContext(env, options);
  const attempts = await Promise.all(
    messages.map(async (message): Promise<{ outcome: "done" | "again"; successWrites: D1PreparedStatement[] }> => {
      try {
        const successWrites = await processMessage(db, context, message, eventsById.get(message.event_id), endpointsById.get(message.endpoint_id));
        return { outcome: "done", successWrites };
      } catch (error) {
        logError("webhook delivery could not be recorded; it will run again", {
          ...message,
          error: error instanceof Error ? error.message : String(error),
        });
        return { outcome: "again", successWrites: [] };
      }
    }),
  );
  const successWrites = attempts.flatMap((attempt) => attempt.successWrites);
  if (successWrites.length > 0) {
    try {
      await batch(db, successWrites);
    } catch (error) {
      // Those receivers got their requests but the log did not: run only those again (receivers de-duplicate by
      // event id). Failed attempts already logged and scheduled their retry and must not run twice.
      logError("webhook delivery log could not be written; those deliveries will run again", { error: String(error) });
      return attempts.map((attempt) => (attempt.successWrites.length > 0 ? "again" : attempt.outcome));
    }
  }
  return attempts.map((attempt) => attempt.outcome);
}

/** Delivers a queue batch in place (tests drive the delivery logic through this). */
export async function deliverWebhookBatch(batch: MessageBatch<unknown>, env: Env, options: WebhookConsumerOptions = {}): Promise<void> {
  const parsed = parseBatch(batch);
  const outcomes = await deliverWebhookMessages(
    env,
    parsed.map(({ body }) => body),
    options,
  );
  for (const [i, { message }] of parsed.entries()) {
    if (outcomes[i] === "done") message.ack();
    else message.retry();
  }
}

/**
 * Consumer of `mailforge-webhooks`: hands each attempt to its endpoint's WebhookEndpointQueue object, which stores
 * it durably before the message is acked and delivers it from its alarm. Endpoints are thereby isolated: a receiver
 * taking 10 s to answer holds only its own object, never a queue batch that other endpoints' events are waiting in.
 */
export async function consumeWebhookDeliveries(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const byEndpoint = new Map<string, { message: Message<unknown>; body: WebhookDeliveryMessage }[]>();
  for (const item of parseBatch(batch)) byEndpoint.set(item.body.endpoint_id, [...(byEndpoint.get(item.body.endpoint_id) ?? []), item]);
  await Promise.all(
    [...byEndpoint].map(async ([endpointId, items]) => {
      try {
        await env.WEBHOOK_ENDPOINT_QUEUE.getByName(endpointId).enqueue(items.map(({ body }) => body));
        for (const { message } of items) message.ack();
      } catch (error) {
        logError("webhook deliveries could not be handed to their endpoint queue; retrying", { endpoint_id: endpointId, error: String(error) });
        for (const { message } of items) message.retry();
      }
    }),
  );
}

/**
 * Consumer of `mailforge-webhooks-dlq`: a message lands here after the consumer itself failed on it 10 times.
 * Its delivery is marked failed, so the log shows the end of the story instead of a `retrying` row forever.
 */
export async function consumeWebhookDeadLetters(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const bodies = batch.messages.flatMap((message) => {
    const body = messageSchema.safeParse(message.body);
    return body.success ? [body.data] : [];
  });
  for (const [database, indexes] of byDatabase(env, bodies)) {
    await logDeadLetters(
      databaseHandle(env, database),
      indexes.map((i) => bodies[i]!),
    );
  }
  batch.ackAll();
}

async function logDeadLetters(db: AccountDb, parsed: WebhookDeliveryMessage[]): Promise<void> {
  const [eventsById, endpointsById] = await Promise.all([
    findDispatchedEvents(db, [...new Set(parsed.map((body) => body.event_id))]),
    findEndpointsByIds(db, [...new Set(parsed.map((body) => body.endpoint_id))]),
  ]);
  for (const body of parsed) {
    const event = eventsById.get(body.event_id);
    const endpoint = endpointsById.get(body.endpoint_id);
    if (!event || !endpoint) {
      logWarning("dead-lettered webhook delivery dropped: its event or endpoint no longer exists", { ...body });
      continue;
    }
    await logDeadLetteredDelivery(db, {
      endpointId: endpoint.id,
      accountId: endpoint.accountId,
      eventId: event.id,
      eventType: event.type,
      attempt: body.attempt,
    });
  }
}
