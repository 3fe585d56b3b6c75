import { describe, expect, it } from "vitest";
import { call, json } from "../support/helpers";
import { sinkMessagesTo } from "../support/sending";
import {
  alarmOf,
  audienceOf,
  backdate,
  campaignAccount,
  campaignOf,
  killFanOut,
  messageRows,
  minutesAgo,
  newSendingDay,
  nextUtcMidnight,
  runCron,
  sendBalance,
  sendCampaign,
  throttled,
  type Campaign,
  waitForStatus,
} from "../support/campaigns";

// The cron's resumeStalledCampaigns through the Worker's real scheduled handler. A fan-out "dies" by deleting its
// progress object's alarm and storage; time is moved by back-dating the campaign row.

const deliveries = (addresses: string[]) => Promise.all(addresses.map(async (address) => (await sinkMessagesTo(address)).length));

describe("cron: campaign fan-outs that died", () => {
  it("starts a scheduled campaign whose alarm was lost once its send_at is 15 minutes past", async () => {
    const { key, sender } = await campaignAccount({ sendCredits: 10 });
    const { list, addresses } = await audienceOf(key, 2);
    const created = await call("/api/v1/campaigns", { key, body: { name: "later", sender_id: sender, subject: "Hi", text: "Hello", lists: [list] } });
    const draft = await json<Campaign>(created);
    const sendAt = new Date(Date.now() + 86_400_000).toISOString();
    expect((await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: { send_at: sendAt } })).status).toBe(202);
    expect(await alarmOf(draft.id)).toBe(Date.parse(sendAt));
    await killFanOut(draft.id);

    // Not due yet, however old its row: left alone.
    await backdate(draft.id, 20);
    await runCron();
    expect(await alarmOf(draft.id)).toBeNull();

    await backdate(draft.id, 20, minutesAgo(20));
    await runCron();
    const done = await waitForStatus(key, draft.id, "sent");
    expect(done.counters).toMatchObject({ recipients: 2, sent: 2, pending: 0 });
    expect(await deliveries(addresses)).toEqual([1, 1]);
    expect(await sendBalance(key)).toEqual({ balance: 8, reserved: 0, available: 8 });
  });

  it("resumes a fan-out that died midway without writing or sending anyone twice, and only once it is 15 minutes stale", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 3 });
    const { list, addresses } = await audienceOf(key, 5);
    const campaign = await sendCampaign(key, sender, list);
    await throttled(key, campaign.id, 3);
    await killFanOut(campaign.id);
    await newSendingDay(account.id);

    await runCron();
    expect(await alarmOf(campaign.id)).toBeNull();

    await backdate(campaign.id, 20);
    await runCron();
    await runCron();
    const done = await waitForStatus(key, campaign.id, "sent");
    expect(done.counters).toMatchObject({ recipients: 5, sent: 5, pending: 0 });
    expect(await messageRows(campaign.id)).toEqual({ messages: 5, contacts: 5 });
    expect(await deliveries(addresses)).toEqual([1, 1, 1, 1, 1]);
    expect(await sendBalance(key)).toEqual({ balance: 5, reserved: 0, available: 5 });
  });

  it("leaves a throttled fan-out asleep until midnight UTC, however long its row has not changed", async () => {
    const { key, sender } = await campaignAccount({ sendCredits: 10, dailySendLimit: 3 });
    const { list, addresses } = await audienceOf(key, 5);
    const campaign = await sendCampaign(key, sender, list);
    await throttled(key, campaign.id, 3);

    await backdate(campaign.id, 20);
    await runCron();
    await runCron();
    expect(await alarmOf(campaign.id)).toBe(nextUtcMidnight());
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await deliveries(addresses)).sort()).toEqual([0, 0, 1, 1, 1]);
    expect((await campaignOf(key, campaign.id)).counters).toMatchObject({ sent: 3, pending: 2 });
  });
});
