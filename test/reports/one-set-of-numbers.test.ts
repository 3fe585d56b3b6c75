import { describe, expect, it } from "vitest";
import { call, d1OfAccount, json } from "../support/helpers";
import { audienceOf, campaignAccount, sendCampaign, waitForStatus } from "../support/campaigns";
import { signIn } from "../support/dashboard";
import { eventually, sinkRule, verifiedDomain } from "../support/sending";

// One definition per counter (docs/reports.md): a campaign's resource counters, its report's totals, its
// campaign.completed data and the account's overview are read from the same rollups, through the real fan-out, send
// queue and dev mail sink.

type CampaignWithOutcome = { status: string; outcome: string | null; counters: Record<string, number> };

const campaignOf = async (key: string, id: string) => json<CampaignWithOutcome>(await call(`/api/v1/campaigns/${id}`, { key }));
const reportOf = async (key: string, id: string) => json<{ totals: Record<string, number> }>(await call(`/api/v1/reports/campaigns/${id}`, { key }));
const bounce = (address: string) => sinkRule({ match: address, phase: "rcpt", responses: [{ code: 550, message: "5.1.1 no such user" }] });

async function completedEvent(accountId: string, campaignId: string) {
  const row = await (await d1OfAccount(accountId))
    .prepare("SELECT data FROM events WHERE account_id = ?1 AND type = 'campaign.completed' AND subject_id = ?2")
    .bind(accountId, campaignId)
    .first<{ data: string }>();
  return JSON.parse(row!.data) as Record<string, unknown>;
}

describe("one set of numbers", () => {
  it("gives a campaign the counters of its report, field by field, after delivery", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10 });
    const { list, addresses } = await audienceOf(key, 3);
    await bounce(addresses[2]!);
    const campaign = await sendCampaign(key, sender, list);
    await waitForStatus(key, campaign.id, "sent");

    const [resource, report] = await Promise.all([campaignOf(key, campaign.id), reportOf(key, campaign.id)]);
    expect(report.totals).toMatchObject({ sent: 3, delivered: 2, hard_bounces: 1 });
    for (const [counter, total] of Object.entries(report.totals))
      expect({ counter, value: resource.counters[counter] }).toEqual({ counter, value: total });
    expect(resource.counters).toMatchObject({ recipients: 3, pending: 0, cancelled: 0, unknown: 0 });
    expect(resource.outcome).toBe("partially_delivered");

    const event = await completedEvent(account.id, campaign.id);
    expect(event).toMatchObject({ outcome: "partially_delivered", recipients: 3, sent: 3, delivered: 2, hard_bounces: 1, failed: 0, suppressed: 0 });
    const overview = await json<{ totals: Record<string, number> }>(await call("/api/v1/reports/overview", { key }));
    expect(overview.totals).toEqual(report.totals);
  });

  it("does not let a campaign every recipient bounced from look like a success", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10 });
    const { list, addresses } = await audienceOf(key, 2);
    for (const address of addresses) await bounce(address);
    const campaign = await sendCampaign(key, sender, list);
    await waitForStatus(key, campaign.id, "sent");

    const resource = await campaignOf(key, campaign.id);
    expect(resource).toMatchObject({ status: "sent", outcome: "undelivered", counters: { recipients: 2, sent: 2, delivered: 0, hard_bounces: 2 } });
    expect(await completedEvent(account.id, campaign.id)).toMatchObject({ outcome: "undelivered", delivered: 0, hard_bounces: 2 });

    const browser = await signIn(key);
    const page = await (await browser.get(`/dashboard/campaigns/${campaign.id}`)).text();
    expect(page).toContain('<span class="badge bad">undelivered</span>');
    expect(page).toContain("0 of 2 recipients accepted: 2 bounced, 0 failed, 0 suppressed.");
    const listed = await (await browser.get("/dashboard/campaigns")).text();
    expect(listed).toContain('<span class="badge bad">undelivered</span>');
  });

  it("shows a message's recipients' outcomes in the dashboard's list, one hard bounce among three", async () => {
    const { key } = await campaignAccount({ sendCredits: 10 });
    const domain = await verifiedDomain(key);
    const tag = crypto.randomUUID().slice(0, 8);
    const to = [`a-${tag}@example.net`, `b-${tag}@example.net`, `c-${tag}@example.net`];
    await bounce(to[1]!);
    const accepted = await call("/api/v1/send", { key, body: { from: `hello@${domain.name}`, to, subject: "Three", text: "Hello" } });
    expect(accepted.status).toBe(202);
    const { id } = await json<{ id: string }>(accepted);
    await eventually(async () => {
      const message = await json<{ recipients: { status: string }[] }>(await call(`/api/v1/messages/${id}`, { key }));
      return message.recipients.every((recipient) => recipient.status !== "queued" && recipient.status !== "sending") ? message : undefined;
    });

    const page = await (await (await signIn(key)).get("/dashboard/messages")).text();
    const row = page.slice(page.indexOf(`/dashboard/messages/${id}`));
    expect(row.slice(0, row.indexOf("</tr>"))).toContain('<small class="recipient-outcomes">1 bounced · 2 sent</small>');
  });
});
