import { databaseTag } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { config } from "../../src/config";
import { rollupStatements } from "../../src/domain/reports/rollups";
import { unsubscribeToken } from "../../src/domain/sending/unsubscribe";
import { call, createAccount, d1Of, dbOf, json } from "../support/helpers";
import { audienceOf, campaignAccount, campaignMessages, sendCampaign, waitForStatus } from "../support/campaigns";

// GET /reports/campaigns/{id} after a real campaign through the fan-out, the send queue and the dev mail sink, with
// an unsubscribe through the message's /u/ link.

type Report = {
  campaign_id: string;
  totals: Record<string, number>;
  rates: Record<string, number>;
  links: { url: string; clicks: number; unique_clicks: number }[];
};

const reportOf = async (key: string, id: string) => json<Report>(await call(`/api/v1/reports/campaigns/${id}`, { key }));

async function unsubscribe(messageId: string, email: string, database: string) {
  const token = await unsubscribeToken(config(env), { messageId, email, tag: databaseTag(database) });
  const response = await call(`/u/${token}`, {
    method: "POST",
    body: "List-Unsubscribe=One-Click",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
  });
  expect(response.status).toBe(200);
}

describe("GET /reports/campaigns/{id}", () => {
  let key: string;
  let campaignId: string;

  beforeAll(async () => {
    const setup = await campaignAccount({ sendCredits: 10 });
    key = setup.key;
    const { list } = await audienceOf(key, 3);
    campaignId = (await sendCampaign(key, setup.sender, list)).id;
    await waitForStatus(key, campaignId, "sent");
    // One recipient unsubscribes with the message's one-click link, and the request is repeated.
    const [first] = await campaignMessages(campaignId);
    await unsubscribe(first!.id, first!.email, setup.account.database);
    await unsubscribe(first!.id, first!.email, setup.account.database);
    // Opens as open tracking counts them (through the same rollup writer), and clicks per link as its redirect does.
    const d1 = d1Of(setup.account);
    await d1.batch(
      rollupStatements(
        dbOf(setup.account),
        { accountId: setup.account.id, domain: "any.example", provider: "gmail", campaignId, stream: "broadcast" },
        { opens: 2, unique_opens: 1 },
      ),
    );
    await d1.batch(
      [
        ["https://example.com/pricing", 2, 1],
        ["https://example.com/blog", 7, 3],
        ["https://example.com/about", 2, 2],
      ].map(([url, clicks, unique]) =>
        d1
          .prepare("INSERT INTO campaign_links (campaign_id, url, clicks, unique_clicks) VALUES (?1, ?2, ?3, ?4)")
          .bind(campaignId, url, clicks, unique),
      ),
    );
  }, 30_000);

  it("reports the campaign's delivery, its unsubscribes once per recipient, and its links by clicks", async () => {
    const report = await reportOf(key, campaignId);
    expect(report).toEqual({
      campaign_id: campaignId,
      topic_id: null,
      totals: {
        sent: 3,
        delivered: 3,
        hard_bounces: 0,
        soft_bounces: 0,
        opens: 2,
        unique_opens: 1,
        machine_opens: 0,
        clicks: 0,
        unique_clicks: 0,
        unsubscribes: 1,
        complaints: 0,
        failed: 0,
        suppressed: 0,
        replies: 0,
      },
      rates: { delivery_rate: 1, bounce_rate: 0, open_rate: 0.3333, click_rate: 0, unsubscribe_rate: 0.3333, complaint_rate: 0 },
      links: [
        { url: "https://example.com/blog", clicks: 7, unique_clicks: 3 },
        { url: "https://example.com/about", clicks: 2, unique_clicks: 2 },
        { url: "https://example.com/pricing", clicks: 2, unique_clicks: 1 },
      ],
      skipped: { invalid: 0, risky: 0, unknown: 0 },
    });
  });

  it("shows the same engagement in the campaign resource's counters", async () => {
    const campaign = await json<{ counters: Record<string, number> }>(await call(`/api/v1/campaigns/${campaignId}`, { key }));
    expect(campaign.counters).toMatchObject({ sent: 3, opens: 2, unique_opens: 1, clicks: 0, unique_clicks: 0, unsubscribes: 1, complaints: 0 });
    const listed = await json<{ data: { id: string; counters: Record<string, number> }[] }>(await call("/api/v1/campaigns", { key }));
    expect(listed.data.find((item) => item.id === campaignId)?.counters).toEqual(campaign.counters);
  });

  it("counts the campaign in the account's overview too", async () => {
    const overview = await json<{ totals: Record<string, number> }>(await call("/api/v1/reports/overview", { key }));
    expect(overview.totals).toMatchObject({ sent: 3, delivered: 3, unsubscribes: 1 });
  });

  it("is 404 for another account's campaign and for a campaign that does not exist", async () => {
    const stranger = await createAccount();
    for (const [asker, id] of [
      [stranger.api_key, campaignId],
      [key, "cmp_doesnotexist"],
    ] as const) {
      const response = await call(`/api/v1/reports/campaigns/${id}`, { key: asker });
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ code: "not_found", message: "Campaign not found" });
    }
  });
});
