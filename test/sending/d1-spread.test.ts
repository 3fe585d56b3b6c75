// D1's one writer per database (docs/scaling.md, "Account databases"): what a deployment carries is set by its busiest
// database. Several accounts in both account databases send and have their mail delivered (their webhook events
// dispatched, opens and clicks tracked in every html part) through bindings that count each database's round trips
// and statements: `DB` (the directory, read through the isolate's key and domain caches) carries a small share, and
// each account database its accounts' share.
import { env } from "cloudflare:workers";
import { createExecutionContext, createMessageBatch, getQueueResult, waitOnExecutionContext } from "cloudflare:test";
import { expect, it } from "vitest";
import { createApp } from "../../src/app";
import { consumeSendBatch } from "../../src/queues/send";
import { countingDatabases } from "../support/d1-counting";
import { createAccount, type CreatedAccount } from "../support/helpers";
import { messageOf, sinkMessagesTo, verifiedDomain } from "../support/sending";
import { createEndpoint, RecordingQueue, receiverPath, receiverUrl } from "../support/webhooks";

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

it("spreads a mixed load over the account databases by their accounts, DB under 10 % of the round trips", async () => {
  // Placement puts each new account in the account database with the fewest: accounts alternate between the two.
  const accounts: (CreatedAccount & { from: string })[] = [];
  const inDatabase = (name: string) => accounts.filter((account) => account.database === name).length;
  for (
    let made = 0;
    made < 8 && !(inDatabase("ACCOUNT_DB_0") === accountsPerDatabase && inDatabase("ACCOUNT_DB_1") === accountsPerDatabase);
    made++
  ) {
    const account = await createAccount({ send_credits: 100 });
    if (inDatabase(account.database) >= accountsPerDatabase) continue;
    const domain = await verifiedDomain(account.api_key);
    await createEndpoint(account.api_key, { url: receiverUrl(receiverPath()), events: ["*"] });
    accounts.push({ ...account, from: `News <news@${domain.name}>` });
  }
  expect(accounts.map((account) => account.database).sort()).toEqual(["ACCOUNT_DB_0", "ACCOUNT_DB_0", "ACCOUNT_DB_1", "ACCOUNT_DB_1"]);

  const databases = countingDatabases(env);
  const sendQueue = new HeldQueue();
  const webhookQueue = new RecordingQueue();
  const countedEnv = {
    ...databases.env,
    SEND_QUEUE: sendQueue as unknown as Queue,
    WEBHOOK_QUEUE: webhookQueue as unknown as Queue,
    ALLOW_PRIVATE_WEBHOOK_URLS: "true",
  } as Env;
  const app = createApp();

  const send = async (account: CreatedAccount & { from: string }, to: string) => {
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
  /** What the send queue holds, delivered as its consumer would: batches of up to 100, mixed across accounts. */
  const deliverHeld = async () => {
    const bodies = sendQueue.take();
    for (let start = 0; start < bodies.length; start += 100) {
      const batch = createMessageBatch(
        "mailforge-send",
        bodies.slice(start, start + 100).map((body, index) => ({ id: `held-${start + index}`, timestamp: new Date(), attempts: 1, body })),
      );
      await consumeSendBatch(batch, countedEnv);
      const result = await getQueueResult(batch, createExecutionContext());
      expect(result.retryMessages).toEqual([]);
    }
  };

  // Warm-up: each account's key, verified domain and signing domain are read once from DB into the isolate's caches.
  for (const account of accounts) await send(account, `warm-${crypto.randomUUID().slice(0, 8)}@example.net`);
  await deliverHeld();
  webhookQueue.take();
  databases.reset();

  // The load: the accounts' sends interleaved, as concurrent senders' requests arrive, then their delivery.
  const sent: { account: CreatedAccount; id: string; to: string }[] = [];
  for (let round = 0; round < sendsPerAccount; round++) {
    for (const account of accounts) {
      const to = `reader-${crypto.randomUUID().slice(0, 8)}@example.net`;
      sent.push({ account, id: await send(account, to), to });
    }
  }
  const accepted = databases.summary();
  await deliverHeld();

  // Every message reached its reader, and its account sees it sent; its events went to the account's endpoint.
  for (const { account, id, to } of sent) {
    expect(await sinkMessagesTo(to)).toHaveLength(1);
    expect((await messageOf(account.api_key, id)).status).toBe("sent");
  }
  expect(webhookQueue.take()).toHaveLength(sent.length);

  const summary = databases.summary();
  const total = Object.values(summary).reduce((sum, figures) => sum + figures.roundTrips, 0);
  console.info(
    `${accounts.length} accounts, ${sent.length} messages accepted and delivered (one send-queue batch): ${total} D1 round trips; ` +
      Object.entries(summary)
        .map(
          ([name, figures]) =>
            `${name} ${figures.roundTrips} (${(figures.share * 100).toFixed(1)} %), ${figures.statements} statements ` +
            `(accepting ${accepted[name]!.roundTrips} and ${accepted[name]!.statements}, delivering ` +
            `${figures.roundTrips - accepted[name]!.roundTrips} and ${figures.statements - accepted[name]!.statements})`,
        )
        .join("; "),
  );
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
