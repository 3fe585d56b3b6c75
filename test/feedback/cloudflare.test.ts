import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { deliverMessages } from "../../src/domain/sending/deliver";
import { call, d1Of, json } from "../support/helpers";
import { eventually, messageOf, sendBalance, storedMessage } from "../support/sending";
import { rcpt, sender } from "../support/feedback";

// The deployment's transport is a var; these messages are delivered as a `TRANSPORT = "cloudflare"` deployment would,
// through the local runtime's `send_email` binding.
const cloudflareEnv = { ...env, TRANSPORT: "cloudflare" } as Env;

async function providerIds(account: { database: string }, messageId: string) {
  const { results } = await d1Of(account)
    .prepare("SELECT email, provider_message_id FROM message_recipients WHERE message_id = ?1 ORDER BY email")
    .bind(messageId)
    .all<{ email: string; provider_message_id: string | null }>();
  return results;
}

/** An event in the shape Cloudflare's event subscription publishes (docs: Email Sending event subscriptions). */
function emailEvent(type: string, providerMessageId: string, recipient: string, payload: Record<string, unknown> = {}) {
  return {
    type: `cf.email.sending.message.${type}`,
    source: { type: "email.sending", domain: "example.com" },
    payload: { eventId: crypto.randomUUID(), messageId: providerMessageId, sender: "hello@example.com", recipient, ...payload },
    metadata: { accountId: "0123456789abcdef", eventSubscriptionId: "sub_1", eventSchemaVersion: 1, eventTimestamp: new Date().toISOString() },
  };
}

async function today(key: string) {
  const day = new Date().toISOString().slice(0, 10);
  return (await json<{ totals: Record<string, number> }>(await call(`/api/v1/reports/overview?from=${day}&to=${day}`, { key }))).totals;
}

describe("Cloudflare Email Sending transport and its events", () => {
  it("hands each recipient its own copy and keeps Cloudflare's id for it; the hand-off counts as sent, not delivered", async () => {
    const { account, domain, key } = await sender();
    const to = [rcpt("a"), rcpt("b")].sort();
    const id = await storedMessage(account.id, domain.id, `hello@${domain.name}`, to);
    await deliverMessages(openCtx(cloudflareEnv, undefined, account), [id]);

    const message = await messageOf(key, id);
    expect(message.status).toBe("sent");
    expect(message.recipients.map((recipient) => recipient.status)).toEqual(["sent", "sent"]);
    const ids = await providerIds(account, id);
    expect(ids.map((row) => row.email)).toEqual(to);
    expect(ids.every((row) => typeof row.provider_message_id === "string" && row.provider_message_id.length > 0)).toBe(true);
    expect(new Set(ids.map((row) => row.provider_message_id)).size).toBe(2);
    expect(await today(key)).toMatchObject({ sent: 2, delivered: 0 });
  });

  it("delivered, bounced (hard) and complained events pushed through the queue map onto the messages", async () => {
    const { account, domain, key } = await sender();
    const [delivered, bounced, complained] = [rcpt("ok"), rcpt("gone"), rcpt("angry")];
    const ids: Record<string, string> = {};
    for (const to of [delivered, bounced, complained]) {
      const id = await storedMessage(account.id, domain.id, `hello@${domain.name}`, to);
      await deliverMessages(openCtx(cloudflareEnv, undefined, account), [id]);
      ids[to] = id;
    }
    const providerId = async (to: string) => (await providerIds(account, ids[to]!))[0]!.provider_message_id!;
    const balanceBefore = await sendBalance(key);

    await env.EMAIL_EVENTS_QUEUE.sendBatch([
      { body: emailEvent("delivered", await providerId(delivered), delivered, { delivery: { status: "delivered", code: "250 2.0.0 OK" } }) },
      { body: emailEvent("bounced", await providerId(bounced), bounced, { bounce: { type: "hard", category: "invalid_recipient" } }) },
      { body: emailEvent("delivered", await providerId(complained), complained) },
    ]);
    await eventually(async () => ((await messageOf(key, ids[bounced]!)).status === "bounced" ? true : undefined));
    await eventually(async () => ((await messageOf(key, ids[complained]!)).status === "delivered" ? true : undefined));
    await env.EMAIL_EVENTS_QUEUE.send(emailEvent("complained", await providerId(complained), complained, { complaint: { type: "abuse" } }));
    await eventually(async () => ((await messageOf(key, ids[complained]!)).recipients[0]?.status === "complained" ? true : undefined));

    const ok = await messageOf(key, ids[delivered]!);
    expect(ok.status).toBe("delivered");
    expect(ok.events.find((event) => event.type === "relay.delivered")?.data).toMatchObject({ recipient: delivered, feedback_source: "cloudflare" });
    // A late `delivered` for the recipient that bounced changes nothing and reports nothing; the complaint pushed after
    // it has been applied, so it was consumed.
    await env.EMAIL_EVENTS_QUEUE.send(emailEvent("delivered", await providerId(bounced), bounced));
    await env.EMAIL_EVENTS_QUEUE.send(emailEvent("complained", await providerId(delivered), delivered));
    await eventually(async () => ((await messageOf(key, ids[delivered]!)).recipients[0]?.status === "complained" ? true : undefined));
    const gone = await messageOf(key, ids[bounced]!);
    expect(gone.status).toBe("bounced");
    expect(gone.events.map((event) => event.type)).not.toContain("relay.delivered");
    expect(gone.events.find((event) => event.type === "relay.bounced")?.data).toMatchObject({
      bounce_type: "hard",
      smtp_response: "invalid_recipient",
    });
    expect(await sendBalance(key)).toBe(balanceBefore + 1);
    const angry = await messageOf(key, ids[complained]!);
    expect(angry.events.map((event) => event.type)).toContain("relay.complained");
    for (const [email, reason] of [
      [bounced, "bounce"],
      [complained, "complaint"],
    ] as const) {
      const list = await json<{ data: { reason: string }[] }>(await call(`/api/v1/suppressions?email=${encodeURIComponent(email)}`, { key }));
      expect(list.data[0]?.reason).toBe(reason);
    }
    expect(await today(key)).toMatchObject({ sent: 3, delivered: 2, hard_bounces: 1, complaints: 2 });
  });

  it("an event for a copy nobody sent, or an unreadable event, is dropped without effect", async () => {
    const { account, domain, key } = await sender();
    const to = rcpt("x");
    const id = await storedMessage(account.id, domain.id, `hello@${domain.name}`, to);
    await deliverMessages(openCtx(cloudflareEnv, undefined, account), [id]);
    await env.EMAIL_EVENTS_QUEUE.sendBatch([
      { body: emailEvent("bounced", "cf-unknown-id", to, { bounce: { type: "hard" } }) },
      { body: { type: "cf.email.sending.message.bounced", payload: { nothing: true } } },
    ]);
    // A later event on the same queue is processed, so the two above were consumed (and dropped) first.
    await env.EMAIL_EVENTS_QUEUE.send(emailEvent("delivered", (await providerIds(account, id))[0]!.provider_message_id!, to));
    await eventually(async () => ((await messageOf(key, id)).status === "delivered" ? true : undefined));
    expect((await messageOf(key, id)).events.map((event) => event.type)).not.toContain("relay.bounced");
  });
});
