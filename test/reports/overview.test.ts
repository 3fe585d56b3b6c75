import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { createExecutionContext, createMessageBatch } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { messages } from "../../src/db/schema";
import { abandonMessages } from "../../src/domain/sending/deliver";
import { recordOutcome, recordSkipped } from "../../src/domain/sending/outcome";
import { consumeSendBatch } from "../../src/queues/send";
import { call, createAccount, createKey, d1Of, dbOf, json, type CreatedAccount } from "../support/helpers";
import { eventually, messageOf, publish, sinkRule, storedMessage, verifiedDomain } from "../support/sending";

// GET /reports/overview over what the real pipeline did: POST /send, the send queue, the dev mail sink answering 250,
// 4xx and 5xx, suppressions, test keys. Every count is per recipient.

type Counts = Record<string, number>;
type Overview = {
  from: string;
  to: string;
  totals: Counts;
  rates: Record<string, number>;
  providers: (Counts & { provider: string; rates: Record<string, number> })[];
  domains: (Counts & { domain: string; rates: Record<string, number> })[];
  daily: (Counts & { date: string })[];
};

const zero = {
  sent: 0,
  delivered: 0,
  hard_bounces: 0,
  soft_bounces: 0,
  opens: 0,
  unique_opens: 0,
  machine_opens: 0,
  clicks: 0,
  unique_clicks: 0,
  unsubscribes: 0,
  complaints: 0,
  failed: 0,
  suppressed: 0,
  replies: 0,
};
const zeroRates = { delivery_rate: 0, bounce_rate: 0, open_rate: 0, click_rate: 0, unsubscribe_rate: 0, complaint_rate: 0 };
const today = () => new Date().toISOString().slice(0, 10);
const daysBefore = (date: string, days: number) => new Date(Date.parse(date) - days * 86_400_000).toISOString().slice(0, 10);
const tag = () => crypto.randomUUID().slice(0, 8);

const overview = async (key: string, query = "") => json<Overview>(await call(`/api/v1/reports/overview${query}`, { key }));

async function settled(key: string, id: string) {
  return eventually(async () => {
    const message = await messageOf(key, id);
    return ["queued", "sending", "deferred"].includes(message.status) ? undefined : message;
  }, 20_000);
}

async function send(key: string, from: string, to: string[]) {
  const response = await call("/api/v1/send", { key, body: { from, to, subject: "Report me", text: "Hello" } });
  expect(response.status).toBe(202);
  return (await json<{ id: string }>(response)).id;
}

describe("GET /reports/overview after real sends", () => {
  let account: CreatedAccount;
  let mainDomain: string;
  let otherDomain: string;
  let report: Overview;

  beforeAll(async () => {
    account = await createAccount({ send_credits: 100 });
    const key = account.api_key;
    mainDomain = (await verifiedDomain(key)).name;
    const second = await verifiedDomain(key);
    otherDomain = second.name;
    const t = tag();
    const workspace = `corp-${t}.reports-test`;
    await publish(workspace, { MX: [{ priority: 1, exchange: "aspmx.l.google.com" }] });

    const delivered = [`ann-${t}@gmail.com`, `bob-${t}@${workspace}`];
    const greylisted = `cy-${t}@hotmail.com`;
    const unknownUser = `dan-${t}@example.net`;
    const unavailable = `eve-${t}@yahoo.com`;
    const suppressed = `fay-${t}@icloud.com`;
    await sinkRule({ match: greylisted, phase: "rcpt", responses: [{ code: 451, message: "4.7.1 Greylisted, try again later" }] });
    await sinkRule({ match: unknownUser, phase: "rcpt", responses: [{ code: 550, message: "5.1.1 User unknown" }] });
    await sinkRule({ match: unavailable, phase: "rcpt", responses: [{ code: 452, message: "4.2.2 Mailbox full" }], times: 3 });
    expect((await call("/api/v1/suppressions", { key, body: { email: suppressed, reason: "manual" } })).status).toBe(201);

    const first = await send(key, `news@${mainDomain}`, [...delivered, greylisted, unknownUser, unavailable, suppressed]);
    const second_ = await send(key, `hi@${otherDomain}`, [`gus-${t}@googlemail.com`]);
    // A test key's mail is simulated and never counted.
    const sandbox = await createKey(key, { name: "sandbox", mode: "test" });
    const simulated = await send(sandbox.key, `news@${mainDomain}`, [`hal-${t}@gmail.com`, `bounced@gmail.com`]);
    for (const id of [first, second_, simulated]) await settled(key, id);

    // A bounce through the consumer itself: a stored message delivered from a batch of its own. Refused by a rule of
    // the dev sink that names its recipient: the fault sink is test/sending/faults.test.ts's alone, whose rules for
    // every connection ("*") would reach this message if it went there while that file runs in another runtime.
    const faulty = `ivy-${t}@example.org`;
    await sinkRule({ match: faulty, phase: "rcpt", responses: [{ code: 550, message: "5.1.1 No such user" }] });
    const stored = await storedMessage(account.id, second.id, `news@${mainDomain}`, faulty);
    const batch = createMessageBatch("mailforge-send", [
      { id: `q-${t}`, timestamp: new Date(), attempts: 1, body: { message_id: stored, database: account.database } },
    ]);
    createExecutionContext();
    await consumeSendBatch(batch, env);
    expect((await messageOf(key, stored)).status).toBe("bounced");

    report = await overview(key);
  }, 60_000);

  it("counts each recipient's final outcome once, with rates over sent and delivered", () => {
    // Delivered: ann, bob, cy (after one deferral), gus. Hard bounces: dan, ivy. Failed after 3 attempts: eve.
    // Soft bounces: cy and eve, once each however often they were deferred. Suppressed at acceptance: fay.
    expect(report.totals).toEqual({ ...zero, sent: 7, delivered: 4, hard_bounces: 2, soft_bounces: 2, failed: 1, suppressed: 1 });
    expect(report.rates).toEqual({ ...zeroRates, delivery_rate: 0.5714, bounce_rate: 0.2857 });
  });

  it("breaks the counts down by mailbox provider (by domain name or MX) in a fixed order, zeros included", () => {
    expect(report.providers.map((row) => row.provider)).toEqual(["gmail", "microsoft", "yahoo", "apple", "other"]);
    const byProvider = Object.fromEntries(report.providers.map(({ provider, rates, ...counts }) => [provider, { counts, rates }]));
    expect(byProvider.gmail).toEqual({ counts: { ...zero, sent: 3, delivered: 3 }, rates: { ...zeroRates, delivery_rate: 1 } });
    expect(byProvider.microsoft!.counts).toEqual({ ...zero, sent: 1, delivered: 1, soft_bounces: 1 });
    expect(byProvider.yahoo).toEqual({ counts: { ...zero, sent: 1, failed: 1, soft_bounces: 1 }, rates: zeroRates });
    expect(byProvider.apple).toEqual({ counts: { ...zero, suppressed: 1 }, rates: zeroRates });
    expect(byProvider.other).toEqual({ counts: { ...zero, sent: 2, hard_bounces: 2 }, rates: { ...zeroRates, bounce_rate: 1 } });
  });

  it("breaks them down by sending domain, most sent first", () => {
    expect(report.domains.map(({ rates: _rates, ...row }) => row)).toEqual([
      { domain: mainDomain, ...zero, sent: 6, delivered: 3, hard_bounces: 2, soft_bounces: 2, failed: 1, suppressed: 1 },
      { domain: otherDomain, ...zero, sent: 1, delivered: 1 },
    ]);
  });

  it("has every day of the default range (30 days ending today, UTC), zeros included", () => {
    expect(report.to).toBe(today());
    expect(report.from).toBe(daysBefore(today(), 29));
    expect(report.daily.map((day) => day.date)).toEqual(Array.from({ length: 30 }, (_, i) => daysBefore(today(), 29 - i)));
    expect(report.daily.slice(0, 29).every(({ date: _date, ...counts }) => JSON.stringify(counts) === JSON.stringify(zero))).toBe(true);
    expect(report.daily[29]).toEqual({ date: today(), ...report.totals });
  });

  it("counts nothing for days outside the range asked for", async () => {
    const before = await overview(account.api_key, `?from=${daysBefore(today(), 10)}&to=${daysBefore(today(), 1)}`);
    expect(before.totals).toEqual(zero);
    expect(before.daily).toHaveLength(10);
    expect(before.domains).toEqual([]);
  });

  it("shows another account nothing of this one", async () => {
    const stranger = await createAccount();
    expect((await overview(stranger.api_key)).totals).toEqual(zero);
  });
});

describe("recording an outcome twice", () => {
  it("counts the recipient once: the rollup is guarded by the recipient's status", async () => {
    const account = await createAccount({ send_credits: 10 });
    const domain = await verifiedDomain(account.api_key);
    const to = `once-${tag()}@gmail.com`;
    const id = await storedMessage(account.id, domain.id, `hi@${domain.name}`, to);
    const row = (await dbOf(account).select().from(messages).where(eq(messages.id, id)).get())!;
    const deferral = {
      ok: false as const,
      kind: "temporary" as const,
      stage: "rcpt" as const,
      connectionError: false,
      code: 451,
      response: "451 later",
    };
    const delivery = {
      ok: true as const,
      code: 250,
      response: "250 ok",
      perRecipient: [{ recipient: to, ok: true as const, code: 250, response: "250 ok" }],
    };
    // The same deferral recorded twice (a redelivered queue message), then the same delivery twice.
    await d1Of(account).batch(recordOutcome(openCtx(env, undefined, account), row, [to], deferral).statements);
    await d1Of(account).batch(recordOutcome(openCtx(env, undefined, account), { ...row, attempts: 1 }, [to], deferral).statements);
    await d1Of(account).batch(recordOutcome(openCtx(env, undefined, account), { ...row, attempts: 1 }, [to], delivery).statements);
    await d1Of(account).batch(recordOutcome(openCtx(env, undefined, account), { ...row, attempts: 2 }, [to], delivery).statements);
    expect((await overview(account.api_key)).totals).toEqual({ ...zero, sent: 1, delivered: 1, soft_bounces: 1 });
  });
});

describe("outcomes recorded outside a delivery attempt", () => {
  it("a message the queue gave up on counts its pending recipients as failed, once", async () => {
    const account = await createAccount({ send_credits: 10 });
    const domain = await verifiedDomain(account.api_key);
    const id = await storedMessage(account.id, domain.id, `hi@${domain.name}`, [`a-${tag()}@yahoo.com`, `b-${tag()}@example.net`]);
    await abandonMessages(openCtx(env, undefined, account), [id]);
    await abandonMessages(openCtx(env, undefined, account), [id]);
    const report = await overview(account.api_key);
    expect(report.totals).toEqual({ ...zero, sent: 2, failed: 2 });
    expect(report.providers.filter((row) => (row.failed ?? 0) > 0).map((row) => [row.provider, row.failed])).toEqual([
      ["yahoo", 1],
      ["other", 1],
    ]);
  });

  it("a campaign recipient skipped as suppressed counts as suppressed; one skipped because the campaign was cancelled does not", async () => {
    const account = await createAccount({ send_credits: 10 });
    const domain = await verifiedDomain(account.api_key);
    const from = `hi@${domain.name}`;
    const skip = async (to: string, status: "suppressed" | "cancelled") => {
      const id = await storedMessage(account.id, domain.id, from, to);
      const message = (await dbOf(account).select().from(messages).where(eq(messages.id, id)).get())!;
      // Twice, as a redelivered queue message would.
      for (let i = 0; i < 2; i++)
        await d1Of(account).batch(recordSkipped(openCtx(env, undefined, account), message, [to], status, status).statements);
    };
    await skip(`s-${tag()}@icloud.com`, "suppressed");
    await skip(`c-${tag()}@icloud.com`, "cancelled");
    const report = await overview(account.api_key);
    expect(report.totals).toEqual({ ...zero, suppressed: 1 });
    expect(report.providers.find((row) => row.provider === "apple")).toMatchObject({ suppressed: 1 });
  });
});

describe("GET /reports/overview: the range and the key", () => {
  let key: string;
  beforeAll(async () => {
    key = (await createAccount()).api_key;
  });

  it.each([
    ["?from=2026-13-01", { "query.from": ["Must be a date YYYY-MM-DD"] }],
    ["?to=yesterday", { "query.to": ["Must be a date YYYY-MM-DD"] }],
    ["?from=2026-02-30&to=2026-03-01", { "query.from": ["Must be a date YYYY-MM-DD"] }],
    ["?from=2026-03-02&to=2026-03-01", { "query.to": ["Must be on or after `from`"] }],
    ["?from=2025-01-01&to=2026-01-02", { "query.to": ["The range may cover at most 366 days"] }],
  ])("answers %s with 422 and the field at fault", async (query, errors) => {
    const response = await call(`/api/v1/reports/overview${query}`, { key });
    expect(response.status).toBe(422);
    expect(await response.json()).toEqual({ message: "The request is invalid", code: "validation_failed", errors });
  });

  it("accepts 366 days, a single day, and only `from` or only `to` (30 days ending there)", async () => {
    expect((await overview(key, "?from=2024-01-01&to=2024-12-31")).daily).toHaveLength(366);
    expect((await overview(key, "?from=2026-05-04&to=2026-05-04")).daily.map((day) => day.date)).toEqual(["2026-05-04"]);
    expect(await overview(key, "?to=2026-03-01")).toMatchObject({ from: "2026-01-31", to: "2026-03-01" });
    expect(await overview(key, `?from=${daysBefore(today(), 3)}`)).toMatchObject({ from: daysBefore(today(), 3), to: today() });
  });

  it("needs the reports scope", async () => {
    const sendOnly = await createKey(key, { name: "sender", scopes: ["send"] });
    const reports = await createKey(key, { name: "reports", scopes: ["reports"] });
    for (const path of ["/api/v1/reports/overview", "/api/v1/usage", "/api/v1/reports/campaigns/cmp_x"]) {
      const refused = await call(path, { key: sendOnly.key });
      expect(refused.status).toBe(403);
      expect(await refused.json()).toMatchObject({ code: "scope_missing" });
    }
    expect((await call("/api/v1/reports/overview", { key: reports.key })).status).toBe(200);
    expect((await call("/api/v1/usage", { key: reports.key })).status).toBe(200);
    expect((await call("/api/v1/reports/overview")).status).toBe(401);
  });
});
