import { openCtx } from "../../src/db/client";
import { describe, expect, it } from "vitest";
import { eventStatement, type EventInput, type EventType } from "../../src/domain/events/events";
import { dispatchEvents, recordEvents, sweepUndispatchedEvents } from "../../src/domain/webhooks/dispatch";
import { allAccountRows } from "../support/databases";
import { createAccount, d1Of, d1OfAccount, dbOf, type CreatedAccount } from "../support/helpers";
import { createEndpoint, envWith, RecordingQueue, receiverUrl, uniqueKey } from "../support/webhooks";

function event(accountId: string, type: EventType, data: Record<string, unknown> = {}): EventInput {
  return { accountId, type, dedupeKey: uniqueKey(type), data };
}

async function eventIdOf(accountId: string, dedupeKey: string): Promise<string> {
  const row = await (await d1OfAccount(accountId))
    .prepare("SELECT id FROM events WHERE account_id = ? AND dedupe_key = ?")
    .bind(accountId, dedupeKey)
    .first<{ id: string }>();
  if (!row) throw new Error(`no event ${dedupeKey}`);
  return row.id;
}

async function dispatchedAt(eventId: string): Promise<string | null> {
  const [row] = await allAccountRows<{ dispatched_at: string | null }>("SELECT dispatched_at FROM events WHERE id = ?", eventId);
  return row?.dispatched_at ?? null;
}

/** The account's context, with the recording queue. */
const ctxOf = (account: CreatedAccount, queue: RecordingQueue) => openCtx(envWith(queue), undefined, account);

/** Writes the account's events as a producer's batch would, without dispatching them. */
async function writeEvents(account: CreatedAccount, inputs: EventInput[]): Promise<void> {
  await d1Of(account).batch(inputs.map((input) => eventStatement(dbOf(account), input)));
}

describe("dispatchEvents", () => {
  it("sends one message per (event, subscribed enabled endpoint of the account), then marks the events dispatched", async () => {
    const account = await createAccount();
    const other = await createAccount({ name: "Other" });
    const all = await createEndpoint(account.api_key, { url: receiverUrl("/d/all"), events: ["*"] });
    const bouncesOnly = await createEndpoint(account.api_key, { url: receiverUrl("/d/bounced"), events: ["relay.bounced"] });
    const disabled = await createEndpoint(account.api_key, { url: receiverUrl("/d/off"), events: ["*"], enabled: false });
    const othersEndpoint = await createEndpoint(other.api_key, { url: receiverUrl("/d/other"), events: ["*"] });

    const sent = event(account.id, "relay.sent");
    const bounced = event(account.id, "relay.bounced");
    await writeEvents(account, [sent, bounced]);
    const queue = new RecordingQueue();
    await dispatchEvents(ctxOf(account, queue), account.id, [sent.dedupeKey, bounced.dedupeKey]);

    const sentId = await eventIdOf(account.id, sent.dedupeKey);
    const bouncedId = await eventIdOf(account.id, bounced.dedupeKey);
    const messages = queue.take().map(({ body, delaySeconds }) => ({ ...body, delaySeconds }));
    expect(messages).toHaveLength(3);
    expect(messages).toEqual(
      expect.arrayContaining([
        { event_id: sentId, endpoint_id: all.id, attempt: 1, database: account.database, delaySeconds: undefined },
        { event_id: bouncedId, endpoint_id: all.id, attempt: 1, database: account.database, delaySeconds: undefined },
        { event_id: bouncedId, endpoint_id: bouncesOnly.id, attempt: 1, database: account.database, delaySeconds: undefined },
      ]),
    );
    const targeted = messages.map((message) => message.endpoint_id);
    expect(targeted).not.toContain(disabled.id);
    expect(targeted).not.toContain(othersEndpoint.id);
    expect(await dispatchedAt(sentId)).toMatch(/^\d{4}-/);
    expect(await dispatchedAt(bouncedId)).toMatch(/^\d{4}-/);

    // Already dispatched: a second call (a retried producer) enqueues nothing.
    await dispatchEvents(ctxOf(account, queue), account.id, [sent.dedupeKey, bounced.dedupeKey]);
    expect(queue.take()).toEqual([]);
  });

  it("only dispatches the account's own events, even when given another account's dedupe keys", async () => {
    const account = await createAccount();
    const other = await createAccount({ name: "Other" });
    await createEndpoint(account.api_key, { url: receiverUrl("/d/mine"), events: ["*"] });
    const othersEvent = event(other.id, "delivered");
    await writeEvents(other, [othersEvent]);
    const queue = new RecordingQueue();
    await dispatchEvents(ctxOf(account, queue), account.id, [othersEvent.dedupeKey]);
    expect(queue.take()).toEqual([]);
    expect(await dispatchedAt(await eventIdOf(other.id, othersEvent.dedupeKey))).toBeNull();
  });

  it("marks events without any subscribed endpoint dispatched, sending nothing", async () => {
    const account = await createAccount();
    const lonely = event(account.id, "opened");
    const queue = new RecordingQueue();
    await recordEvents(ctxOf(account, queue), [lonely]);
    expect(queue.take()).toEqual([]);
    expect(await dispatchedAt(await eventIdOf(account.id, lonely.dedupeKey))).not.toBeNull();
  });

  it("sends at most 100 messages per sendBatch call", async () => {
    const account = await createAccount();
    await createEndpoint(account.api_key, { url: receiverUrl("/d/many"), events: ["*"] });
    const queue = new RecordingQueue();
    await recordEvents(
      ctxOf(account, queue),
      Array.from({ length: 150 }, () => event(account.id, "relay.delivered")),
    );
    expect(queue.batches).toEqual([100, 50]);
    expect(new Set(queue.sent.map((message) => message.body.event_id)).size).toBe(150);
  });

  it("recordEvents records a fact once: the same dedupe key twice is one event and one delivery", async () => {
    const account = await createAccount();
    await createEndpoint(account.api_key, { url: receiverUrl("/d/once"), events: ["*"] });
    const fact = event(account.id, "relay.delivered", { message_id: "msg_1", email: "a@example.com" });
    const queue = new RecordingQueue();
    await recordEvents(ctxOf(account, queue), [fact]);
    await recordEvents(ctxOf(account, queue), [{ ...fact, data: { message_id: "msg_1", email: "changed@example.com" } }]);
    expect(queue.take()).toHaveLength(1);
    const rows = await d1Of(account).prepare("SELECT data FROM events WHERE account_id = ?").bind(account.id).all<{ data: string }>();
    expect(rows.results.map((row) => JSON.parse(row.data))).toEqual([{ message_id: "msg_1", email: "a@example.com" }]);
  });

  it("never throws when the queue fails; the event stays undispatched for the sweep", async () => {
    const account = await createAccount();
    await createEndpoint(account.api_key, { url: receiverUrl("/d/outage"), events: ["*"] });
    const fact = event(account.id, "relay.failed");
    const broken = new RecordingQueue();
    broken.sendBatch = async () => {
      throw new Error("Queue send failed: internal error");
    };
    await expect(recordEvents(ctxOf(account, broken), [fact])).resolves.toBeUndefined();
    expect(await dispatchedAt(await eventIdOf(account.id, fact.dedupeKey))).toBeNull();
  });
});

describe("outbox sweep", () => {
  it("dispatches events left undispatched for more than a minute, and leaves younger ones to their producer", async () => {
    const account = await createAccount();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl("/d/sweep"), events: ["*"] });
    const old = event(account.id, "relay.sent");
    const young = event(account.id, "relay.delivered");
    await writeEvents(account, [old, young]);
    const oldId = await eventIdOf(account.id, old.dedupeKey);
    const youngId = await eventIdOf(account.id, young.dedupeKey);
    await d1Of(account)
      .prepare("UPDATE events SET created_at = ? WHERE id = ?")
      .bind(new Date(Date.now() - 61_000).toISOString(), oldId)
      .run();

    const queue = new RecordingQueue();
    await sweepUndispatchedEvents(ctxOf(account, queue));
    const mine = queue.take().filter((message) => message.body.endpoint_id === endpoint.id);
    expect(mine.map((message) => message.body)).toEqual([{ event_id: oldId, endpoint_id: endpoint.id, attempt: 1, database: account.database }]);
    expect(await dispatchedAt(oldId)).not.toBeNull();
    expect(await dispatchedAt(youngId)).toBeNull();

    // Running it again (two cron invocations overlapping) sends nothing more.
    await sweepUndispatchedEvents(ctxOf(account, queue));
    expect(queue.take().filter((message) => message.body.endpoint_id === endpoint.id)).toEqual([]);
  });
});
