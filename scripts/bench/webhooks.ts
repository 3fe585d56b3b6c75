// Webhook delivery throughput through a running local stack, and whether a slow receiver holds up other endpoints.
//
//   npm run dev &    (or with WORKER_PORT=… DEV_STATE_DIR=…, exported for both commands)
//   npx tsx scripts/bench/webhooks.ts [events=500] [slow-events=200]
//
// Events come from the outbox, not from an API: the bench writes N undispatched `relay.delivered` events straight
// into the account's local D1 database (wrangler d1 execute on the binding the operator API names, the way a producer's batch would leave them), backdated past the
// sweep's one-minute grace, then fires the cron (`/__scheduled`, `npm run dev` starts wrangler with
// --test-scheduled). From there everything is the production path: sweep → dispatch (sendBatch) → the
// mailforge-webhooks queue → the consumer (load, sign, POST, log each attempt in D1) → a receiver on loopback.
// Writing events directly keeps event production (an SMTP round trip per message through /send, or a DNS-bound
// /verify per event) out of the numbers. The clock runs from the cron request to the last arrival.
//
// Baselines: the same number of signed-size POSTs from this process to the same receiver with plain fetch, one at a
// time and 50 at a time.
//
// Slow receiver: two endpoints get every event; one answers after 5 s. Reported: when the fast endpoint's
// deliveries arrived compared with the slow endpoint's, and against the fast-only run.

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { z } from "zod";
import { createWebhookReceiver, type ReceivedRequest } from "../dev/webhook-receiver.ts";
import { readDevVars } from "../lib/dev-vars.ts";
import { verifyWebhook } from "../../sdk/src/verify-webhook.ts";
import { percentile } from "./stats.ts";

const config = z
  .object({
    // The same variables as `npm run dev`, so one set of exports serves both.
    WORKER_PORT: z.coerce.number().int().default(8787),
    DEV_HOST: z.string().default("127.0.0.1"),
    DEV_STATE_DIR: z.string().min(1).default(".dev"),
  })
  .parse(process.env);
const events = Number(process.argv[2] ?? 500);
const slowEvents = Number(process.argv[3] ?? 200);
const workerUrl = `http://${config.DEV_HOST}:${config.WORKER_PORT}`;
const adminToken = process.env.ADMIN_TOKEN ?? readDevVars().ADMIN_TOKEN;
if (!adminToken) throw new Error("ADMIN_TOKEN is not set and .dev.vars has none: start the stack with `npm run dev` first");

const run = Date.now().toString(36);
const receiver = createWebhookReceiver();
const receiverPort = await receiver.listen(0, "127.0.0.1");
const receiverUrl = (path: string) => `http://127.0.0.1:${receiverPort}${path}`;

async function api<T>(path: string, key: string, body?: unknown): Promise<T> {
  const response = await fetch(`${workerUrl}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
}

async function createEndpoint(apiKey: string, path: string): Promise<{ id: string; secret: string }> {
  return api("/api/v1/webhooks", apiKey, { url: receiverUrl(path), events: ["*"] });
}

type Account = { id: string; api_key: string; database: string };

/** N undispatched events of the account, created two minutes ago, in one statement, in the account's database. */
async function insertEvents(account: Account, count: number, tag: string): Promise<void> {
  const accountId = account.id;
  const sql = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
    INSERT INTO events (id, account_id, type, subject_id, dedupe_key, data, created_at)
    SELECT 'evt_bench_${tag}_' || i, '${accountId}', 'relay.delivered', NULL, 'bench:${tag}:' || i,
      json_object('message_id', 'msg_bench_${tag}_' || i, 'recipient', 'user' || i || '@example.com', 'test', json('true')),
      strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-2 minutes')
    FROM n`;
  await promisify(execFile)(
    "npx",
    ["wrangler", "d1", "execute", account.database, "--local", "--persist-to", `${config.DEV_STATE_DIR}/state`, "--command", sql],
    {
      env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
      maxBuffer: 16 * 1024 * 1024,
    },
  );
}

async function fireCron(): Promise<number> {
  const started = Date.now();
  const response = await fetch(`${workerUrl}/__scheduled?cron=${encodeURIComponent("*/15 * * * *")}`);
  if (!response.ok) throw new Error(`/__scheduled: ${response.status} (is wrangler dev running with --test-scheduled?)`);
  return started;
}

async function waitFor(path: string, count: number, timeoutMs: number): Promise<ReceivedRequest[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const received = receiver.requests(path);
    if (received.length >= count) return received;
    if (Date.now() > deadline) throw new Error(`${path}: ${received.length} of ${count} deliveries after ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const rate = (count: number, ms: number) => `${(count / (ms / 1000)).toFixed(0)}/s`;

async function checkSignatures(received: ReceivedRequest[], secret: string): Promise<number> {
  let bad = 0;
  for (const request of received) {
    const header = request.headers["x-service-signature"] ?? "";
    // Verified at arrival time, as a receiver would.
    if (!(await verifyWebhook(secret, header, request.body, Math.floor(request.received_at_ms / 1000))).ok) bad++;
  }
  return bad;
}

// --- setup -----------------------------------------------------------------------------------------------------
const account = await (async () => {
  const response = await fetch(`${workerUrl}/admin/v1/accounts`, {
    method: "POST",
    headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({ name: `webhook bench ${run}` }),
  });
  if (response.status !== 201) throw new Error(`account creation: ${response.status} ${await response.text()}`);
  return (await response.json()) as Account;
})();

// --- 1. throughput through the queue ---------------------------------------------------------------------------
const fastPath = `/bench/${run}/fast`;
const fast = await createEndpoint(account.api_key, fastPath);
await insertEvents(account, events, `${run}a`);
const queueStart = await fireCron();
const queued = await waitFor(fastPath, events, 300_000);
const queueMs = Math.max(...queued.map((r) => r.received_at_ms)) - queueStart;
const firstMs = Math.min(...queued.map((r) => r.received_at_ms)) - queueStart;
const distinct = new Set(queued.map((r) => r.headers["webhook-id"])).size;
const badSignatures = await checkSignatures(queued, fast.secret);
const sampleBody = queued[0]!.body;

// --- 2. baselines: plain fetch to the same receiver --------------------------------------------------------------
const plainPath = `/bench/${run}/plain`;
let plainStart = Date.now();
for (let i = 0; i < events; i++) {
  const response = await fetch(receiverUrl(plainPath), { method: "POST", headers: { "Content-Type": "application/json" }, body: sampleBody });
  await response.arrayBuffer();
}
const plainSerialMs = Date.now() - plainStart;
const concurrentPath = `/bench/${run}/plain50`;
plainStart = Date.now();
let next = 0;
await Promise.all(
  Array.from({ length: 50 }, async () => {
    while (next < events) {
      next++;
      const response = await fetch(receiverUrl(concurrentPath), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: sampleBody,
      });
      await response.arrayBuffer();
    }
  }),
);
const plainConcurrentMs = Date.now() - plainStart;

// --- 3. a 5 s receiver next to a fast one ------------------------------------------------------------------------
const slowAccount = await (async () => {
  const response = await fetch(`${workerUrl}/admin/v1/accounts`, {
    method: "POST",
    headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({ name: `webhook bench slow ${run}` }),
  });
  return (await response.json()) as Account;
})();
const slowPath = `/bench/${run}/slow`;
const nextToSlowPath = `/bench/${run}/next-to-slow`;
await fetch(`http://127.0.0.1:${receiverPort}/_rules`, { method: "POST", body: JSON.stringify({ path: slowPath, status: 200, delay_ms: 5000 }) });
await createEndpoint(slowAccount.api_key, slowPath);
await createEndpoint(slowAccount.api_key, nextToSlowPath);
await insertEvents(slowAccount, slowEvents, `${run}b`);
const slowStart = await fireCron();
const nextToSlow = await waitFor(nextToSlowPath, slowEvents, 600_000);
const slow = await waitFor(slowPath, slowEvents, 600_000);
const fastLatencies = nextToSlow.map((r) => r.received_at_ms - slowStart);
const slowLatencies = slow.map((r) => r.received_at_ms - slowStart);
// How far apart did each event's fast and slow request arrive?
const slowArrivalByEvent = new Map(slow.map((r) => [r.headers["webhook-id"], r.received_at_ms]));
const pairGaps = nextToSlow.map((r) => Math.abs(r.received_at_ms - (slowArrivalByEvent.get(r.headers["webhook-id"]) ?? Number.NaN)));
const slowTotalMs = Math.max(...slowLatencies);

// --- report --------------------------------------------------------------------------------------------------------
console.log(`
Webhook delivery bench (${workerUrl}, receiver on 127.0.0.1:${receiverPort})

1. Through the real queue (cron sweep → dispatch → queue → consumer → signed POST → D1 log), ${events} events, 1 endpoint
   all delivered in ${seconds(queueMs)} from the cron request: ${rate(events, queueMs)}; first arrival after ${seconds(firstMs)}
   distinct event ids ${distinct}/${events}; signatures failing verifyWebhook: ${badSignatures}

2. Plain fetch from Node to the same receiver, ${events} POSTs of the same body
   one at a time: ${seconds(plainSerialMs)} (${rate(events, plainSerialMs)});  50 in flight: ${seconds(plainConcurrentMs)} (${rate(events, plainConcurrentMs)})

3. ${slowEvents} events to two endpoints, one answering after 5 s
   fast endpoint: p50 ${seconds(percentile(fastLatencies, 50))}, p95 ${seconds(percentile(fastLatencies, 95))}, last ${seconds(Math.max(...fastLatencies))} after the cron request
   slow endpoint: p50 ${seconds(percentile(slowLatencies, 50))}, last ${seconds(slowTotalMs)}
   fast endpoint alone (part 1) vs next to the slow one: last delivery ${seconds(queueMs)} vs ${seconds(Math.max(...fastLatencies))}
   gap between an event's fast and slow arrival: p50 ${percentile(pairGaps, 50)} ms, max ${Math.max(...pairGaps)} ms
   ${slowEvents} slow deliveries took ${seconds(slowTotalMs)} in all; one after another they would take ${seconds(slowEvents * 5000)}
   (each endpoint delivers from its own WebhookEndpointQueue object, so the slow receiver only holds up itself)
`);

await receiver.close();
