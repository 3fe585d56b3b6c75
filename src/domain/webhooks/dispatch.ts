import { type AccountDb, type Ctx, type DatabaseName, batch, databaseNameOf } from "../../db/client";
import { and, asc, eq, inArray, isNull, lt } from "drizzle-orm";
import { events } from "../../db/schema";
import { chunk } from "../../lib/chunk";
import { nowIso } from "../../lib/ids";
import { logError } from "../../lib/log";
import { eventStatement, type EventInput } from "../events/events";
import type { WebhookEnvelope } from "./envelope";
import { enabledEndpointsOf, subscribesTo } from "./endpoints";

// The outbox: producers write events (with `eventStatement`, in the same D1 batch as the change they report), then
// call `dispatchEvents`, which turns each event into one WEBHOOK_QUEUE message per subscribed endpoint and only then
// sets `dispatched_at`. Anything a crash or a queue outage leaves undispatched is picked up by the cron sweep.
// Enqueueing before marking means an event is never lost, and at worst enqueued twice (a sweep racing a slow
// producer): receivers de-duplicate by event id, as the spec asks them to.

/**
 * Body of one WEBHOOK_QUEUE message: one attempt to deliver one event to one endpoint, in the account database
 * `database` (messages enqueued before account databases name none: theirs is `DB`).
 */
export type WebhookDeliveryMessage = { event_id: string; endpoint_id: string; attempt: number; database?: DatabaseName };

// D1 binds at most 100 parameters per statement; sendBatch takes at most 100 messages.
const IDS_PER_STATEMENT = 90;
const MESSAGES_PER_SEND_BATCH = 100;
/** Events younger than this belong to a producer that may still be dispatching them. */
export const SWEEP_MIN_AGE_MS = 60_000;
const SWEEP_PAGE_SIZE = 500;
// Bounds one cron run; a larger backlog continues on the next run.
const SWEEP_MAX_PAGES = 20;

type EventRow = Pick<typeof events.$inferSelect, "id" | "accountId" | "type">;

/**
 * Enqueues the webhook deliveries of the account's events named by `dedupeKeys` that are not dispatched yet, and
 * marks them dispatched. Call it after the batch that wrote them with `eventStatement` has committed. It never
 * throws: an event it could not dispatch stays undispatched and the outbox sweep sends it within minutes, which
 * is better than failing (and retrying) the producer's already committed work.
 */
export async function dispatchEvents(ctx: Ctx, accountId: string, dedupeKeys: string[]): Promise<void> {
  const { db } = ctx;
  try {
    const rows: EventRow[] = [];
    for (const keys of chunk([...new Set(dedupeKeys)], IDS_PER_STATEMENT)) {
      rows.push(
        ...(await db
          .select({ id: events.id, accountId: events.accountId, type: events.type })
          .from(events)
          .where(and(eq(events.accountId, accountId), inArray(events.dedupeKey, keys), isNull(events.dispatchedAt)))
          .all()),
      );
    }
    await dispatchEventRows(ctx, rows);
  } catch (error) {
    logError("webhook dispatch failed; the outbox sweep will retry", {
      account_id: accountId,
      events: dedupeKeys.length,
      error: error instanceof Error ? error.message : String(error),
    });
  }
}

/**
 * For producers without a D1 batch of their own: writes the events (a fact already recorded is skipped by its
 * dedupe key) and dispatches them.
 */
export async function recordEvents(ctx: Ctx, eventInputs: EventInput[]): Promise<void> {
  const { db } = ctx;
  if (eventInputs.length === 0) return;
  await batch(
    db,
    eventInputs.map((event) => eventStatement(db, event)),
  );
  await dispatchEventInputs(ctx, eventInputs);
}

/** Dispatches events a producer has written in its own batch (`dispatchEvents` per account; unwritten ones are skipped). */
export async function dispatchEventInputs(ctx: Ctx, eventInputs: readonly EventInput[]): Promise<void> {
  const keysByAccount = new Map<string, string[]>();
  for (const event of eventInputs) keysByAccount.set(event.accountId, [...(keysByAccount.get(event.accountId) ?? []), event.dedupeKey]);
  await Promise.all([...keysByAccount].map(([accountId, keys]) => dispatchEvents(ctx, accountId, keys)));
}

/** An event as its deliveries send it, with the account it belongs to. */
export type DispatchedEvent = WebhookEnvelope & { accountId: string };

/** Events by id, for the delivery consumers. */
export async function findDispatchedEvents(db: AccountDb, ids: string[]): Promise<Map<string, DispatchedEvent>> {
  const found = new Map<string, DispatchedEvent>();
  for (const part of chunk(ids, IDS_PER_STATEMENT)) {
    const rows = await db.select().from(events).where(inArray(events.id, part)).all();
    for (const row of rows) found.set(row.id, { id: row.id, type: row.type, created_at: row.createdAt, data: row.data, accountId: row.accountId });
  }
  return found;
}

/** Returns how many queue messages were sent. */
async function dispatchEventRows(ctx: Ctx, rows: readonly EventRow[]): Promise<number> {
  const { env, db } = ctx;
  if (rows.length === 0) return 0;
  const endpoints = await enabledEndpointsOf(db, [...new Set(rows.map((row) => row.accountId))]);
  const database = databaseNameOf(db);

  const messages: MessageSendRequest<WebhookDeliveryMessage>[] = rows.flatMap((event) =>
    endpoints
      .filter((endpoint) => endpoint.accountId === event.accountId && subscribesTo(endpoint.events, event.type))
      .map((endpoint) => ({ body: { event_id: event.id, endpoint_id: endpoint.id, attempt: 1, database }, contentType: "json" as const })),
  );
  for (const part of chunk(messages, MESSAGES_PER_SEND_BATCH)) await env.WEBHOOK_QUEUE.sendBatch(part);

  const dispatchedAt = nowIso();
  const marks = chunk(
    rows.map((row) => row.id),
    IDS_PER_STATEMENT,
  ).map((ids) =>
    db
      .update(events)
      .set({ dispatchedAt })
      .where(and(inArray(events.id, ids), isNull(events.dispatchedAt))),
  );
  const [first, ...rest] = marks;
  if (first) await db.batch([first, ...rest]);
  return messages.length;
}

/**
 * The outbox sweep (cron): dispatches events a producer wrote but did not dispatch (it crashed, or the queue
 * refused) once they are older than a minute. Safe to run concurrently with producers and with itself.
 */
export async function sweepUndispatchedEvents(ctx: Ctx): Promise<{ events: number; messages: number }> {
  const { db } = ctx;
  const cutoff = new Date(Date.now() - SWEEP_MIN_AGE_MS).toISOString();
  let swept = 0;
  let sent = 0;
  for (let page = 0; page < SWEEP_MAX_PAGES; page++) {
    const rows = await db
      .select({ id: events.id, accountId: events.accountId, type: events.type })
      .from(events)
      .where(and(isNull(events.dispatchedAt), lt(events.createdAt, cutoff)))
      .orderBy(asc(events.createdAt))
      .limit(SWEEP_PAGE_SIZE)
      .all();
    sent += await dispatchEventRows(ctx, rows);
    swept += rows.length;
    if (rows.length < SWEEP_PAGE_SIZE) break;
  }
  return { events: swept, messages: sent };
}
