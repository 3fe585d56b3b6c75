// D1's one writer per database (docs/scaling.md, "Account databases"): what a deployment carries is set by its busiest
// database. Several accounts in both account databases send, have their mail delivered, their webhook events delivered
// to their endpoints, and their readers' opens and clicks recorded, all through bindings that count each database's
// round trips and statements: `DB` (the directory, read through the isolate's key, domain and placement caches)
// carries a small share, and each account database its accounts' share.
import { env } from "cloudflare:workers";
import { createExecutionContext, createMessageBatch, getQueueResult, waitOnExecutionContext } from "cloudflare:test";
import PostalMime from "postal-mime";
import { expect, it } from "vitest";
import { createApp } from "../../src/app";
import type { WebhookDeliveryMessage } from "../../src/domain/webhooks/dispatch";
import worker from "../../src/index";
import { consumeSendBatch } from "../../src/queues/send";
import { consumeWebhookDeliveries, deliverWebhookMessages } from "../../src/queues/webhooks";
import { countingDatabases } from "../support/d1-counting";
import { createAccount, d1Of, type CreatedAccount } from "../support/helpers";
import { messageOf, sinkMessagesTo, sinkRaw, verifiedDomain } from "../support/sending";
import { createEndpoint, RecordingQueue, receivedOn, receiverPath, receiverUrl, specVerify } from "../support/webhooks";

/** Holds what a producer sends, so this test delivers it (through the counted bindings) instead of the queue's consumer. */
class HeldQueue {
  readonly bodies: unknown[] = [];
  async send(body: unknown) {
    this.bodies.push(body);
  }
  async sendBatch(messages: Iterable<MessageSendRequest>) {
    for (const message of messages) this.bodies.push(message.body);
  }
  take(): unknown[] {
    return this.bodies.splice(0);
  }
}

const accountsPerDatabase = 2;
const sendsPerAccount = 8;
const reader = { "User-Agent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko)" };

type Sender = CreatedAccount & { from: string; path: string; secret: string };

it("spreads a mixed load over the account databases by their accounts, DB under 10 % of the round trips", async () => {
  // Placement puts each new account in the account database with the fewest: accounts alternate between the two.
  const accounts: Sender[] = [];
  const inDatabase = (name: string) => accounts.filter((account) => account.database === name).length;
  for (
    let made = 0;
    made < 8 && !(inDatabase("ACCOUNT_DB_0") === accountsPerDatabase && inDatabase("ACCOUNT_DB_1") === accountsPerDatabase);
    made++
  ) {
    const account = await createAccount({ send_credits: 100 });
    if (inDatabase(account.database) >= accountsPerDatabase) continue;
    const domain = await verifiedDomain(account.api_key);
    const path = receiverPath();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl(path), events: ["*"] });
    accounts.push({ ...account, from: `News <news@${domain.name}>`, path, secret: endpoint.secret });
  }
  expect(accounts.map((account) => account.database).sort()).toEqual(["ACCOUNT_DB_0", "ACCOUNT_DB_0", "ACCOUNT_DB_1", "ACCOUNT_DB_1"]);

  const databases = countingDatabases(env);
  const sendQueue = new HeldQueue();
  const webhookQueue = new RecordingQueue();
  // Each endpoint's WebhookEndpointQueue object delivers with its own env, which no binding here counts: this stand-in
  // runs what its alarm runs (`deliverWebhookMessages` on the attempts it was handed) at once, through the counted
  // bindings. A consumer batch holds at most 50, so what one hands an endpoint is one run of its alarm (50 a run).
  const undelivered: WebhookDeliveryMessage[] = [];
  const endpointQueues = {
    getByName: () => ({
      enqueue: async (deliveries: WebhookDeliveryMessage[]) => {
        const outcomes = await deliverWebhookMessages(countedEnv, deliveries);
        undelivered.push(...deliveries.filter((_, i) => outcomes[i] !== "done"));
      },
    }),
  };
  const countedEnv = {
    ...databases.env,
    SEND_QUEUE: sendQueue as unknown as Queue,
    WEBHOOK_QUEUE: webhookQueue as unknown as Queue,
    WEBHOOK_ENDPOINT_QUEUE: endpointQueues as unknown as Env["WEBHOOK_ENDPOINT_QUEUE"],
    ALLOW_PRIVATE_WEBHOOK_URLS: "true",
  } as Env;
  const app = createApp();

  const send = async (account: Sender, to: string) => {
    const ctx = createExecutionContext();
    const response = await app.fetch(
      new Request("http://localhost/api/v1/send", {
        method: "POST",
        headers: { Authorization: `Bearer ${account.api_key}`, "Content-Type": "application/json" },
        body: JSON.stringify({
          from: account.from,
          to: [to],
          subject: "Spring sale",
          html: '<p>Hello {{name}}, <a href="https://shop.example/sale">shop now</a>.</p>',
          variables: { name: "Ann" },
          track_opens: true,
          track_clicks: true,
          tags: ["sale"],
        }),
      }),
      countedEnv,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(202);
    return ((await response.json()) as { id: string }).id;
  };
  /** Hands `bodies` to `consume` as queue `name` would: in order, in batches of up to `size` (wrangler.toml), none retried. */
  const consumeAsQueue = async (name: string, size: number, bodies: unknown[], consume: (batch: MessageBatch) => Promise<void>) => {
    for (let start = 0; start < bodies.length; start += size) {
      const batch = createMessageBatch(
        name,
        bodies.slice(start, start + size).map((body, index) => ({ id: `${name}-${start + index}`, timestamp: new Date(), attempts: 1, body })),
      );
      await consume(batch);
      const result = await getQueueResult(batch, createExecutionContext());
      expect(result.retryMessages).toEqual([]);
    }
  };
  /** What the send queue holds, delivered as its consumer would: batches of up to 100, mixed across accounts. */
  const deliverHeld = () => consumeAsQueue("mailforge-send", 100, sendQueue.take(), (batch) => consumeSendBatch(batch, countedEnv));
  /** What the webhook queue holds, handed to the endpoints' objects and delivered as the consumer would. */
  const deliverHeldEvents = async () => {
    const bodies = webhookQueue.take().map((sent) => sent.body);
    await consumeAsQueue("mailforge-webhooks", 50, bodies, (batch) => consumeWebhookDeliveries(batch, countedEnv));
    // None to run again, and none failed at its receiver and was scheduled again.
    expect(undelivered).toEqual([]);
    expect(webhookQueue.sent).toEqual([]);
  };
  /** A reader's fetch of a tracking link, through the Worker with the counted bindings, its recording waited for. */
  const hit = async (path: string) => {
    const ctx = createExecutionContext();
    const response = await worker.fetch!(
      new Request(`http://localhost${path}`, { headers: reader, redirect: "manual" }) as Request<unknown, IncomingRequestCfProperties>,
      countedEnv,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    return response;
  };

  // Warm-up: each account's key, verified domain and signing domain are read once from DB into the isolate's caches.
  for (const account of accounts) await send(account, `warm-${crypto.randomUUID().slice(0, 8)}@example.net`);
  await deliverHeld();
  webhookQueue.take();
  databases.reset();

  // The load: the accounts' sends interleaved, as concurrent senders' requests arrive, then their delivery and the
  // delivery of their events to the accounts' endpoints.
  const sent: { account: Sender; id: string; to: string }[] = [];
  for (let round = 0; round < sendsPerAccount; round++) {
    for (const account of accounts) {
      const to = `reader-${crypto.randomUUID().slice(0, 8)}@example.net`;
      sent.push({ account, id: await send(account, to), to });
    }
  }
  await deliverHeld();
  await deliverHeldEvents();

  // Every message reached its reader, with an open pixel and a tracked link in its html.
  const links: { pixel: string; click: string }[] = [];
  for (const { to } of sent) {
    const received = await sinkMessagesTo(to);
    expect(received).toHaveLength(1);
    const { html } = await PostalMime.parse(await sinkRaw(received[0]!.id));
    const pixel = html?.match(/<img src="http:\/\/127\.0\.0\.1:8787(\/t\/o\/[^"]+)"/)?.[1];
    const click = html?.match(/href="http:\/\/127\.0\.0\.1:8787(\/t\/c\/[^"]+)"/)?.[1];
    expect(pixel).toBeDefined();
    expect(click).toBeDefined();
    links.push({ pixel: pixel!, click: click! });
  }
  // Read a minute after it was handed over: an open sooner than prefetchWindowMs is counted as a machine's. Written
  // through the uncounted binding, as it is the clock's doing, not the load's.
  for (const name of ["ACCOUNT_DB_0", "ACCOUNT_DB_1"]) {
    const ids = sent.filter(({ account }) => account.database === name).map(({ id }) => id);
    await d1Of({ database: name })
      .prepare("UPDATE messages SET sent_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-60 seconds') WHERE id IN (SELECT value FROM json_each(?1))")
      .bind(JSON.stringify(ids))
      .run();
  }
  // The readers open and click in the order the messages were sent, then the opened and clicked events are delivered.
  // Each account's first hit reads its placement from DB (`placementOf`, cached in the isolate for 5 s), the rest do not.
  for (const { pixel, click } of links) {
    const open = await hit(pixel);
    expect(open.status).toBe(200);
    expect(open.headers.get("Content-Type")).toBe("image/gif");
    const follow = await hit(click);
    expect(follow.status).toBe(302);
    expect(follow.headers.get("Location")).toBe("https://shop.example/sale");
  }
  await deliverHeldEvents();

  // Each account sees its messages sent, opened and clicked once; its endpoint received those events, each signed.
  for (const { account, id } of sent) {
    const message = await messageOf(account.api_key, id);
    expect(message.status).toBe("sent");
    expect(message.recipients[0]).toMatchObject({ opens: 1, clicks: 1 });
    expect(message.events.map((event) => event.type).sort()).toEqual(["clicked", "opened", "relay.sent"]);
  }
  const now = Math.floor(Date.now() / 1000);
  for (const account of accounts) {
    const requests = await receivedOn(account.path);
    const events = requests.map((request) => JSON.parse(request.body) as { type: string; data: { message_id: string } });
    const expected = sent
      .filter((message) => message.account === account)
      .flatMap(({ id }) => ["clicked", "opened", "relay.sent"].map((type) => `${type} ${id}`));
    expect(events.map((event) => `${event.type} ${event.data.message_id}`).sort()).toEqual(expected.sort());
    for (const request of requests) expect(await specVerify(account.secret, request.headers["x-service-signature"]!, request.body, now)).toBe(true);
  }

  const summary = databases.summary();
  expect(summary.DB!.share).toBeLessThan(0.1);
  // Each account database carries its accounts' share of the load (here half each), within a tenth.
  const accountRoundTrips = summary.ACCOUNT_DB_0!.roundTrips + summary.ACCOUNT_DB_1!.roundTrips;
  const accountStatements = summary.ACCOUNT_DB_0!.statements + summary.ACCOUNT_DB_1!.statements;
  for (const name of ["ACCOUNT_DB_0", "ACCOUNT_DB_1"]) {
    const share = inDatabase(name) / accounts.length;
    expect(Math.abs(summary[name]!.roundTrips / accountRoundTrips - share)).toBeLessThan(0.1);
    expect(Math.abs(summary[name]!.statements / accountStatements - share)).toBeLessThan(0.1);
  }
}, 60_000);
