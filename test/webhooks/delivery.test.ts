import { openCtx } from "../../src/db/client";
import { createMessageBatch, createExecutionContext, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EventInput, EventType } from "../../src/domain/events/events";
import { recordEvents } from "../../src/domain/webhooks/dispatch";
import { consumeWebhookDeadLetters } from "../../src/queues/webhooks";
import { verifyWebhook } from "../../sdk/src/verify-webhook";
import { accountIn } from "../support/databases";
import { call, createAccount, d1Of, json } from "../support/helpers";
import {
  addReceiverRule,
  createEndpoint,
  deliveriesOf,
  envWith,
  receivedOn,
  receiverPath,
  receiverUrl,
  RecordingQueue,
  runConsumer,
  specVerify,
  uniqueKey,
  v1Digests,
  waitForRequests,
  type Endpoint,
  type ReceivedRequest,
} from "../support/webhooks";

const nowSeconds = () => Math.floor(Date.now() / 1000);

function event(accountId: string, type: EventType, data: Record<string, unknown> = { message_id: "msg_x", email: "jane@example.com" }): EventInput {
  return { accountId, type, dedupeKey: uniqueKey(type), data };
}

/** Every delivery is checked three ways: the spec's algorithm, Standard Webhooks, and our receiver helper. */
async function expectGenuine(request: ReceivedRequest, secret: string, at = nowSeconds()) {
  const header = request.headers["x-service-signature"]!;
  expect(header).toMatch(/^t=\d+(,v1=[0-9a-f]{64})+$/);
  expect(await specVerify(secret, header, request.body, at)).toBe(true);
  expect(await verifyWebhook(secret, header, request.body, at)).toMatchObject({ ok: true });
  expect(new Webhook(secret).verify(request.body, request.headers)).toEqual(JSON.parse(request.body));
  expect(request.headers["webhook-id"]).toBe(JSON.parse(request.body).id);
  expect(request.headers["webhook-timestamp"]).toBe(header.slice(2, header.indexOf(",")));
}

/** An account with one endpoint on a fresh receiver path, and a recorded (dispatched into `queue`) event. */
async function setup(options: { events?: string[]; type?: EventType } = {}) {
  const account = await createAccount();
  const path = receiverPath();
  const endpoint = await createEndpoint(account.api_key, { url: receiverUrl(path), events: options.events ?? ["*"] });
  const queue = new RecordingQueue();
  await recordEvents(openCtx(envWith(queue), undefined, account), [event(account.id, options.type ?? "relay.delivered")]);
  const [first] = queue.take();
  if (!first) throw new Error("nothing dispatched");
  return { account, path, endpoint, queue, message: first.body };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("delivery through the real queue", () => {
  it("delivers an event of an account in ACCOUNT_DB_1, signed, from that database's rows", async () => {
    const account = await accountIn("ACCOUNT_DB_1");
    const path = receiverPath();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl(path), events: ["*"] });
    const fact = event(account.id, "relay.delivered");
    await recordEvents(openCtx(env, undefined, account), [fact]);

    const [request] = await waitForRequests(path, 1);
    await expectGenuine(request!, endpoint.secret);
    expect(JSON.parse(request!.body)).toMatchObject({ type: "relay.delivered", data: fact.data });
    expect(await deliveriesOf(account.api_key, endpoint.id)).toMatchObject([{ event_type: "relay.delivered", attempt: 1, status: "succeeded" }]);
  });

  it("POSTs the signed envelope to each subscribed endpoint, and only to those", async () => {
    const account = await createAccount();
    const other = await createAccount({ name: "Other" });
    const paths = { all: receiverPath(), bounces: receiverPath(), disabled: receiverPath(), other: receiverPath() };
    const all = await createEndpoint(account.api_key, { url: receiverUrl(paths.all), events: ["*"] });
    const bounces = await createEndpoint(account.api_key, { url: receiverUrl(paths.bounces), events: ["relay.bounced"] });
    await createEndpoint(account.api_key, { url: receiverUrl(paths.disabled), events: ["*"], enabled: false });
    await createEndpoint(other.api_key, { url: receiverUrl(paths.other), events: ["*"] });

    const sent = event(account.id, "relay.sent", {
      message_id: "msg_1",
      source: "api",
      from: "a@acme.test",
      recipients: ["b@example.com"],
      subject: "Hi",
    });
    const bounced = event(account.id, "relay.bounced", { message_id: "msg_1", email: "b@example.com", bounce_type: "hard" });
    await recordEvents(openCtx(env, undefined, account), [sent, bounced]);

    const toAll = await waitForRequests(paths.all, 2);
    const toBounces = await waitForRequests(paths.bounces, 1);
    const bodies = toAll.map((request) => JSON.parse(request.body) as { id: string; type: string; created_at: string; data: unknown });
    expect(bodies.map((body) => body.type).sort()).toEqual(["relay.bounced", "relay.sent"]);
    for (const body of bodies) {
      expect(Object.keys(body)).toEqual(["id", "type", "created_at", "data"]);
      expect(body.id).toMatch(/^evt_/);
      expect(new Date(body.created_at).toISOString()).toBe(body.created_at);
    }
    expect(bodies.find((body) => body.type === "relay.bounced")?.data).toEqual(bounced.data);
    for (const request of toAll) {
      expect(request.method).toBe("POST");
      expect(request.headers["content-type"]).toBe("application/json");
      await expectGenuine(request, all.secret);
    }
    expect(toBounces.map((request) => JSON.parse(request.body).type)).toEqual(["relay.bounced"]);
    await expectGenuine(toBounces[0]!, bounces.secret);

    // The same event reaches both endpoints with the same id (receivers de-duplicate by it).
    const bouncedId = bodies.find((body) => body.type === "relay.bounced")?.id;
    expect(JSON.parse(toBounces[0]!.body).id).toBe(bouncedId);

    const log = await deliveriesOf(account.api_key, all.id);
    expect(log.map((row) => [row.event_type, row.attempt, row.status, row.status_code, row.next_retry_at]).sort()).toEqual([
      ["relay.bounced", 1, "succeeded", 200, null],
      ["relay.sent", 1, "succeeded", 200, null],
    ]);

    // Everything the queue held was in the batch that reached `all`; nothing went to the others.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await receivedOn(paths.disabled)).toEqual([]);
    expect(await receivedOn(paths.other)).toEqual([]);
    expect(await receivedOn(paths.bounces)).toHaveLength(1);
  });
});

describe("retries", () => {
  it("500 then 200: delivered on the second attempt with the same event id and a fresh timestamp", async () => {
    const t0 = Date.UTC(2026, 10, 22, 10, 0, 0);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(t0);
    const { account, path, endpoint, queue, message } = await setup();
    await addReceiverRule({ path, status: 500, times: 1, body: "boom" });

    const first = await runConsumer([message], { env: envWith(queue) });
    expect(first.explicitAcks).toHaveLength(1);
    expect(first.retryMessages).toEqual([]);
    expect(queue.take()).toEqual([{ body: { ...message, attempt: 2 }, delaySeconds: 60 }]);

    vi.setSystemTime(t0 + 60_000);
    const second = await runConsumer([{ ...message, attempt: 2 }], { env: envWith(queue) });
    expect(second.explicitAcks).toHaveLength(1);
    expect(queue.take()).toEqual([]);

    const [try1, try2] = await receivedOn(path);
    expect([try1?.answered_status, try2?.answered_status]).toEqual([500, 200]);
    expect(try2!.body).toBe(try1!.body);
    expect(try2!.headers["webhook-id"]).toBe(message.event_id);
    expect(try1!.headers["webhook-id"]).toBe(message.event_id);
    expect(Number(try2!.headers["webhook-timestamp"]) - Number(try1!.headers["webhook-timestamp"])).toBe(60);
    await expectGenuine(try2!, endpoint.secret, t0 / 1000 + 60);

    const log = await deliveriesOf(account.api_key, endpoint.id, `&event_id=${message.event_id}`);
    expect(log.map((row) => [row.attempt, row.status, row.status_code, row.response_snippet])).toEqual([
      [2, "succeeded", 200, '{"ok":true}'],
      [1, "retrying", 500, "boom"],
    ]);
    const firstAttempt = log[1]!;
    expect(Date.parse(firstAttempt.next_retry_at!) - Date.parse(firstAttempt.created_at)).toBe(60_000);
    expect(log[0]!.next_retry_at).toBeNull();
  });

  it("follows the schedule 60 s, 5 min, 30 min, 2 h, 6 h, 12 h, then marks the delivery failed", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    await addReceiverRule({ path, status: 503 });
    const delays: (number | undefined)[] = [];
    let current = message;
    for (let attempt = 1; attempt <= 7; attempt++) {
      expect(current.attempt).toBe(attempt);
      const result = await runConsumer([current], { env: envWith(queue) });
      expect(result.explicitAcks).toHaveLength(1);
      const [next, ...more] = queue.take();
      expect(more).toEqual([]);
      if (!next) break;
      delays.push(next.delaySeconds);
      current = next.body;
    }
    expect(delays).toEqual([60, 300, 1800, 7200, 21600, 43200]);
    expect(await receivedOn(path)).toHaveLength(7);

    const log = await deliveriesOf(account.api_key, endpoint.id);
    expect(log.map((row) => [row.attempt, row.status])).toEqual([
      [7, "failed"],
      [6, "retrying"],
      [5, "retrying"],
      [4, "retrying"],
      [3, "retrying"],
      [2, "retrying"],
      [1, "retrying"],
    ]);
    const gaps = log
      .filter((row) => row.next_retry_at)
      .map((row) => [row.attempt, (Date.parse(row.next_retry_at!) - Date.parse(row.created_at)) / 1000])
      .sort(([a], [b]) => a! - b!);
    expect(gaps).toEqual([
      [1, 60],
      [2, 300],
      [3, 1800],
      [4, 7200],
      [5, 21600],
      [6, 43200],
    ]);
    expect(log[0]!.next_retry_at).toBeNull();
  });

  it("treats a redirect as a failure and does not follow it", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    await addReceiverRule({ path, status: 302, times: 1 });
    await runConsumer([message], { env: envWith(queue) });
    expect(queue.take()).toMatchObject([{ delaySeconds: 60 }]);
    expect(await receivedOn(path)).toHaveLength(1);
    expect(await deliveriesOf(account.api_key, endpoint.id)).toMatchObject([
      { status: "retrying", status_code: 302, response_snippet: expect.stringContaining("Redirect") },
    ]);
  });

  it("gives up on a receiver that does not answer within the timeout", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    // The receiver would answer after 10 s; nothing waits for that answer, so the margin costs no time.
    const answerDelayMs = 10_000;
    await addReceiverRule({ path, status: 200, delay_ms: answerDelayMs, times: 1 });
    await runConsumer([message], { env: envWith(queue), timeoutMs: 300 });
    expect(queue.take()).toMatchObject([{ delaySeconds: 60 }]);
    const [row] = await deliveriesOf(account.api_key, endpoint.id);
    expect(row).toMatchObject({ status: "retrying", status_code: null, response_snippet: "Timed out after 0.3 s" });
    expect(row!.duration_ms).toBeGreaterThanOrEqual(250);
    // Given up before the answer came, however busy the machine.
    expect(row!.duration_ms).toBeLessThan(answerDelayMs);
  });

  it("records a connection error without a status code", async () => {
    const { account, endpoint, queue, message } = await setup();
    await d1Of(account).prepare("UPDATE webhook_endpoints SET url = 'http://127.0.0.1:9/nothing-listens' WHERE id = ?").bind(endpoint.id).run();
    await runConsumer([message], { env: envWith(queue) });
    expect(queue.take()).toMatchObject([{ delaySeconds: 60 }]);
    expect(await deliveriesOf(account.api_key, endpoint.id)).toMatchObject([
      { status: "retrying", status_code: null, response_snippet: expect.stringMatching(/^Request failed/) },
    ]);
  });

  it("cuts the response snippet to 500 characters", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    await addReceiverRule({ path, status: 400, times: 1, body: "é".repeat(3000) });
    await runConsumer([message], { env: envWith(queue) });
    const [row] = await deliveriesOf(account.api_key, endpoint.id);
    expect(row!.response_snippet).toBe("é".repeat(500));
  });
});

describe("one slow endpoint does not delay the others", () => {
  it("delivers the messages of a batch concurrently: a 3 s receiver costs only its own message", async () => {
    const slow = await setup();
    const fast = await setup();
    const slowDelayMs = 3000;
    await addReceiverRule({ path: slow.path, status: 200, delay_ms: slowDelayMs });
    const result = await runConsumer([slow.message, fast.message], { env: envWith(new RecordingQueue()) });
    expect(result.explicitAcks).toHaveLength(2);

    const [fastRequest] = await receivedOn(fast.path);
    const [slowRequest] = await receivedOn(slow.path);
    const [fastRow] = await deliveriesOf(fast.account.api_key, fast.endpoint.id);
    const [slowRow] = await deliveriesOf(slow.account.api_key, slow.endpoint.id);
    // Ordered against the moment the slow receiver answered: the fast request was sent, answered and logged before
    // it, which one-after-the-other delivery with the slow message first cannot do.
    const slowAnsweredAt = slowRequest!.received_at_ms + slowDelayMs;
    expect(fastRequest!.received_at_ms).toBeLessThan(slowAnsweredAt);
    expect(Date.parse(fastRow!.created_at)).toBeLessThan(slowAnsweredAt);
    expect(Date.parse(fastRow!.created_at)).toBeLessThan(Date.parse(slowRow!.created_at));
    expect(fastRow!.duration_ms).toBeLessThan(slowRow!.duration_ms!);
    expect(slowRow!.duration_ms).toBeGreaterThanOrEqual(slowDelayMs - 100);
  });
});

describe("endpoint health", () => {
  it("a failure starts failing_since; a success clears it", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    await addReceiverRule({ path, status: 500, times: 1 });
    await runConsumer([message], { env: envWith(queue) });
    const failing = await json<Endpoint>(await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key }));
    expect(failing.failing_since).toMatch(/^\d{4}-/);
    await runConsumer([queue.take()[0]!.body], { env: envWith(queue) });
    expect(await json(await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key }))).toMatchObject({ failing_since: null, enabled: true });
  });

  it("an endpoint failing for 5 days is disabled with a reason, and its retries stop", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    await addReceiverRule({ path, status: 500 });
    const since = new Date(Date.now() - 5 * 24 * 3600 * 1000 - 60_000).toISOString();
    await d1Of(account).prepare("UPDATE webhook_endpoints SET failing_since = ? WHERE id = ?").bind(since, endpoint.id).run();
    await runConsumer([message], { env: envWith(queue) });
    expect(queue.take()).toEqual([]);
    const disabled = await json<Endpoint>(await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key }));
    expect(disabled).toMatchObject({ enabled: false, failing_since: since, disabled_reason: expect.stringContaining(since) });
    expect(await deliveriesOf(account.api_key, endpoint.id)).toMatchObject([{ attempt: 1, status: "failed", status_code: 500, next_retry_at: null }]);
  });

  it("fails for 4 days without being disabled", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    await addReceiverRule({ path, status: 500 });
    const since = new Date(Date.now() - 4 * 24 * 3600 * 1000).toISOString();
    await d1Of(account).prepare("UPDATE webhook_endpoints SET failing_since = ? WHERE id = ?").bind(since, endpoint.id).run();
    await runConsumer([message], { env: envWith(queue) });
    expect(queue.take()).toHaveLength(1);
    expect(await json(await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key }))).toMatchObject({
      enabled: true,
      failing_since: since,
    });
  });

  it("deliveries for a disabled endpoint are dropped and logged", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key, method: "PATCH", body: { enabled: false } });
    const result = await runConsumer([{ ...message, attempt: 3 }], { env: envWith(queue) });
    expect(result.explicitAcks).toHaveLength(1);
    expect(queue.take()).toEqual([]);
    expect(await receivedOn(path)).toEqual([]);
    expect(await deliveriesOf(account.api_key, endpoint.id)).toMatchObject([
      { attempt: 3, status: "failed", status_code: null, response_snippet: "Not sent: the endpoint is disabled" },
    ]);
  });

  it("deliveries for a deleted endpoint are dropped", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key, method: "DELETE" });
    const result = await runConsumer([message], { env: envWith(queue) });
    expect(result.explicitAcks).toHaveLength(1);
    expect(queue.take()).toEqual([]);
    expect(await receivedOn(path)).toEqual([]);
  });

  it("re-checks the URL policy at delivery time (a name may have moved to a private address)", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    await runConsumer([message], { env: envWith(queue, { ALLOW_PRIVATE_WEBHOOK_URLS: "false" }) });
    expect(await receivedOn(path)).toEqual([]);
    expect(queue.take()).toMatchObject([{ delaySeconds: 60 }]);
    expect(await deliveriesOf(account.api_key, endpoint.id)).toMatchObject([
      { status: "retrying", status_code: null, response_snippet: "Not sent: The URL must use https" },
    ]);
  });
});

describe("secret rotation", () => {
  it("signs with the new and the old secret (two v1 values) for 24 hours, then with the new one only", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    const rotated = await json<Endpoint>(
      await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key, method: "PATCH", body: { rotate_secret: true } }),
    );
    await runConsumer([message], { env: envWith(queue) });
    const [during] = await receivedOn(path);
    const header = during!.headers["x-service-signature"]!;
    const [newDigest, oldDigest] = v1Digests(header);
    expect(v1Digests(header)).toHaveLength(2);
    const t = header.slice(2, header.indexOf(","));
    expect(await specVerify(rotated.secret, `t=${t},v1=${newDigest}`, during!.body, nowSeconds())).toBe(true);
    expect(await specVerify(endpoint.secret, `t=${t},v1=${oldDigest}`, during!.body, nowSeconds())).toBe(true);
    await expectGenuine(during!, rotated.secret);
    await expectGenuine(during!, endpoint.secret);

    // 24 h later the previous secret has expired.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 24 * 3600 * 1000 + 1000);
    await runConsumer([message], { env: envWith(queue) });
    const after = (await receivedOn(path))[1]!;
    expect(v1Digests(after.headers["x-service-signature"]!)).toHaveLength(1);
    const at = nowSeconds();
    expect(await specVerify(rotated.secret, after.headers["x-service-signature"]!, after.body, at)).toBe(true);
    expect(await specVerify(endpoint.secret, after.headers["x-service-signature"]!, after.body, at)).toBe(false);
    const listed = await json<Endpoint>(await call(`/api/v1/webhooks/${endpoint.id}`, { key: account.api_key }));
    expect(listed.previous_secret_expires_at).toBeNull();
  });
});

describe("malformed and dead-lettered messages", () => {
  it("acks a message whose body does not parse, delivering nothing", async () => {
    const queue = new RecordingQueue();
    const result = await runConsumer([{ event_id: "evt_x" }, "garbage", { event_id: "evt_x", endpoint_id: "wh_x", attempt: 99 }], {
      env: envWith(queue),
    });
    expect(result.explicitAcks).toHaveLength(3);
    expect(queue.take()).toEqual([]);
  });

  it("the DLQ consumer marks the delivery failed", async () => {
    const { account, endpoint, message } = await setup();
    const batch = createMessageBatch("mailforge-webhooks-dlq", [
      { id: "dlq-1", timestamp: new Date(), attempts: 11, body: { ...message, attempt: 4 } },
    ]);
    await consumeWebhookDeadLetters(batch, env);
    expect((await getQueueResult(batch, createExecutionContext())).ackAll).toBe(true);
    expect(await deliveriesOf(account.api_key, endpoint.id)).toMatchObject([
      { event_id: message.event_id, attempt: 4, status: "failed", next_retry_at: null, response_snippet: expect.stringContaining("dead-lettered") },
    ]);
  });
});

describe("delivery log", () => {
  it("is cursor-paginated newest first and filters by status", async () => {
    const { account, path, endpoint, queue, message } = await setup();
    await addReceiverRule({ path, status: 500, times: 2 });
    let current = message;
    for (let i = 0; i < 3; i++) {
      await runConsumer([current], { env: envWith(queue) });
      const next = queue.take()[0];
      if (next) current = next.body;
    }
    const first = await json<{ data: { attempt: number }[]; has_more: boolean; next_cursor: string }>(
      await call(`/api/v1/webhooks/${endpoint.id}/deliveries?limit=2`, { key: account.api_key }),
    );
    expect(first.data.map((row) => row.attempt)).toEqual([3, 2]);
    expect(first.has_more).toBe(true);
    const second = await json<{ data: { attempt: number }[]; has_more: boolean }>(
      await call(`/api/v1/webhooks/${endpoint.id}/deliveries?limit=2&cursor=${first.next_cursor}`, { key: account.api_key }),
    );
    expect(second).toMatchObject({ data: [{ attempt: 1 }], has_more: false });
    expect((await deliveriesOf(account.api_key, endpoint.id, "&status=retrying")).map((row) => row.attempt)).toEqual([2, 1]);
    expect((await call(`/api/v1/webhooks/${endpoint.id}/deliveries?status=nope`, { key: account.api_key })).status).toBe(422);
  });
});
