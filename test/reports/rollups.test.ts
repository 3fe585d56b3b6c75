import { accountDb } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rollupStatements } from "../../src/domain/reports/rollups";

type Row = { provider: string; campaign_id: string; sent: number; opens: number; unique_opens: number; day: string };

const rows = (accountId: string) =>
  env.DB.prepare("SELECT provider, campaign_id, sent, opens, unique_opens, day FROM daily_stats WHERE account_id = ? ORDER BY provider")
    .bind(accountId)
    .all<Row>()
    .then((result) => result.results);

describe("daily rollups", () => {
  it("adds to one row per key and day, creating it on first use", async () => {
    const key = {
      accountId: `acc_${crypto.randomUUID()}`,
      domain: "example.com",
      provider: "gmail" as const,
      campaignId: null,
      stream: "transactional" as const,
    };
    await env.DB.batch([...rollupStatements(accountDb(env), key, { sent: 2 }), ...rollupStatements(accountDb(env), key, { sent: 1, opens: 3 })]);
    await env.DB.batch(rollupStatements(accountDb(env), { ...key, provider: null }, { sent: 1 }));
    const today = new Date().toISOString().slice(0, 10);
    expect(await rows(key.accountId)).toEqual([
      { provider: "gmail", campaign_id: "", sent: 3, opens: 3, unique_opens: 0, day: today },
      { provider: "other", campaign_id: "", sent: 1, opens: 0, unique_opens: 0, day: today },
    ]);
  });

  it("changes nothing when its guard is false, and writes no statement for zero counts", async () => {
    const key = {
      accountId: `acc_${crypto.randomUUID()}`,
      domain: "example.com",
      provider: "apple" as const,
      campaignId: "cmp_1",
      stream: "broadcast" as const,
    };
    expect(rollupStatements(accountDb(env), key, { sent: 0 })).toEqual([]);
    await env.DB.batch(rollupStatements(accountDb(env), key, { unique_opens: 1 }, sql`1 = 0`));
    expect(await rows(key.accountId)).toEqual([]);
    await env.DB.batch(rollupStatements(accountDb(env), key, { unique_opens: 1 }, sql`1 = 1`));
    expect((await rows(key.accountId)).map((row) => row.unique_opens)).toEqual([1]);
  });
});
