import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rollupStatements } from "../../src/domain/reports/rollups";
import { createAccount, d1Of, dbOf, type CreatedAccount } from "../support/helpers";

type Row = { provider: string; campaign_id: string; sent: number; opens: number; unique_opens: number; day: string };

const rows = (account: CreatedAccount) =>
  d1Of(account)
    .prepare("SELECT provider, campaign_id, sent, opens, unique_opens, day FROM daily_stats WHERE account_id = ? ORDER BY provider")
    .bind(account.id)
    .all<Row>()
    .then((result) => result.results);

describe("daily rollups", () => {
  it("adds to one row per key and day, creating it on first use", async () => {
    const account = await createAccount();
    const db = dbOf(account);
    const key = {
      accountId: account.id,
      domain: "example.com",
      provider: "gmail" as const,
      campaignId: null,
      stream: "transactional" as const,
    };
    await d1Of(account).batch([...rollupStatements(db, key, { sent: 2 }), ...rollupStatements(db, key, { sent: 1, opens: 3 })]);
    await d1Of(account).batch(rollupStatements(db, { ...key, provider: null }, { sent: 1 }));
    const today = new Date().toISOString().slice(0, 10);
    expect(await rows(account)).toEqual([
      { provider: "gmail", campaign_id: "", sent: 3, opens: 3, unique_opens: 0, day: today },
      { provider: "other", campaign_id: "", sent: 1, opens: 0, unique_opens: 0, day: today },
    ]);
  });

  it("changes nothing when its guard is false, and writes no statement for zero counts", async () => {
    const account = await createAccount();
    const db = dbOf(account);
    const key = {
      accountId: account.id,
      domain: "example.com",
      provider: "apple" as const,
      campaignId: "cmp_1",
      stream: "broadcast" as const,
    };
    expect(rollupStatements(db, key, { sent: 0 })).toEqual([]);
    await d1Of(account).batch(rollupStatements(db, key, { unique_opens: 1 }, sql`1 = 0`));
    expect(await rows(account)).toEqual([]);
    await d1Of(account).batch(rollupStatements(db, key, { unique_opens: 1 }, sql`1 = 1`));
    expect((await rows(account)).map((row) => row.unique_opens)).toEqual([1]);
  });
});
