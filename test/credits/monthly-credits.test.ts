import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { config, ConfigError } from "../../src/config";
import { grantMonthlyCredits } from "../../src/domain/credits/monthly";
import worker from "../../src/index";
import { accountIn } from "../support/databases";
import { ADMIN_TOKEN, call, createAccount, d1Of, d1OfAccount, json } from "../support/helpers";

// The plans' monthly verification credits (spec, Limits: the free plan gives 100 a month), granted by the Worker's
// real scheduled handler against real D1. The suite's own setting grants none (vitest.config.ts), so each run here
// passes a deployment's setting.

const deployment = (credits = '{"free":100}') => ({ ...env, MONTHLY_VERIFY_CREDITS: credits });

async function runCron(runEnv: Env = deployment()): Promise<void> {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ cron: "*/15 * * * *" }), runEnv, ctx);
  await waitOnExecutionContext(ctx);
}

const credits = async (key: string) =>
  json<{ verify: { balance: number; available: number } }>(await call("/api/v1/credits", { key })).then((balances) => balances.verify);

async function grants(accountId: string) {
  return (
    await (
      await d1OfAccount(accountId)
    )
      .prepare(
        "SELECT kind, amount, reference_id, note, balance_after FROM credit_ledger WHERE account_id = ?1 AND balance = 'verify' AND reference_id IS NOT NULL ORDER BY rowid",
      )
      .bind(accountId)
      .all<{ kind: string; amount: number; reference_id: string; note: string; balance_after: number }>()
  ).results;
}

const month = () => new Date().toISOString().slice(0, 7);

describe("monthly verification credits", () => {
  it("gives a free-plan account with 0 verification credits 100 on a cron run, and still 100 after a second run that month", async () => {
    const account = await createAccount({ verify_credits: 0 });
    expect(await credits(account.api_key)).toEqual({ balance: 0, available: 0 });

    await runCron();
    expect(await credits(account.api_key)).toEqual({ balance: 100, available: 100 });
    await runCron();
    expect(await credits(account.api_key)).toEqual({ balance: 100, available: 100 });

    expect(await grants(account.id)).toEqual([
      {
        kind: "top_up",
        amount: 100,
        reference_id: `monthly_verify:${account.id}:${month()}`,
        note: `monthly credits ${month()}`,
        balance_after: 100,
      },
    ]);
    const usage = await json<{ credits: Record<string, number> }>(await call("/api/v1/usage", { key: account.api_key }));
    expect(usage.credits).toMatchObject({ verify_granted: 100, verify_expired: 0 });
  });

  it("reaches accounts in both account databases, each once, however many runs", async () => {
    const inFirst = await accountIn("ACCOUNT_DB_0", { verify_credits: 0 });
    const inSecond = await accountIn("ACCOUNT_DB_1", { verify_credits: 0 });
    await runCron();
    await Promise.all([runCron(), runCron()]);
    for (const account of [inFirst, inSecond]) {
      expect(await credits(account.api_key)).toEqual({ balance: 100, available: 100 });
      expect(await grants(account.id)).toEqual([
        expect.objectContaining({ kind: "top_up", amount: 100, reference_id: `monthly_verify:${account.id}:${month()}` }),
      ]);
    }
  });

  it("follows the directory's plan: an account changed to a plan without credits gets none", async () => {
    const account = await accountIn("ACCOUNT_DB_1", { plan: "starter", verify_credits: 0 });
    const changed = await call(`/admin/v1/accounts/${account.id}`, { key: ADMIN_TOKEN, method: "PATCH", body: { plan: "free" } });
    expect(changed.status).toBe(200);
    await runCron(deployment('{"starter":500}'));
    expect(await credits(account.api_key)).toEqual({ balance: 0, available: 0 });
    await runCron(deployment('{"free":100}'));
    expect(await credits(account.api_key)).toEqual({ balance: 100, available: 100 });
  });

  it("grants once when cron runs overlap", async () => {
    const account = await createAccount({ verify_credits: 0 });
    await Promise.all([runCron(), runCron(), runCron(), runCron()]);
    expect(await credits(account.api_key)).toEqual({ balance: 100, available: 100 });
    expect(await grants(account.id)).toHaveLength(1);
  });

  it("grants each plan its configured amount, and nothing to a plan left out", async () => {
    const starter = await createAccount({ plan: "starter", verify_credits: 0 });
    const pro = await createAccount({ plan: "pro", verify_credits: 7 });
    await runCron(deployment('{"free":100,"starter":500}'));
    expect(await credits(starter.api_key)).toEqual({ balance: 500, available: 500 });
    expect(await credits(pro.api_key)).toEqual({ balance: 7, available: 7 });
  });

  it("lets last month's unused free credits expire with the new grant, and keeps bought ones", async () => {
    // Months of its own, far ahead, so no other run of this file grants them.
    const account = await createAccount({ verify_credits: 50 });
    const runEnv = deployment();
    await grantMonthlyCredits(openCtx(runEnv), new Date("2031-01-15T10:00:00Z"));
    expect(await credits(account.api_key)).toEqual({ balance: 150, available: 150 });

    // One charged verification: free credits are spent first, so 99 of January's are left.
    expect((await call("/api/v1/verify", { key: account.api_key, body: { email: "jane@acme.verify-test" } })).status).toBe(200);
    expect(await credits(account.api_key)).toEqual({ balance: 149, available: 149 });

    await grantMonthlyCredits(openCtx(runEnv), new Date("2031-02-01T00:00:00Z"));
    await grantMonthlyCredits(openCtx(runEnv), new Date("2031-02-20T00:00:00Z"));
    expect(await credits(account.api_key)).toEqual({ balance: 150, available: 150 });
    expect((await grants(account.id)).filter((entry) => entry.reference_id.startsWith("monthly_verify:"))).toEqual([
      expect.objectContaining({ kind: "top_up", amount: 100, reference_id: `monthly_verify:${account.id}:2031-01`, balance_after: 150 }),
      expect.objectContaining({ kind: "adjustment", amount: -99, reference_id: `monthly_verify:${account.id}:2031-01`, balance_after: 50 }),
      expect.objectContaining({ kind: "top_up", amount: 100, reference_id: `monthly_verify:${account.id}:2031-02`, balance_after: 150 }),
    ]);
  });

  it("expires no more than the balance holds", async () => {
    const account = await createAccount({ verify_credits: 0 });
    const runEnv = deployment();
    await grantMonthlyCredits(openCtx(runEnv), new Date("2032-03-02T00:00:00Z"));
    // An operator's correction took 80 of them back: only the 20 left can expire.
    const d1 = d1Of(account);
    await d1.batch([
      d1.prepare("UPDATE account_balances SET verify_balance = 20 WHERE account_id = ?1").bind(account.id),
      d1
        .prepare(
          "INSERT INTO credit_ledger (id, account_id, balance, kind, amount, reference_id, note, balance_after) VALUES (?1, ?2, 'verify', 'adjustment', -80, NULL, 'correction', 20)",
        )
        .bind(`led_${crypto.randomUUID()}`, account.id),
    ]);
    await grantMonthlyCredits(openCtx(runEnv), new Date("2032-04-02T00:00:00Z"));
    expect(await credits(account.api_key)).toEqual({ balance: 100, available: 100 });
  });

  it("refuses a setting that is not a JSON object of whole numbers, naming the variable", () => {
    for (const value of ["free=100", '{"free":-1}', '{"free":1.5}']) {
      expect(() => config(deployment(value))).toThrow(ConfigError);
      expect(() => config(deployment(value))).toThrow(/MONTHLY_VERIFY_CREDITS/);
    }
  });
});
