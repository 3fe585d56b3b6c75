import { describe, expect, it } from "vitest";
import { call, createAccount, d1Of, json } from "../support/helpers";
import { eventually, messageOf, sinkRule, storedMessage, verifiedDomain } from "../support/sending";

// What GET /messages and GET /messages/{id} say about a message: its timeline, its credits and its statuses.

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

async function setup() {
  const account = await createAccount({ send_credits: 10 });
  const domain = await verifiedDomain(account.api_key);
  return { account, key: account.api_key, from: `hello@${domain.name}`, domainId: domain.id };
}

type Summary = { id: string; status: string; credits_charged: number; credits_refunded: number };

describe("the message record", () => {
  it("lists events that share a millisecond in the order they were written", async () => {
    const { account, from, domainId } = await setup();
    const id = await storedMessage(account.id, domainId, from, "ann@example.org");
    const at = "2026-01-02T03:04:05.678Z";
    // Ids that sort against the insert order, so nothing but the write order can put them right.
    const written = [`evt_z${crypto.randomUUID().slice(0, 8)}`, `evt_m${crypto.randomUUID().slice(0, 8)}`, `evt_a${crypto.randomUUID().slice(0, 8)}`];
    const types = ["relay.sent", "relay.delivered", "relay.complained"];
    await d1Of(account).batch(
      written.map((eventId, i) =>
        d1Of(account)
          .prepare("INSERT INTO events (id, account_id, type, subject_id, dedupe_key, data, created_at) VALUES (?1, ?2, ?3, ?4, ?5, '{}', ?6)")
          .bind(eventId, account.id, types[i], id, `${types[i]}:${id}`, at),
      ),
    );
    const message = await messageOf(account.api_key, id);
    expect(message.events.map((event) => [event.id, event.type])).toEqual(written.map((eventId, i) => [eventId, types[i]]));
  });

  it("shows what was refunded beside what was charged: a bounced recipient of two", async () => {
    const { key, from } = await setup();
    const bounced = rcpt("nobody");
    const delivered = rcpt("someone");
    await sinkRule({
      match: bounced,
      phase: "rcpt",
      responses: [{ code: 550, message: "5.1.1 <nobody>: Recipient address rejected: User unknown" }],
    });
    const sent = await json<{ id: string }>(
      await call("/api/v1/send", { key, body: { from, to: [bounced, delivered], subject: "Refunds", text: "Hi" } }),
    );
    const other = await json<{ id: string }>(await call("/api/v1/send", { key, body: { from, to: [rcpt("fine")], subject: "Fine", text: "Hi" } }));

    const message = await eventually(async () => {
      const current = await json<Summary & { recipients: { status: string }[] }>(await call(`/api/v1/messages/${sent.id}`, { key }));
      return current.recipients.every((recipient) => !["queued", "sending", "deferred"].includes(recipient.status)) ? current : undefined;
    }, 15_000);
    expect(message).toMatchObject({ credits_charged: 2, credits_refunded: 1 });
    await eventually(async () => ((await messageOf(key, other.id)).status === "sent" ? true : undefined), 15_000);

    const list = await json<{ data: Summary[] }>(await call("/api/v1/messages", { key }));
    expect(list.data.map(({ id, credits_charged, credits_refunded }) => ({ id, credits_charged, credits_refunded }))).toEqual([
      { id: other.id, credits_charged: 1, credits_refunded: 0 },
      { id: sent.id, credits_charged: 2, credits_refunded: 1 },
    ]);
  }, 30_000);

  it("shows and filters the sending and unknown statuses", async () => {
    const { account, key, from, domainId } = await setup();
    const sending = await storedMessage(account.id, domainId, from, "ann@example.org");
    const unknown = await storedMessage(account.id, domainId, from, "bob@example.org");
    await d1Of(account).batch([
      d1Of(account).prepare("UPDATE messages SET status = 'sending', claimed_at = ?2 WHERE id = ?1").bind(sending, new Date().toISOString()),
      d1Of(account).prepare("UPDATE messages SET status = 'unknown' WHERE id = ?1").bind(unknown),
    ]);
    expect((await messageOf(key, sending)).status).toBe("sending");
    expect((await messageOf(key, unknown)).status).toBe("unknown");
    for (const [status, id] of [
      ["sending", sending],
      ["unknown", unknown],
    ] as const) {
      const response = await call(`/api/v1/messages?status=${status}`, { key });
      expect(response.status).toBe(200);
      expect((await json<{ data: Summary[] }>(response)).data.map((message) => message.id)).toEqual([id]);
    }
  });

  it("documents credits_refunded and every status in the OpenAPI document", async () => {
    const document = await json<{
      components: { schemas: Record<string, { properties: Record<string, { enum?: string[]; description?: string }> }> };
    }>(await call("/api/v1/openapi.json"));
    const summary = document.components.schemas.MessageSummary!;
    expect(summary.properties.credits_refunded).toMatchObject({ description: expect.stringContaining("refunded") });
    expect(summary.properties.status!.enum).toEqual(expect.arrayContaining(["sending", "unknown"]));
    expect(summary.properties.status!.description).toMatch(/sending \(a delivery attempt is in progress\).*unknown: an attempt was interrupted/s);
  });
});
