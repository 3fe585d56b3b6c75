import { openCtx } from "../../src/db/client";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/d1";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { messages } from "../../src/db/schema";
import { cancelCampaign, failUnstarted } from "../../src/domain/campaigns/campaigns";
import { completeIfDone, enqueueScheduled } from "../../src/domain/campaigns/fanout";
import { abandonMessages, deliverMessages } from "../../src/domain/sending/deliver";
import { recordOutcome } from "../../src/domain/sending/outcome";
import { sweepStaleClaims } from "../../src/domain/sending/recovery";
import { call, d1Of, d1OfAccount, json } from "../support/helpers";
import { eventually, sinkMessagesTo, sinkRule } from "../support/sending";
import {
  alarmOf,
  audienceOf,
  backdate,
  campaignAccount,
  campaignMessages,
  campaignOf,
  ledgerOf,
  messageRows,
  minutesAgo,
  newSendingDay,
  progressObject,
  runCron,
  sendBalance,
  sendCampaign,
  throttled,
  waitForStatus,
  type Campaign,
} from "../support/campaigns";
import { accountD1s } from "../support/databases";

// How a campaign's reserved credits are settled on its failure paths (a failed fan-out, a queue outage, a lost
// progress save, the dead-letter queue, a cancel racing completion or losing its wake-up, a late outcome), through
// the real CampaignProgress object, D1, send queue and dev mail sink. Faults the runtime cannot be asked for (a queue
// that refuses, a Durable Object that cannot be reached) are injected into the platform binding only.

const deliveries = (addresses: string[]) => Promise.all(addresses.map(async (address) => (await sinkMessagesTo(address)).length));

/** Ledger entries of the account as `kind:amount:campaign|recipient`, sorted. */
async function ledgerKinds(accountId: string, campaignId: string) {
  return (await ledgerOf(accountId))
    .map((entry) => `${entry.kind}:${entry.amount}:${entry.reference_id === campaignId ? "campaign" : "recipient"}`)
    .sort();
}

const completedEvents = async (accountId: string) =>
  (await d1OfAccount(accountId))
    .prepare("SELECT count(*) AS total FROM events WHERE account_id = ?1 AND type = 'campaign.completed'")
    .bind(accountId)
    .first<{ total: number }>();

/**
 * A message the fan-out moved to `queued` whose queue message has not reached the consumer yet: the test holds it
 * and hands it over (or not) when it chooses.
 */
const holdInQueue = (messageId: string) =>
  Promise.all(accountD1s().map((d1) => d1.prepare("UPDATE messages SET status = 'queued' WHERE id = ?1").bind(messageId).run()));

/** A draft sent for later: scheduled, credits reserved, its object's alarm at send_at. */
async function scheduledCampaign(key: string, sender: string, list: string, sendAt = new Date(Date.now() + 86_400_000)) {
  const draft = await json<Campaign>(
    await call("/api/v1/campaigns", { key, body: { name: "later", sender_id: sender, subject: "Hi", text: "Hello", lists: [list] } }),
  );
  expect((await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: { send_at: sendAt.toISOString() } })).status).toBe(202);
  return draft;
}

/** An env whose binding `name` is replaced, for a fault the runtime cannot produce on request. */
function envWith<K extends keyof Env>(name: K, binding: unknown): Env {
  return new Proxy(env, { get: (target, prop) => (prop === name ? binding : Reflect.get(target, prop)) });
}

/** A D1 binding (`d1`) that records the SQL of every statement prepared through it. */
function recordingDb(d1: D1Database, prepared: string[]): D1Database {
  return new Proxy(d1, {
    get(target, prop) {
      if (prop === "prepare")
        return (query: string) => {
          prepared.push(query);
          return target.prepare(query);
        };
      const value: unknown = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** Replaces the env a live CampaignProgress object works with (undone by passing `env`). */
async function setObjectEnv(campaignId: string, objectEnv: Env) {
  await runInDurableObject(progressObject(campaignId), (instance) => {
    expect(Reflect.set(instance, "env", objectEnv)).toBe(true);
  });
}

describe("a campaign that fails midway", () => {
  it("cancels its unqueued messages, skips its queued ones and settles once drained, with nothing left reserved", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 2 });
    const { list, addresses } = await audienceOf(key, 4);
    const campaign = await sendCampaign(key, sender, list);
    await throttled(key, campaign.id, 2);
    const [held] = (await campaignMessages(campaign.id)).filter((message) => message.status === "scheduled");
    await holdInQueue(held!.id);

    // The sender is deleted while the fan-out sleeps: its next run fails the campaign.
    await d1Of(account).prepare("DELETE FROM senders WHERE id = ?1").bind(sender).run();
    await newSendingDay(account.id);
    await runDurableObjectAlarm(progressObject(campaign.id));
    const failing = await campaignOf(key, campaign.id);
    expect(failing).toMatchObject({ status: "failed", completed_at: null });
    expect(failing.counters).toMatchObject({ sent: 2, cancelled: 1, pending: 1 });

    // The queued message reaches the consumer after the failure: it is skipped, not sent.
    await env.SEND_QUEUE.send({ message_id: held!.id, database: account.database }, { contentType: "json" });
    const settled = await eventually(async () => {
      const current = await campaignOf(key, campaign.id);
      return current.completed_at ? current : undefined;
    }, 20_000);
    expect(settled.status).toBe("failed");
    expect(settled.counters).toMatchObject({ recipients: 4, sent: 2, cancelled: 2, pending: 0 });
    expect((await deliveries(addresses)).sort()).toEqual([0, 0, 1, 1]);
    expect(await ledgerKinds(account.id, campaign.id)).toEqual([
      "charge:-1:recipient",
      "charge:-1:recipient",
      "release:-1:campaign",
      "release:-1:recipient",
      "reservation:4:campaign",
    ]);
    expect(await sendBalance(key)).toEqual({ balance: 8, reserved: 0, available: 8 });
    expect(await completedEvents(account.id)).toEqual({ total: 0 });
  });

  it("does not fail a campaign that is no longer scheduled or sending when its fan-out could not be armed", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10 });
    const { list } = await audienceOf(key, 1);
    const campaign = await sendCampaign(key, sender, list);
    await waitForStatus(key, campaign.id, "sent");
    const before = await ledgerOf(account.id);

    await failUnstarted(openCtx(env, undefined, account), account.id, campaign.id);
    expect(await campaignOf(key, campaign.id)).toMatchObject({ status: "sent" });
    expect(await ledgerOf(account.id)).toEqual(before);
    expect(await sendBalance(key)).toEqual({ balance: 9, reserved: 0, available: 9 });
  });
});

describe("a queue outage during the fan-out", () => {
  it("gives the recipients it could not enqueue back to the day's sending limit", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 3 });
    const { list, addresses } = await audienceOf(key, 3);
    const campaign = await scheduledCampaign(key, sender, list);
    const refusing = { sendBatch: () => Promise.reject(new Error("queue unavailable")) };
    await setObjectEnv(campaign.id, envWith("SEND_QUEUE", refusing));
    await d1Of(account).prepare("UPDATE campaigns SET send_at = ?2 WHERE id = ?1").bind(campaign.id, minutesAgo(1)).run();

    await runDurableObjectAlarm(progressObject(campaign.id));
    const refused = await campaignOf(key, campaign.id);
    expect(refused).toMatchObject({ status: "sending" });
    expect(refused.counters).toMatchObject({ recipients: 3, sent: 0, pending: 3 });
    expect((await campaignMessages(campaign.id)).map((message) => message.status)).toEqual(["scheduled", "scheduled", "scheduled"]);

    // The queue is back: the whole audience still fits today's limit.
    await setObjectEnv(campaign.id, env);
    await runDurableObjectAlarm(progressObject(campaign.id));
    const done = await waitForStatus(key, campaign.id, "sent");
    expect(done.counters).toMatchObject({ recipients: 3, sent: 3, pending: 0 });
    expect(await deliveries(addresses)).toEqual([1, 1, 1]);
  });
});

describe("a queue refusing part of a fan-out step", () => {
  it("keeps what the queue took queued and puts only the refused slice back to scheduled", async () => {
    const { account, key, sender } = await campaignAccount();
    const { list } = await audienceOf(key, 1);
    const campaign = await scheduledCampaign(key, sender, list);
    const from = await d1Of(account)
      .prepare("SELECT email, domain_id FROM senders WHERE id = ?1")
      .bind(sender)
      .first<{ email: string; domain_id: string }>();
    // 250 messages as the fan-out writes them: three sendBatch slices of 100, 100 and 50
    const ids = Array.from({ length: 250 }, (_, i) => `msg_part${String(i).padStart(3, "0")}${campaign.id.slice(4, 12)}`);
    await d1Of(account)
      .prepare(
        `INSERT INTO messages (id, account_id, source, status, from_address, domain_id, subject, tags, metadata, content, credits_charged, campaign_id)
       SELECT value, ?1, 'campaign', 'scheduled', ?2, ?3, 'Hi', '[]', '{}', '{}', 1, ?4 FROM json_each(?5)`,
      )
      .bind(account.id, from?.email, from?.domain_id, campaign.id, JSON.stringify(ids))
      .run();
    const taken: string[][] = [];
    let calls = 0;
    const secondRefused = {
      sendBatch: async (batch: MessageSendRequest<{ message_id: string }>[]) => {
        calls += 1;
        if (calls === 2) throw new Error("queue unavailable");
        taken.push(batch.map((message) => message.body.message_id));
      },
    };
    const result = await enqueueScheduled(openCtx(envWith("SEND_QUEUE", secondRefused), undefined, account), campaign.id, 250);
    expect(result).toMatchObject({ enqueued: 150, error: expect.objectContaining({ message: "queue unavailable" }) });
    const rows = (
      await d1Of(account).prepare("SELECT id, status FROM messages WHERE campaign_id = ?1").bind(campaign.id).all<{ id: string; status: string }>()
    ).results.filter((row) => ids.includes(row.id));
    expect(rows).toHaveLength(250);
    const queued = new Set(taken.flat());
    expect(queued.size).toBe(150);
    for (const row of rows) expect(row.status).toBe(queued.has(row.id) ? "queued" : "scheduled");
  });
});

describe("the audience cap after a lost progress save", () => {
  it("counts the messages D1 holds, so contacts added since POST /send are not written beyond the reservation", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 2 });
    const { list, addresses } = await audienceOf(key, 3);
    const campaign = await sendCampaign(key, sender, list);
    await throttled(key, campaign.id, 2);
    const latecomers = [`late-a-${campaign.id}@example.net`, `late-b-${campaign.id}@example.net`];
    for (const email of latecomers) expect((await call("/api/v1/contacts", { key, body: { email, lists: [list] } })).status).toBeLessThan(300);

    await runInDurableObject(progressObject(campaign.id), (_, state) => {
      const progress = state.storage.kv.get<Record<string, unknown>>("progress");
      state.storage.kv.put("progress", { ...progress, cursor: "", materialised: 0, audienceDone: false });
    });
    await newSendingDay(account.id);
    await runDurableObjectAlarm(progressObject(campaign.id));

    const done = await waitForStatus(key, campaign.id, "sent");
    expect(done.counters).toMatchObject({ recipients: 3, sent: 3 });
    expect(await messageRows(campaign.id)).toEqual({ messages: 3, contacts: 3 });
    expect(await deliveries(addresses)).toEqual([1, 1, 1]);
    expect(await deliveries(latecomers)).toEqual([0, 0]);
    expect(await sendBalance(key)).toEqual({ balance: 7, reserved: 0, available: 7 });
  });
});

describe("the dead-letter queue and a copy being delivered at the same time", () => {
  it("records one outcome for the recipient: a charge if it was sent, a release if not, never both", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 1 });
    const { list, addresses } = await audienceOf(key, 2);
    const campaign = await sendCampaign(key, sender, list);
    await throttled(key, campaign.id, 1);
    const [held] = (await campaignMessages(campaign.id)).filter((message) => message.status === "scheduled");
    await holdInQueue(held!.id);

    // The dead-letter consumer gives up on the message while a requeued copy of it is being delivered.
    await Promise.all([abandonMessages(openCtx(env, undefined, account), [held!.id]), deliverMessages(openCtx(env, undefined, account), [held!.id])]);

    const entries = (await ledgerOf(account.id)).filter((entry) => entry.reference_id === `${campaign.id}:${held!.id}`);
    expect(entries).toHaveLength(1);
    const received = (await sinkMessagesTo(held!.email)).length;
    const [message] = (await campaignMessages(campaign.id)).filter((row) => row.id === held!.id);
    if (received === 1) {
      expect(entries[0]).toMatchObject({ kind: "charge", amount: -1 });
      expect(message!.status).toBe("sent");
    } else {
      expect(entries[0]).toMatchObject({ kind: "release", amount: -1 });
      expect(message!.status).toBe("failed");
    }
    expect((await deliveries(addresses)).reduce((sum, count) => sum + count, 0)).toBe(1 + received);
  });
});

describe("campaign.completed", () => {
  it("is not emitted for a campaign cancelled between the completion check's read and its write", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 1 });
    const { list } = await audienceOf(key, 2);
    const campaign = await sendCampaign(key, sender, list);
    await throttled(key, campaign.id, 1);
    // The last recipient unsubscribed: nothing is pending, the campaign is ready to complete.
    await d1Of(account).prepare("UPDATE messages SET status = 'suppressed' WHERE campaign_id = ?1 AND status = 'scheduled'").bind(campaign.id).run();

    // A cancel lands in between: the completing UPDATE finds the campaign cancelled and leaves it so.
    await d1Of(account)
      .prepare(
        `CREATE TRIGGER cancel_first BEFORE UPDATE OF completed_at ON campaigns WHEN OLD.id = '${campaign.id}' AND OLD.status = 'sending'
       BEGIN UPDATE campaigns SET status = 'cancelled' WHERE id = OLD.id; SELECT RAISE(IGNORE); END`,
      )
      .run();
    try {
      await completeIfDone(openCtx(env, undefined, account), campaign.id);
    } finally {
      await d1Of(account).prepare("DROP TRIGGER cancel_first").run();
    }
    expect(await campaignOf(key, campaign.id)).toMatchObject({ status: "cancelled" });
    expect(await completedEvents(account.id)).toEqual({ total: 0 });

    // The cancelled campaign is settled later, still without the event.
    await completeIfDone(openCtx(env, undefined, account), campaign.id);
    expect((await campaignOf(key, campaign.id)).completed_at).not.toBeNull();
    expect(await completedEvents(account.id)).toEqual({ total: 0 });
    expect(await sendBalance(key)).toEqual({ balance: 9, reserved: 0, available: 9 });
  });
});

describe("cancelling when the campaign's object cannot be reached", () => {
  it("stores the cancel and answers it even if waking the object fails", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10 });
    const { list } = await audienceOf(key, 1);
    const campaign = await scheduledCampaign(key, sender, list);
    const unreachable = { getByName: () => ({ wake: () => Promise.reject(new Error("Durable Object unavailable")) }) };

    const outcome = await cancelCampaign(openCtx(envWith("CAMPAIGN_PROGRESS", unreachable), undefined, account), account.id, campaign.id);
    expect(outcome).toMatchObject({ kind: "cancelled", campaign: { id: campaign.id, status: "cancelled" } });
    expect((await campaignOf(key, campaign.id)).status).toBe("cancelled");
  });

  it("has the cron release a cancelled scheduled campaign's credits instead of waiting for its send_at", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10 });
    const { list, addresses } = await audienceOf(key, 1);
    const campaign = await scheduledCampaign(key, sender, list);
    // Cancelled, but the wake-up never reached the object: its only alarm is still send_at, a day away.
    await d1Of(account).prepare("UPDATE campaigns SET status = 'cancelled' WHERE id = ?1").bind(campaign.id).run();
    expect(await alarmOf(campaign.id)).toBeGreaterThan(Date.now() + 3_600_000);
    await backdate(campaign.id, 20);

    await runCron();
    // Polled in D1: GET /me would run into the key's rate limit while waiting.
    await eventually(async () => {
      const row = await d1Of(account)
        .prepare("SELECT send_reserved FROM account_balances WHERE account_id = ?1")
        .bind(account.id)
        .first<{ send_reserved: number }>();
      return row?.send_reserved === 0 ? true : undefined;
    }, 20_000);
    expect(await campaignOf(key, campaign.id)).toMatchObject({ status: "cancelled", completed_at: expect.any(String) });
    expect(await ledgerKinds(account.id, campaign.id)).toEqual(["release:-1:campaign", "reservation:1:campaign"]);
    expect(await deliveries(addresses)).toEqual([0]);
  });
});

describe("GET /messages for campaign messages", () => {
  it("shows a credit charged for a recipient sent and none for one whose reserved credit was released", async () => {
    const { key, sender } = await campaignAccount({ sendCredits: 10 });
    const { list, addresses } = await audienceOf(key, 2);
    await sinkRule({ match: addresses[1]!, phase: "rcpt", responses: [{ code: 550, message: "5.1.1 no such user" }] });
    const campaign = await sendCampaign(key, sender, list);
    await waitForStatus(key, campaign.id, "sent");
    const sentMessage = (await campaignMessages(campaign.id)).find((message) => message.email === addresses[0]);
    const bouncedMessage = (await campaignMessages(campaign.id)).find((message) => message.email === addresses[1]);
    expect([sentMessage!.status, bouncedMessage!.status]).toEqual(["sent", "bounced"]);

    const listed = await json<{ data: { id: string; credits_charged: number; credits_refunded: number }[] }>(
      await call("/api/v1/messages?limit=10", { key }),
    );
    const shown = (id: string) => listed.data.find((message) => message.id === id);
    expect(shown(sentMessage!.id)).toMatchObject({ credits_charged: 1, credits_refunded: 0 });
    expect(shown(bouncedMessage!.id)).toMatchObject({ credits_charged: 0, credits_refunded: 0 });
    expect(await json(await call(`/api/v1/messages/${bouncedMessage!.id}`, { key }))).toMatchObject({
      status: "bounced",
      credits_charged: 0,
      credits_refunded: 0,
    });
  });

  it("shows nothing charged for a message not sent yet, nor for one skipped because its contact unsubscribed meanwhile", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 1 });
    const { list } = await audienceOf(key, 2);
    const campaign = await sendCampaign(key, sender, list);
    await throttled(key, campaign.id, 1);
    const [sent] = (await campaignMessages(campaign.id)).filter((message) => message.status === "sent");
    const [waiting] = (await campaignMessages(campaign.id)).filter((message) => message.status === "scheduled");

    const shown = async (id: string) => json(await call(`/api/v1/messages/${id}`, { key }));
    expect(await shown(sent!.id)).toMatchObject({ status: "sent", credits_charged: 1, credits_refunded: 0 });
    expect(await shown(waiting!.id)).toMatchObject({ status: "scheduled", credits_charged: 0, credits_refunded: 0 });
    const listed = await json<{ data: { id: string; credits_charged: number }[] }>(await call("/api/v1/messages?limit=10", { key }));
    expect(Object.fromEntries(listed.data.map((message) => [message.id, message.credits_charged]))).toEqual({ [sent!.id]: 1, [waiting!.id]: 0 });

    // The waiting contact unsubscribes before the next sending day: the consumer skips it and its credit is released.
    expect((await call("/api/v1/suppressions", { key, body: { email: waiting!.email } })).status).toBeLessThan(300);
    await newSendingDay(account.id);
    expect(await runDurableObjectAlarm(progressObject(campaign.id))).toBe(true);
    await waitForStatus(key, campaign.id, "sent");
    expect(await shown(waiting!.id)).toMatchObject({ status: "suppressed", credits_charged: 0, credits_refunded: 0 });
    expect(await sendBalance(key)).toEqual({ balance: 9, reserved: 0, available: 9 });
    expect(await sinkMessagesTo(waiting!.email)).toEqual([]);
  });
});

describe("an outcome written after the campaign was settled", () => {
  it("charges nothing: the campaign's reservation was already released", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 1 });
    const { list } = await audienceOf(key, 2);
    const campaign = await sendCampaign(key, sender, list);
    await throttled(key, campaign.id, 1);
    const [late] = (await campaignMessages(campaign.id)).filter((message) => message.status === "scheduled");

    // A consumer claimed the message and went silent; the cron marks the claim unknown and the campaign settles.
    await d1Of(account).prepare("UPDATE messages SET status = 'sending', claimed_at = ?2 WHERE id = ?1").bind(late!.id, minutesAgo(20)).run();
    expect(await sweepStaleClaims(openCtx(env, undefined, account))).toBeGreaterThanOrEqual(1);
    await completeIfDone(openCtx(env, undefined, account), campaign.id);
    expect(await campaignOf(key, campaign.id)).toMatchObject({ status: "sent", completed_at: expect.any(String) });
    expect(await sendBalance(key)).toEqual({ balance: 9, reserved: 0, available: 9 });

    // The consumer comes back and writes that the message was sent.
    const row = await drizzle(d1Of(account)).select().from(messages).where(eq(messages.id, late!.id)).get();
    const disposition = recordOutcome(openCtx(env, undefined, account), row!, [late!.email], {
      ok: true,
      code: 250,
      response: "250 2.0.0 ok",
      perRecipient: [],
    });
    await d1Of(account).batch(disposition.statements);

    expect((await ledgerOf(account.id)).filter((entry) => entry.reference_id === `${campaign.id}:${late!.id}`)).toEqual([]);
    expect(await sendBalance(key)).toEqual({ balance: 9, reserved: 0, available: 9 });
  });
});

describe("the completion check while a campaign drains", () => {
  it("reads one pending message, not the campaign's counts, while messages are still pending", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 1 });
    const { list } = await audienceOf(key, 3);
    const campaign = await sendCampaign(key, sender, list);
    await throttled(key, campaign.id, 1);

    const prepared: string[] = [];
    const complete = await completeIfDone(
      openCtx(envWith(account.database as keyof Env, recordingDb(d1Of(account), prepared)), undefined, account),
      campaign.id,
    );
    expect(prepared).toHaveLength(1);
    expect(prepared[0]).toMatch(/from "messages".*limit/is);
    expect(prepared[0]).not.toMatch(/group by|count\(/i);
    expect(complete).toBe(false);
  });
});

describe("tracking flags", () => {
  it("are copied from the campaign onto each message it materialises", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10 });
    const { list } = await audienceOf(key, 2);
    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", {
        key,
        body: { name: "tracked", sender_id: sender, subject: "Hi", html: "<p>Hello</p>", lists: [list], track_opens: true, track_clicks: false },
      }),
    );
    expect((await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: {} })).status).toBe(202);
    await waitForStatus(key, draft.id, "sent");
    const flags = await d1Of(account).prepare("SELECT track_opens, track_clicks FROM messages WHERE campaign_id = ?1").bind(draft.id).all();
    expect(flags.results).toEqual([
      { track_opens: 1, track_clicks: 0 },
      { track_opens: 1, track_clicks: 0 },
    ]);
  });
});
