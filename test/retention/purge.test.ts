import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { config, ConfigError } from "../../src/config";
import { eventStatement } from "../../src/domain/events/events";
import { MESSAGES_PER_RUN, purgeExpiredData } from "../../src/domain/retention/purge";
import worker from "../../src/index";
import { audienceOf, campaignAccount, campaignMessages, campaignOf, sendCampaign, throttled, waitForStatus } from "../support/campaigns";
import { countingD1 } from "../support/d1-counting";
import { deliverToEmailHandler, report, sentMessage } from "../support/feedback";
import { call, createAccount, d1Of, dbOf, json } from "../support/helpers";
import { eventually, messageOf, storedMessage, verifiedDomain } from "../support/sending";
import { createEndpoint, receiverPath, receiverUrl } from "../support/webhooks";

// The retention purge (src/domain/retention/purge.ts) against real D1 and R2: messages sent through the real pipeline,
// then aged by back-dating their rows (the Workers runtime's clock cannot be moved), then purged by the cron task.

const dayMs = 86_400_000;
const daysAgo = (days: number) => new Date(Date.now() - days * dayMs).toISOString();
const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;
const ids = (values: string[]) => JSON.stringify(values);
/** This Worker's env with RETENTION_DAYS set, as `wrangler.toml` [vars] or `--var` would set it. */
const withRetentionDays = (days: string) => ({ ...env, RETENTION_DAYS: days });

type Owner = { database: string };

/** A purge run in the account database that holds `account`'s rows, as the cron runs one in each. */
const purge = (account: Owner, runEnv: Env = env) => purgeExpiredData(openCtx(runEnv, undefined, account));

/** Moves messages, their events and those events' webhook deliveries `days` back, as if all of it happened then. */
async function age(account: Owner, messageIds: string[], days: number) {
  const at = daysAgo(days);
  const inEventsOf = "event_id IN (SELECT id FROM events WHERE subject_id IN (SELECT value FROM json_each(?1)))";
  const d1 = d1Of(account);
  await d1.batch([
    d1
      .prepare("UPDATE messages SET created_at = ?2, updated_at = ?2, sent_at = ?2 WHERE id IN (SELECT value FROM json_each(?1))")
      .bind(ids(messageIds), at),
    d1.prepare(`UPDATE webhook_deliveries SET created_at = ?2 WHERE ${inEventsOf}`).bind(ids(messageIds), at),
    d1
      .prepare(
        "UPDATE events SET created_at = ?2, dispatched_at = CASE WHEN dispatched_at IS NULL THEN NULL ELSE ?2 END WHERE subject_id IN (SELECT value FROM json_each(?1))",
      )
      .bind(ids(messageIds), at),
  ]);
}

const count = async (account: Owner, query: string, ...values: unknown[]) =>
  (await d1Of(account)
    .prepare(query)
    .bind(...values)
    .first<{ n: number }>())!.n;

/** What D1 holds for one message, its events' webhook deliveries counted by the event ids it had before. */
async function storedRows(account: Owner, messageId: string, eventIds: string[]) {
  return {
    messages: await count(account, "SELECT count(*) AS n FROM messages WHERE id = ?1", messageId),
    recipients: await count(account, "SELECT count(*) AS n FROM message_recipients WHERE message_id = ?1", messageId),
    tags: await count(account, "SELECT count(*) AS n FROM message_tags WHERE message_id = ?1", messageId),
    events: await count(account, "SELECT count(*) AS n FROM events WHERE subject_id = ?1", messageId),
    feedback: await count(account, "SELECT count(*) AS n FROM delivery_feedback WHERE message_id = ?1", messageId),
    webhookDeliveries: await count(
      account,
      "SELECT count(*) AS n FROM webhook_deliveries WHERE event_id IN (SELECT value FROM json_each(?1))",
      ids(eventIds),
    ),
  };
}

const eventIdsOf = async (account: Owner, messageId: string) =>
  (await d1Of(account).prepare("SELECT id FROM events WHERE subject_id = ?1").bind(messageId).all<{ id: string }>()).results.map((row) => row.id);

/** Waits until every event of the message reached the endpoint and is logged as delivered there. */
const webhooksDone = (account: Owner, messageId: string) =>
  eventually(async () => {
    const eventIds = await eventIdsOf(account, messageId);
    const logged = await count(
      account,
      "SELECT count(DISTINCT event_id) AS n FROM webhook_deliveries WHERE status = 'succeeded' AND event_id IN (SELECT value FROM json_each(?1))",
      ids(eventIds),
    );
    return eventIds.length > 0 && logged === eventIds.length ? eventIds : undefined;
  }, 15_000);

const contentObjects = async () => (await env.BLOBS.list({ prefix: "messages/" })).objects.map((object) => object.key);

async function send(key: string, body: Record<string, unknown>): Promise<string> {
  const response = await call("/api/v1/send", { key, body });
  expect(response.status).toBe(202);
  return (await json<{ id: string }>(response)).id;
}

const sent = (key: string, id: string) => eventually(async () => ((await messageOf(key, id)).status === "sent" ? true : undefined));

describe("retention: what a purge removes and what it keeps", () => {
  it("removes an old finished message with its recipients, tags, events, webhook deliveries, feedback and R2 content; its id then answers 404", async () => {
    const account = await createAccount({ send_credits: 100 });
    const key = account.api_key;
    const domain = await verifiedDomain(key);
    const from = `Acme <hello@${domain.name}>`;
    await createEndpoint(key, { url: receiverUrl(receiverPath()), events: ["*"] });

    // Over 64 KB of content, so it is kept in R2; with a tag; delivered and reported to the webhook.
    const large = await send(key, { from, to: [rcpt("ann")], subject: "Digest", text: "x".repeat(70_000), tags: ["digest"] });
    // A hard bounce reported by DSN after the hand-off: a delivery_feedback row, and a suppression of the address.
    const bouncedTo = rcpt("gone");
    const bounced = await sentMessage(key, from, bouncedTo);
    await deliverToEmailHandler(
      bounced.returnPath,
      report("postfixHardBounce", { returnPath: bounced.returnPath, recipient: bouncedTo, messageId: bounced.messageIdHeader }),
    );
    await eventually(async () => ((await messageOf(key, bounced.id)).status === "bounced" ? true : undefined));
    // Just as large, but sent today.
    const young = await send(key, { from, to: [rcpt("bob")], subject: "Young", text: "y".repeat(70_000) });
    await sent(key, large);
    await sent(key, young);
    const largeEvents = await webhooksDone(account, large);
    const bouncedEvents = await webhooksDone(account, bounced.id);
    await webhooksDone(account, young);

    expect(await storedRows(account, large, largeEvents)).toEqual({
      messages: 1,
      recipients: 1,
      tags: 1,
      events: 1,
      feedback: 0,
      webhookDeliveries: 1,
    });
    expect(await storedRows(account, bounced.id, bouncedEvents)).toMatchObject({ messages: 1, recipients: 1, feedback: 1 });
    // The content of the large ones, and the raw source of each message as sent.
    expect(await contentObjects()).toEqual(
      expect.arrayContaining([`messages/${large}.json`, `messages/${young}.json`, ...[large, bounced.id, young].map((id) => `messages/${id}.eml`)]),
    );
    expect((await call(`/api/v1/messages/${large}/raw`, { key })).status).toBe(200);
    const ledger = async () =>
      (await d1Of(account).prepare("SELECT * FROM credit_ledger WHERE account_id = ?1 ORDER BY rowid").bind(account.id).all()).results;
    const ledgerBefore = await ledger();
    expect(ledgerBefore.length).toBeGreaterThan(0);
    const suppressionsBefore = await json(await call("/api/v1/suppressions", { key }));
    const creditsBefore = await json(await call("/api/v1/credits", { key }));
    expect(JSON.stringify(suppressionsBefore)).toContain(bouncedTo);

    await age(account, [large, bounced.id], 31);
    const summary = await purge(account);

    expect(summary).toMatchObject({ messages: 2, contentObjects: 3 });
    for (const [id, eventIds] of [
      [large, largeEvents],
      [bounced.id, bouncedEvents],
    ] as const) {
      expect(await storedRows(account, id, eventIds)).toEqual({ messages: 0, recipients: 0, tags: 0, events: 0, feedback: 0, webhookDeliveries: 0 });
      const response = await call(`/api/v1/messages/${id}`, { key });
      expect(response.status).toBe(404);
      // Exactly what an id that never existed gets.
      const unknown = await call("/api/v1/messages/msg_neverexisted", { key });
      expect(await json(response)).toEqual(await json(unknown));
      for (const path of ["raw", "content"]) expect((await call(`/api/v1/messages/${id}/${path}`, { key })).status).toBe(404);
    }
    const objects = await contentObjects();
    expect(objects).not.toContain(`messages/${large}.json`);
    expect(objects).not.toContain(`messages/${large}.eml`);
    expect(objects).not.toContain(`messages/${bounced.id}.eml`);
    expect(objects).toContain(`messages/${young}.json`);
    expect(objects).toContain(`messages/${young}.eml`);
    expect((await messageOf(key, young)).status).toBe("sent");
    const listed = await json<{ data: { id: string }[] }>(await call("/api/v1/messages?limit=100", { key }));
    expect(listed.data.map((message) => message.id)).toEqual([young]);

    // The ledger, the suppression list and the balances are as they were.
    expect(await ledger()).toEqual(ledgerBefore);
    expect(await json(await call("/api/v1/suppressions", { key }))).toEqual(suppressionsBefore);
    expect(await json(await call("/api/v1/credits", { key }))).toEqual(creditsBefore);
  });

  it("keeps old messages still on their way, and messages whose status changed within the window", async () => {
    const account = await createAccount({ send_credits: 100 });
    const domain = await verifiedDomain(account.api_key);
    const from = `hello@${domain.name}`;
    const pending: Record<string, string> = {};
    for (const status of ["queued", "sending", "deferred", "scheduled"]) {
      pending[status] = await storedMessage(account.id, domain.id, from, rcpt(status));
      await d1Of(account).prepare("UPDATE messages SET status = ?2 WHERE id = ?1").bind(pending[status], status).run();
    }
    const recentlyChanged = await storedMessage(account.id, domain.id, from, rcpt("late"));
    await d1Of(account).prepare("UPDATE messages SET status = 'delivered' WHERE id = ?1").bind(recentlyChanged).run();
    await age(account, [...Object.values(pending), recentlyChanged], 90);
    // A late bounce or delivery report moved it yesterday.
    await d1Of(account).prepare("UPDATE messages SET updated_at = ?2 WHERE id = ?1").bind(recentlyChanged, daysAgo(1)).run();

    await purge(account);

    for (const id of [...Object.values(pending), recentlyChanged]) {
      expect((await call(`/api/v1/messages/${id}`, { key: account.api_key })).status).toBe(200);
    }
  });

  it("keeps an old message while one of its events may still be retried to a webhook (a day), then removes it", async () => {
    const account = await createAccount({ send_credits: 100 });
    const domain = await verifiedDomain(account.api_key);
    const id = await storedMessage(account.id, domain.id, `hello@${domain.name}`, rcpt("ann"));
    await d1Of(account).prepare("UPDATE messages SET status = 'delivered' WHERE id = ?1").bind(id).run();
    await age(account, [id], 40);
    // Opened just now: an engagement event, dispatched, whose webhook deliveries may still be retrying.
    await d1Of(account).batch([
      eventStatement(dbOf(account), { accountId: account.id, type: "opened", subjectId: id, dedupeKey: `opened:${id}`, data: { message_id: id } }),
      d1Of(account).prepare("UPDATE events SET dispatched_at = created_at WHERE subject_id = ?1").bind(id),
    ]);

    await purge(account);
    expect((await call(`/api/v1/messages/${id}`, { key: account.api_key })).status).toBe(200);

    await d1Of(account).prepare("UPDATE events SET created_at = ?2, dispatched_at = ?2 WHERE subject_id = ?1").bind(id, daysAgo(2)).run();
    await purge(account);
    expect((await call(`/api/v1/messages/${id}`, { key: account.api_key })).status).toBe(404);
  });

  it("removes old events of no message and old webhook deliveries (test events included), keeping young ones", async () => {
    const account = await createAccount({ send_credits: 100 });
    const key = account.api_key;
    const endpoint = await createEndpoint(key, { url: receiverUrl(receiverPath()), events: ["*"] });
    const domainEvent = (dedupeKey: string) =>
      eventStatement(dbOf(account), { accountId: account.id, type: "warmup.status_changed", subjectId: "dom_retention", dedupeKey, data: {} });
    await d1Of(account).batch([domainEvent("warmup:old"), domainEvent("warmup:young")]);
    await d1Of(account)
      .prepare("UPDATE events SET created_at = ?2, dispatched_at = ?2 WHERE account_id = ?1 AND dedupe_key = 'warmup:old'")
      .bind(account.id, daysAgo(45))
      .run();
    await d1Of(account)
      .prepare("UPDATE events SET dispatched_at = created_at WHERE account_id = ?1 AND dedupe_key = 'warmup:young'")
      .bind(account.id)
      .run();
    for (let i = 0; i < 2; i++) expect((await call(`/api/v1/webhooks/${endpoint.id}/test`, { key, body: { type: "delivered" } })).status).toBe(200);
    const deliveries = async () =>
      (await json<{ data: { event_id: string }[] }>(await call(`/api/v1/webhooks/${endpoint.id}/deliveries`, { key }))).data.map(
        (row) => row.event_id,
      );
    const [newest, oldest] = await deliveries();
    await d1Of(account).prepare("UPDATE webhook_deliveries SET created_at = ?2 WHERE event_id = ?1").bind(oldest, daysAgo(45)).run();

    await purge(account);

    const left = (await d1Of(account).prepare("SELECT dedupe_key FROM events WHERE account_id = ?1").bind(account.id).all<{ dedupe_key: string }>())
      .results;
    expect(left.map((row) => row.dedupe_key)).toEqual(["warmup:young"]);
    expect(await deliveries()).toEqual([newest]);
  });
});

describe("retention: reports and campaigns read the same before and after a purge", () => {
  it("GET /campaigns/{id}, GET /reports/campaigns/{id}, GET /reports/overview and GET /usage are unchanged once the campaign's messages are gone", async () => {
    const setup = await campaignAccount({ sendCredits: 20 });
    const { key } = setup;
    const { list } = await audienceOf(key, 3);
    const campaign = await sendCampaign(key, setup.sender, list);
    await waitForStatus(key, campaign.id, "sent");
    const api = await send(key, { from: `hello@${setup.domain.name}`, to: [rcpt("api")], subject: "Receipt", text: "Thanks" });
    await sent(key, api);
    const messageIds = [...(await campaignMessages(campaign.id)).map((message) => message.id), api];
    expect(messageIds).toHaveLength(4);
    const reads = async () => ({
      campaign: await json(await call(`/api/v1/campaigns/${campaign.id}`, { key })),
      campaignReport: await json(await call(`/api/v1/reports/campaigns/${campaign.id}`, { key })),
      overview: await json(await call("/api/v1/reports/overview", { key })),
      usage: await json(await call("/api/v1/usage", { key })),
    });
    const before = await reads();
    expect(before.campaign).toMatchObject({ counters: { recipients: 3, sent: 3 } });

    await age(setup.account, messageIds, 31);
    expect(await purge(setup.account)).toMatchObject({ messages: 4 });

    expect(await campaignMessages(campaign.id)).toEqual([]);
    expect(await reads()).toEqual(before);
  });

  it("keeps the messages of a campaign still sending, however old", async () => {
    // A daily limit of 1: one message goes out, the campaign waits for tomorrow with two still scheduled.
    const setup = await campaignAccount({ sendCredits: 20, dailySendLimit: 1 });
    const { list } = await audienceOf(setup.key, 3);
    const campaign = await sendCampaign(setup.key, setup.sender, list);
    const waiting = await throttled(setup.key, campaign.id, 1);
    const messages = await campaignMessages(campaign.id);
    await age(
      setup.account,
      messages.map((message) => message.id),
      60,
    );

    await purge(setup.account);

    expect(await campaignMessages(campaign.id)).toHaveLength(3);
    expect((await campaignOf(setup.key, campaign.id)).counters).toEqual(waiting.counters);
  });

  it("counts a campaign's purged messages once when two runs race over the same page", async () => {
    const setup = await campaignAccount({ sendCredits: 20 });
    const { list } = await audienceOf(setup.key, 3);
    const campaign = await sendCampaign(setup.key, setup.sender, list);
    const done = await waitForStatus(setup.key, campaign.id, "sent");
    await age(
      setup.account,
      (await campaignMessages(campaign.id)).map((message) => message.id),
      31,
    );

    const runs = await Promise.all([purge(setup.account), purge(setup.account)]);

    expect(runs[0]!.messages + runs[1]!.messages).toBe(3);
    expect((await campaignOf(setup.key, campaign.id)).counters).toEqual(done.counters);
  });
});

/** `total` old delivered messages of one account, each with a recipient and an event, written in a few statements. */
async function seedOldMessages(account: { id: string; database: string }, total: number, days: number) {
  const accountId = account.id;
  const d1 = d1Of(account);
  const at = daysAgo(days);
  const series = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)`;
  const id = `'msg_seed' || ?1 || '_' || i`;
  await d1.batch([
    d1
      .prepare(
        `INSERT INTO messages (id, account_id, source, status, from_address, domain_id, subject, tags, metadata, content, credits_charged, created_at, updated_at)
       ${series} SELECT ${id}, ?3, 'api', 'delivered', 'a@seed.test', 'dom_seed', 'Seed', '[]', '{}', '{}', 1, ?4, ?4 FROM n`,
      )
      .bind(accountId.slice(4), total, accountId, at),
    d1
      .prepare(
        `INSERT INTO message_recipients (message_id, email, account_id, status, updated_at)
       ${series} SELECT ${id}, 'r' || i || '@seed.test', ?3, 'delivered', ?4 FROM n`,
      )
      .bind(accountId.slice(4), total, accountId, at),
    d1
      .prepare(
        `INSERT INTO events (id, account_id, type, subject_id, dedupe_key, data, created_at, dispatched_at)
       ${series} SELECT 'evt_seed' || ?1 || '_' || i, ?3, 'relay.delivered', ${id}, 'seed:' || i, '{}', ?4, ?4 FROM n`,
      )
      .bind(accountId.slice(4), total, accountId, at),
  ]);
}

const accountRows = async (account: { id: string; database: string }) => ({
  messages: await count(account, "SELECT count(*) AS n FROM messages WHERE account_id = ?1", account.id),
  recipients: await count(account, "SELECT count(*) AS n FROM message_recipients WHERE account_id = ?1", account.id),
  events: await count(account, "SELECT count(*) AS n FROM events WHERE account_id = ?1", account.id),
});

describe("retention: bounded runs", () => {
  it(`purges at most ${MESSAGES_PER_RUN} messages a run, oldest first, in a bounded number of D1 round trips; the next run finishes`, async () => {
    const account = await createAccount();
    const extra = 150;
    await seedOldMessages(account, MESSAGES_PER_RUN + extra, 40);
    // The newest of the backlog: what a run that goes oldest first leaves for the next one.
    const newest = await storedMessage(account.id, "dom_seed", "a@seed.test", "newest@seed.test");
    await d1Of(account).prepare("UPDATE messages SET status = 'delivered', updated_at = ?2 WHERE id = ?1").bind(newest, daysAgo(35)).run();

    const { counted, usage } = countingD1(d1Of(account));
    const first = await purge(account, { ...env, [account.database]: counted });
    expect(first.messages).toBe(MESSAGES_PER_RUN);
    expect(await accountRows(account)).toEqual({ messages: extra + 1, recipients: extra + 1, events: extra });
    expect((await call(`/api/v1/messages/${newest}`, { key: account.api_key })).status).toBe(200);
    // Per page of 200 messages: one batch of 7 reads (one per final status), one batch of 7 writes; then the webhook
    // log's single statement and received mail's (none here).
    // The events of other messages wait for a run that has caught up with the messages.
    expect(usage).toMatchObject({ roundTrips: 25 * 2 + 2, statements: 25 * (7 + 7) });

    const second = await purge(account);
    expect(second.messages).toBe(extra + 1);
    expect(await accountRows(account)).toEqual({ messages: 0, recipients: 0, events: 0 });
    expect(await purge(account)).toEqual({ messages: 0, contentObjects: 0, events: 0, webhookDeliveries: 0, inboundEmails: 0 });
  }, 60_000);
});

describe("retention: RETENTION_DAYS", () => {
  it("0 keeps everything", async () => {
    const account = await createAccount();
    await seedOldMessages(account, 10, 400);

    expect(await purge(account, withRetentionDays("0"))).toEqual({
      messages: 0,
      contentObjects: 0,
      events: 0,
      webhookDeliveries: 0,
      inboundEmails: 0,
    });
    expect(await accountRows(account)).toEqual({ messages: 10, recipients: 10, events: 10 });
    // Switched back on, the next run removes them.
    expect(await purge(account)).toMatchObject({ messages: 10 });
  });

  it("is 30 days unless set, and a longer window keeps what a shorter one purges", async () => {
    expect(config(env).retentionDays).toBe(30);
    const account = await createAccount();
    await seedOldMessages(account, 5, 45);

    expect(await purge(account, withRetentionDays("60"))).toMatchObject({ messages: 0 });
    expect(await purge(account, withRetentionDays("40"))).toMatchObject({ messages: 5 });
  });

  it.each([
    ["7", "RETENTION_DAYS: must be 0 (keep everything) or at least 30 days: unsubscribe links must work for 30 days"],
    ["-1", "RETENTION_DAYS: must be 0 (keep everything) or at least 30 days: unsubscribe links must work for 30 days"],
    ["thirty", "RETENTION_DAYS: must be a whole number of days"],
    ["30.5", "RETENTION_DAYS: must be a whole number of days"],
    ["100000", "RETENTION_DAYS: must be at most 3650 days"],
  ])("%s fails the configuration check with a readable error", async (value, message) => {
    const invalid = withRetentionDays(value);
    expect(() => config(invalid)).toThrow(ConfigError);
    expect(() => config(invalid)).toThrow(`invalid configuration: ${message}`);
    await expect(purgeExpiredData(openCtx(invalid))).rejects.toThrow(message);
  });
});

describe("retention: the cron", () => {
  it("runs the purge from the Worker's scheduled handler", async () => {
    const account = await createAccount();
    await seedOldMessages(account, 3, 31);

    const ctx = createExecutionContext();
    await worker.scheduled(createScheduledController({ cron: "*/15 * * * *" }), env, ctx);
    await waitOnExecutionContext(ctx);

    expect(await accountRows(account)).toEqual({ messages: 0, recipients: 0, events: 0 });
  });
});
