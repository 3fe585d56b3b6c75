import { accountDb, sharedDb } from "../../src/db/client";
import { createAccount as createAccountRow } from "../../src/domain/accounts/accounts";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { refundStatements, releaseStatements, reserveStatements, wasApplied } from "../../src/domain/credits/ledger";
import { call, createAccount, d1Of, dbOf, json } from "../support/helpers";

const balances = async (key: string) =>
  json<{ send: { balance: number; reserved: number; available: number } }>(await call("/api/v1/credits", { key }));

describe("the credits ledger", () => {
  it("reserves sending credits (as campaigns do at send time), never beyond what is available, and releases them once", async () => {
    const account = await createAccount({ send_credits: 100 });
    const [reserved] = await d1Of(account).batch(reserveStatements(dbOf(account), { accountId: account.id, amount: 30, referenceId: "cmp_a" }));
    expect(wasApplied(reserved!)).toBe(true);
    expect((await balances(account.api_key)).send).toEqual({ balance: 100, reserved: 30, available: 70 });

    const [tooMuch] = await d1Of(account).batch(reserveStatements(dbOf(account), { accountId: account.id, amount: 71, referenceId: "cmp_b" }));
    expect(wasApplied(tooMuch!)).toBe(false);
    expect((await balances(account.api_key)).send.reserved).toBe(30);

    await d1Of(account).batch(releaseStatements(dbOf(account), { accountId: account.id, amount: 30, referenceId: "cmp_a" }));
    await d1Of(account).batch(releaseStatements(dbOf(account), { accountId: account.id, amount: 30, referenceId: "cmp_a" }));
    expect((await balances(account.api_key)).send).toEqual({ balance: 100, reserved: 0, available: 100 });
  });

  it("refunds once per reference, with a ledger row for every change", async () => {
    const account = await createAccount({ send_credits: 10 });
    const refund = { accountId: account.id, balance: "send" as const, amount: 2, referenceId: "msg_x:a@example.com", note: "bounce" };
    await d1Of(account).batch(refundStatements(dbOf(account), refund));
    await d1Of(account).batch(refundStatements(dbOf(account), refund));
    expect((await balances(account.api_key)).send.balance).toBe(12);
    const rows = await d1Of(account)
      .prepare("SELECT kind, amount, balance_after FROM credit_ledger WHERE account_id = ? AND balance = 'send' ORDER BY created_at")
      .bind(account.id)
      .all();
    expect(rows.results).toEqual([
      { kind: "top_up", amount: 10, balance_after: 10 },
      { kind: "refund", amount: 2, balance_after: 12 },
    ]);
  });
});

// An account's directory row and its balances are written to two databases' handles, in two transactions.
describe("an account's balance row", () => {
  it("failing to be written takes the new account and its key back", async () => {
    const failing = {
      ...env,
      ACCOUNT_DB_0: new Proxy(env.ACCOUNT_DB_0, {
        get: (d1, name) => (name === "batch" ? () => Promise.reject(new Error("D1 down")) : Reflect.get(d1, name).bind(d1)),
      }),
    };
    const name = `rollback-${crypto.randomUUID()}`;
    const keys = () => env.DB.prepare("SELECT COUNT(*) AS n FROM api_keys").first<{ n: number }>();
    const keysBefore = await keys();
    await expect(
      createAccountRow(sharedDb(env), (account) => accountDb(failing, account), "ACCOUNT_DB_0", {
        name,
        plan: "free",
        sendCredits: 5,
        verifyCredits: 0,
      }),
    ).rejects.toThrow("D1 down");
    const left = await env.DB.prepare("SELECT COUNT(*) AS n FROM accounts WHERE name = ?").bind(name).first<{ n: number }>();
    expect(left?.n).toBe(0);
    expect(await keys()).toEqual(keysBefore);
  });
});
