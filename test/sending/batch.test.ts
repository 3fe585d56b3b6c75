import { describe, expect, it } from "vitest";
import { call, createAccount, d1Of, d1OfAccount, json } from "../support/helpers";
import { eventually, messageOf, sendBalance, sinkMessagesTo, verifiedDomain } from "../support/sending";

// POST /send/batch through the real Worker, D1, the send queue and the dev SMTP sink.

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

async function setup(credits = 10) {
  const account = await createAccount({ send_credits: credits });
  const domain = await verifiedDomain(account.api_key);
  return { account, key: account.api_key, from: `Acme <hello@${domain.name}>` };
}

type BatchAccepted = { data: { id: string; status: string; credits_charged: number; recipients: { email: string; status: string }[] }[] };

const storedMessages = async (accountId: string) =>
  (await (await d1OfAccount(accountId)).prepare("SELECT COUNT(*) AS n FROM messages WHERE account_id = ?").bind(accountId).first<{ n: number }>())!.n;

describe("POST /send/batch", () => {
  it("a batch of 3 gives 3 ids in order, charges 3 and delivers 3 mails", async () => {
    const { key, from } = await setup();
    const to = [rcpt("a"), rcpt("b"), rcpt("c")];
    const response = await call("/api/v1/send/batch", {
      key,
      body: to.map((address, i) => ({ from, to: address, subject: `Batch ${i}`, text: `Message ${i}`, tags: [`n${i}`] })),
    });
    expect(response.status).toBe(202);
    const accepted = await json<BatchAccepted>(response);
    expect(accepted.data).toHaveLength(3);
    expect(accepted.data.map((result) => result.recipients[0]!.email)).toEqual(to);
    expect(new Set(accepted.data.map((result) => result.id)).size).toBe(3);
    for (const result of accepted.data) expect(result).toMatchObject({ id: expect.stringMatching(/^msg_/), status: "queued", credits_charged: 1 });
    expect(await sendBalance(key)).toBe(7);

    for (const [i, address] of to.entries()) {
      const [mail] = await eventually(async () => ((await sinkMessagesTo(address)).length > 0 ? sinkMessagesTo(address) : undefined));
      expect(mail!.subject).toBe(`Batch ${i}`);
    }
    for (const result of accepted.data) await eventually(async () => ((await messageOf(key, result.id)).status === "sent" ? true : undefined));
  });

  it("one bad item refuses the whole batch with 422 keyed by its index; nothing is stored or charged", async () => {
    const { key, from, account } = await setup();
    const response = await call("/api/v1/send/batch", {
      key,
      body: [
        { from, to: rcpt("ok"), subject: "Fine", text: "Fine" },
        { from, to: rcpt("ok"), subject: "Fine", text: "Fine" },
        { from, to: ["ann@example.org", "not an address"], subject: "Bad", text: "Bad" },
      ],
    });
    expect(response.status).toBe(422);
    const body = await json<{ code: string; errors: Record<string, string[]> }>(response);
    expect(body.code).toBe("validation_failed");
    expect(Object.keys(body.errors)).toEqual(["2.to.1"]);
    expect(await sendBalance(key)).toBe(10);
    expect(await storedMessages(account.id)).toBe(0);

    // A template that does not exist, found only once the batch's reads are done, is refused the same way.
    const missing = await call("/api/v1/send/batch", {
      key,
      body: [
        { from, to: rcpt("ok"), subject: "Fine", text: "Fine" },
        { from, to: rcpt("ok"), template_id: "tpl_missing" },
      ],
    });
    expect(missing.status).toBe(422);
    expect(Object.keys((await json<{ errors: Record<string, string[]> }>(missing)).errors)).toEqual(["1.template_id"]);
    expect(await storedMessages(account.id)).toBe(0);
  });

  it("credits short of the whole batch give 402 with nothing stored or charged, even when the first items would fit", async () => {
    const { key, from, account } = await setup(2);
    const response = await call("/api/v1/send/batch", {
      key,
      body: [rcpt("a"), rcpt("b"), rcpt("c")].map((to) => ({ from, to, subject: "S", text: "T" })),
    });
    expect(response.status).toBe(402);
    expect(await json(response)).toMatchObject({ code: "insufficient_credits", message: expect.stringContaining("needs 3, 2 available") });
    expect(await sendBalance(key)).toBe(2);
    expect(await storedMessages(account.id)).toBe(0);
  });

  it("an unverified from domain in one item refuses the batch with 403 naming the item", async () => {
    const { key, from, account } = await setup();
    const response = await call("/api/v1/send/batch", {
      key,
      body: [
        { from, to: rcpt("a"), subject: "S", text: "T" },
        { from: "someone@not-verified.example", to: rcpt("b"), subject: "S", text: "T" },
      ],
    });
    expect(response.status).toBe(403);
    expect(await json(response)).toMatchObject({ code: "domain_not_verified", message: expect.stringMatching(/^Request 1: /) });
    expect(await storedMessages(account.id)).toBe(0);
  });

  it("one Idempotency-Key covers the batch: a retry replays the same ids and charges nothing; another body is a 409", async () => {
    const { key, from } = await setup();
    const body = [rcpt("a"), rcpt("b")].map((to) => ({ from, to, subject: "S", text: "T" }));
    const headers = { "Idempotency-Key": "batch-once" };
    const first = await call("/api/v1/send/batch", { key, body, headers });
    expect(first.status).toBe(202);
    const again = await call("/api/v1/send/batch", { key, body, headers });
    expect(again.status).toBe(202);
    expect(again.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await json(again)).toEqual(await json(first));
    expect(await sendBalance(key)).toBe(8);
    const other = await call("/api/v1/send/batch", { key, body: body.slice(1), headers });
    expect(other.status).toBe(409);
  });

  it("refuses an empty batch and one of 101 requests", async () => {
    const { key, from } = await setup();
    const tooMany = Array.from({ length: 101 }, () => ({ from, to: "ann@example.org", subject: "S", text: "T" }));
    for (const body of [[], tooMany]) {
      const response = await call("/api/v1/send/batch", { key, body });
      expect(response.status).toBe(422);
      const refusal = await json<{ code: string; errors: Record<string, string[]> }>(response);
      expect(refusal.code).toBe("validation_failed");
      expect(Object.keys(refusal.errors).length).toBeGreaterThan(0);
    }
    expect(await sendBalance(key)).toBe(10);
    expect((await json<{ data: unknown[] }>(await call("/api/v1/messages", { key }))).data).toEqual([]);
  });

  it("a batch mixes scheduled, suppressed and immediate sends, each answered as POST /send would", async () => {
    const { key, from } = await setup();
    const suppressed = rcpt("gone");
    expect((await call("/api/v1/suppressions", { key, body: { email: suppressed, reason: "manual" } })).status).toBe(201);
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const response = await call("/api/v1/send/batch", {
      key,
      body: [
        { from, to: rcpt("now"), subject: "S", text: "T" },
        { from, to: suppressed, subject: "S", text: "T" },
        { from, to: rcpt("later"), subject: "S", text: "T", scheduled_at: later },
      ],
    });
    expect(response.status).toBe(202);
    const { data } = await json<BatchAccepted>(response);
    expect(data.map((result) => [result.status, result.credits_charged])).toEqual([
      ["queued", 1],
      ["suppressed", 0],
      ["scheduled", 1],
    ]);
    expect(await sendBalance(key)).toBe(8);
    expect((await messageOf(key, data[1]!.id)).events.map((event) => event.type)).toEqual(["relay.suppressed"]);
  });

  it("a batch refused for credits leaves no relay.suppressed event of its suppressed recipients behind", async () => {
    const { key, from, account } = await setup(1);
    const suppressed = rcpt("gone");
    expect((await call("/api/v1/suppressions", { key, body: { email: suppressed, reason: "manual" } })).status).toBe(201);
    const response = await call("/api/v1/send/batch", {
      key,
      body: [
        { from, to: [suppressed, rcpt("a")], subject: "S", text: "T" },
        { from, to: rcpt("b"), subject: "S", text: "T" },
      ],
    });
    expect(response.status).toBe(402);
    expect(await storedMessages(account.id)).toBe(0);
    const events = await d1Of(account)
      .prepare("SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'relay.suppressed'")
      .bind(account.id)
      .first<{ n: number }>();
    expect(events!.n).toBe(0);
  });
});
