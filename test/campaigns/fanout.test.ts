import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { call, json } from "../support/helpers";
import { eventually, sinkMessagesTo } from "../support/sending";
import {
  alarmOf,
  audienceOf,
  campaignAccount,
  campaignOf,
  ledgerOf,
  messageRows,
  newSendingDay,
  progressObject,
  sendBalance,
  sendCampaign,
  throttled,
  waitForStatus,
} from "../support/campaigns";

// The fan-out in CampaignProgress under the account's daily sending limit, after a crash, and when cancelled midway,
// through the real Durable Object, D1, send queue and dev mail sink. The daily limit is what stops a fan-out midway:
// an account allowed 3 recipients a day and a campaign of 5 leaves 2 messages `scheduled` until midnight UTC.

/** Per address, how many messages the dev sink received. */
async function deliveries(addresses: string[]): Promise<number[]> {
  return Promise.all(addresses.map(async (address) => (await sinkMessagesTo(address)).length));
}

describe("campaign fan-out in an account database", () => {
  it("sends to every recipient of an account in ACCOUNT_DB_1 and settles its credits there", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10, database: "ACCOUNT_DB_1" });
    const { list, addresses } = await audienceOf(key, 3);
    const campaign = await sendCampaign(key, sender, list);

    const done = await waitForStatus(key, campaign.id, "sent");
    expect(done.counters).toMatchObject({ recipients: 3, sent: 3, pending: 0 });
    expect(await deliveries(addresses)).toEqual([1, 1, 1]);
    expect(await messageRows(campaign.id)).toEqual({ messages: 3, contacts: 3 });
    expect((await ledgerOf(account.id)).map((entry) => `${entry.kind}:${entry.amount}`).sort()).toEqual([
      "charge:-1",
      "charge:-1",
      "charge:-1",
      "reservation:3",
    ]);
    expect(await sendBalance(key)).toEqual({ balance: 7, reserved: 0, available: 7 });
  });
});

describe("campaign fan-out under the daily sending limit", () => {
  it("enqueues up to what is left of the day's limit, sleeps until midnight UTC, then sends the rest", async () => {
    const { account: owner, key, domain, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 3 });
    const { list, addresses } = await audienceOf(key, 5);
    const campaign = await sendCampaign(key, sender, list);

    const paused = await throttled(key, campaign.id, 3);
    expect(paused.status).toBe("sending");
    expect(paused.counters).toMatchObject({ recipients: 5, sent: 3, pending: 2 });
    expect((await deliveries(addresses)).sort()).toEqual([0, 0, 1, 1, 1]);
    expect(await sendBalance(key)).toEqual({ balance: 7, reserved: 2, available: 5 });

    // The fan-out counted its recipients against the same limit as POST /send.
    const refused = await call("/api/v1/send", { key, body: { from: `hello@${domain.name}`, to: "y@example.net", subject: "s", text: "t" } });
    expect(refused.status).toBe(429);
    expect(await json(refused)).toMatchObject({ code: "daily_limit_reached" });

    await newSendingDay(owner.id);
    expect(await runDurableObjectAlarm(progressObject(campaign.id))).toBe(true);
    const done = await waitForStatus(key, campaign.id, "sent");
    expect(done.counters).toMatchObject({ recipients: 5, sent: 5, pending: 0 });
    expect(await deliveries(addresses)).toEqual([1, 1, 1, 1, 1]);
    expect(await sendBalance(key)).toEqual({ balance: 5, reserved: 0, available: 5 });
  });

  it("completes at once when the audience uses exactly what is left of the day's limit", async () => {
    const { key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 3 });
    const { list, addresses } = await audienceOf(key, 3);
    const campaign = await sendCampaign(key, sender, list);
    const done = await waitForStatus(key, campaign.id, "sent");
    expect(done.counters).toMatchObject({ recipients: 3, sent: 3, pending: 0 });
    expect(await deliveries(addresses)).toEqual([1, 1, 1]);
    expect(await alarmOf(campaign.id)).toBeNull();
  });
});

describe("campaign fan-out after a crash", () => {
  it("writes and sends nobody twice when its stored cursor is behind what D1 holds and its alarm runs twice", async () => {
    const { account: owner, key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 3 });
    const { list, addresses } = await audienceOf(key, 5);
    const campaign = await sendCampaign(key, sender, list);
    await throttled(key, campaign.id, 3);

    // The object's last save was lost: its storage says nothing was materialised yet, though all 5 messages are in D1
    // and 3 of them went out.
    await runInDurableObject(progressObject(campaign.id), (_, state) => {
      const progress = state.storage.kv.get<Record<string, unknown>>("progress");
      expect(progress).toMatchObject({ phase: "fanout", audienceDone: true, materialised: 5 });
      state.storage.kv.put("progress", { ...progress, cursor: "", materialised: 0, audienceDone: false });
    });
    await newSendingDay(owner.id);
    expect(await runDurableObjectAlarm(progressObject(campaign.id))).toBe(true);
    await runDurableObjectAlarm(progressObject(campaign.id));

    const done = await waitForStatus(key, campaign.id, "sent");
    expect(done.counters).toMatchObject({ recipients: 5, sent: 5, pending: 0 });
    expect(await messageRows(campaign.id)).toEqual({ messages: 5, contacts: 5 });
    expect(await deliveries(addresses)).toEqual([1, 1, 1, 1, 1]);
    const ledger = await ledgerOf(owner.id);
    expect(ledger.map((entry) => `${entry.kind}:${entry.amount}`).sort()).toEqual([...Array(5).fill("charge:-1"), "reservation:5"]);
    expect(await sendBalance(key)).toEqual({ balance: 5, reserved: 0, available: 5 });
  });
});

describe("cancelling a campaign midway through its fan-out", () => {
  it("sends nothing more, cancels the messages never enqueued and releases their credits", async () => {
    const { account: owner, key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 3 });
    const { list, addresses } = await audienceOf(key, 5);
    const campaign = await sendCampaign(key, sender, list);
    await throttled(key, campaign.id, 3);

    const cancelled = await call(`/api/v1/campaigns/${campaign.id}/cancel`, { key, method: "POST" });
    expect(cancelled.status).toBe(200);
    await eventually(async () => ((await sendBalance(key)).reserved === 0 ? true : undefined), 20_000);
    const after = await campaignOf(key, campaign.id);
    expect(after.status).toBe("cancelled");
    expect(after.completed_at).not.toBeNull();
    expect(after.counters).toMatchObject({ recipients: 5, sent: 3, cancelled: 2, pending: 0 });

    const ledger = await ledgerOf(owner.id);
    expect(ledger.map((entry) => `${entry.kind}:${entry.amount}:${entry.reference_id === campaign.id ? "campaign" : "recipient"}`).sort()).toEqual([
      ...Array(3).fill("charge:-1:recipient"),
      "release:-2:campaign",
      "reservation:5:campaign",
    ]);
    expect(ledger.reduce((sum, entry) => sum + entry.amount, 0)).toBe(0);
    expect(await sendBalance(key)).toEqual({ balance: 7, reserved: 0, available: 7 });

    // A new day does not revive it: nothing is armed, and running the object anyway sends nothing.
    await newSendingDay(owner.id);
    expect(await alarmOf(campaign.id)).toBeNull();
    await runDurableObjectAlarm(progressObject(campaign.id));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await deliveries(addresses)).sort()).toEqual([0, 0, 1, 1, 1]);
    expect((await campaignOf(key, campaign.id)).counters).toMatchObject({ sent: 3, cancelled: 2 });
  });
});
