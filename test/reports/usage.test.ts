import { env } from "cloudflare:workers";
import { runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { call, createAccount, createKey, d1OfAccount, json } from "../support/helpers";
import { audienceOf, campaignAccount, sendCampaign, waitForStatus } from "../support/campaigns";
import { eventually, messageOf, sinkRule, verifiedDomain } from "../support/sending";
import { freshBulkSuffix, waitForJob } from "../support/verification";

// GET /usage against the credit ledger it must always match, the verification counts, and the API calls the
// per-key RateLimiter objects count and flush with their alarm.

type Credits = Record<
  "send_charged" | "send_refunded" | "send_reserved" | "send_released" | "verify_charged" | "verify_refunded" | "verify_granted" | "verify_expired",
  number
>;
type Usage = {
  from: string;
  to: string;
  api_calls: number;
  emails_sent: number;
  verifications: number;
  credits: Credits;
  daily: { date: string; api_calls: number; emails_sent: number; verifications: number; credits: Credits }[];
};

const today = () => new Date().toISOString().slice(0, 10);
const usageOf = async (key: string) => json<Usage>(await call("/api/v1/usage", { key }));

/** The ledger's movements, summed the way /usage names them. */
async function ledgerTotals(accountId: string): Promise<Credits> {
  const rows = await (await d1OfAccount(accountId))
    .prepare(
      `SELECT balance || '_' || kind AS movement, SUM(ABS(amount)) AS total FROM credit_ledger
     WHERE account_id = ?1 AND (kind != 'top_up' OR reference_id LIKE 'monthly_verify:%') GROUP BY 1`,
    )
    .bind(accountId)
    .all<{ movement: string; total: number }>();
  const of = (movement: string) => rows.results.find((row) => row.movement === movement)?.total ?? 0;
  return {
    send_charged: of("send_charge"),
    send_refunded: of("send_refund"),
    send_reserved: of("send_reservation"),
    send_released: of("send_release"),
    verify_charged: of("verify_charge"),
    verify_refunded: of("verify_refund"),
    verify_granted: of("verify_top_up"),
    verify_expired: of("verify_adjustment"),
  };
}

describe("GET /usage", () => {
  it("matches the ledger after sends, a bounce's refund, single and bulk verifications", async () => {
    const account = await createAccount({ send_credits: 20, verify_credits: 20 });
    const key = account.api_key;
    const domain = await verifiedDomain(key);
    const bounced = `nobody-${crypto.randomUUID().slice(0, 8)}@example.net`;
    await sinkRule({ match: bounced, phase: "rcpt", responses: [{ code: 550, message: "5.1.1 User unknown" }] });
    const sent = await json<{ id: string }>(
      await call("/api/v1/send", { key, body: { from: `hi@${domain.name}`, to: ["ann@gmail.com", bounced], subject: "s", text: "t" } }),
    );
    await eventually(async () => ((await messageOf(key, sent.id)).status === "sent" ? true : undefined));

    // One charged check, one free (bad syntax) check, and a bulk job of three addresses, one of them given twice.
    expect((await call("/api/v1/verify", { key, body: { email: "jane@acme.verify-test" } })).status).toBe(200);
    expect((await call("/api/v1/verify", { key, body: { email: "not an address" } })).status).toBe(200);
    const suffix = freshBulkSuffix();
    const job = await json<{ id: string }>(
      await call("/api/v1/verify", { key, body: { emails: [`a@x.${suffix}`, `b@y.${suffix}`, `a@x.${suffix}`, `c@z.${suffix}`] } }),
    );
    expect((await waitForJob(key, job.id)).status).toBe("completed");

    const usage = await usageOf(key);
    expect(usage.credits).toEqual(await ledgerTotals(account.id));
    expect(usage.credits).toEqual({
      send_charged: 2,
      send_refunded: 1,
      send_reserved: 0,
      send_released: 0,
      verify_charged: 4,
      verify_refunded: 0,
      verify_granted: 0,
      verify_expired: 0,
    });
    expect(usage.emails_sent).toBe(2);
    expect(usage.verifications).toBe(5);
    expect(usage.daily).toHaveLength(30);
    expect(usage.daily.at(-1)).toEqual({
      date: today(),
      api_calls: usage.api_calls,
      emails_sent: 2,
      verifications: 5,
      credits: usage.credits,
    });
  }, 60_000);

  it("matches the ledger after a campaign: reserved, then charged per recipient sent, the rest released", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10 });
    const { list } = await audienceOf(key, 3);
    const campaign = await sendCampaign(key, sender, list);
    await waitForStatus(key, campaign.id, "sent");
    const usage = await usageOf(key);
    expect(usage.credits).toEqual(await ledgerTotals(account.id));
    expect(usage.credits).toMatchObject({ send_reserved: 3, send_charged: 3 });
    expect(usage.emails_sent).toBe(3);
  }, 30_000);

  it("counts API calls in the key's RateLimiter and writes them to D1 only when its alarm flushes them", async () => {
    const account = await createAccount();
    const counted = await createKey(account.api_key, { name: "counted" });
    for (let i = 0; i < 3; i++) expect((await call("/api/v1/me", { key: counted.key })).status).toBe(200);
    // Refused requests are not calls the account made.
    expect((await call("/api/v1/me", { key: "sk_live_wrong" })).status).toBe(401);

    const limiter = env.RATE_LIMITER.getByName(`key:${counted.id}`);
    expect((await usageOf(account.api_key)).api_calls).toBe(0);
    expect(await runDurableObjectAlarm(limiter)).toBe(true);
    expect((await usageOf(account.api_key)).api_calls).toBe(3);

    // Flushed counts are not written twice; later calls arm the next flush.
    expect(await runDurableObjectAlarm(limiter)).toBe(false);
    await call("/api/v1/me", { key: counted.key });
    expect(await runDurableObjectAlarm(limiter)).toBe(true);
    const usage = await usageOf(account.api_key);
    expect(usage.api_calls).toBe(4);
    expect(usage.daily.at(-1)).toMatchObject({ date: today(), api_calls: 4 });
  });

  it("answers a bad range with 422 like the reports", async () => {
    const { api_key: key } = await createAccount();
    const response = await call("/api/v1/usage?from=2026-03-02&to=2026-03-01", { key });
    expect(response.status).toBe(422);
    expect(await response.json()).toEqual({
      message: "The request is invalid",
      code: "validation_failed",
      errors: { "query.to": ["Must be on or after `from`"] },
    });
  });
});
