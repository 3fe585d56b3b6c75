import { env } from "cloudflare:workers";
import { createExecutionContext, createMessageBatch, getQueueResult, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { SmtpTransport } from "../../src/domain/transport/smtp";
import { consumeSendBatch, consumeSendDeadLetters } from "../../src/queues/send";
import { call, createAccount, d1Of, json, type CreatedAccount } from "../support/helpers";
import { eventually, messageOf, sendBalance, sinkMessagesTo, sinkRule, storedMessage, verifiedDomain } from "../support/sending";

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

async function setup() {
  const account = await createAccount({ send_credits: 10 });
  const domain = await verifiedDomain(account.api_key);
  return { account, key: account.api_key, from: `hello@${domain.name}`, domainId: domain.id };
}

async function send(key: string, from: string, to: string) {
  const response = await call("/api/v1/send", { key, body: { from, to: [to], subject: "Delivery test", text: "Hello" } });
  expect(response.status).toBe(202);
  return (await json<{ id: string }>(response)).id;
}

const settled = (key: string, id: string) =>
  eventually(async () => {
    const message = await messageOf(key, id);
    return ["queued", "sending", "deferred"].includes(message.status) ? undefined : message;
  }, 15_000);

async function ledgerOf(account: CreatedAccount, id: string) {
  const rows = await d1Of(account)
    .prepare("SELECT kind, amount FROM credit_ledger WHERE reference_id = ?1 OR reference_id LIKE ?1 || ':%' ORDER BY created_at")
    .bind(id)
    .all();
  return rows.results;
}

describe("delivery through the send queue to the provider", () => {
  it("retries after a 451 and delivers, charged once", async () => {
    const { account, key, from } = await setup();
    const to = rcpt("greylisted");
    await sinkRule({ match: to, phase: "rcpt", responses: [{ code: 451, message: "4.7.1 Greylisted, try again later" }] });
    const id = await send(key, from, to);
    const message = await settled(key, id);
    expect(message.status).toBe("sent");
    expect(message.attempts).toBe(2);
    expect(message.recipients).toEqual([
      { email: to, status: "sent", smtp_response: expect.stringMatching(/^250/), opens: 0, clicks: 0, opened_at: null, clicked_at: null },
    ]);
    expect(await sinkMessagesTo(to)).toHaveLength(1);
    expect(await ledgerOf(account, id)).toEqual([{ kind: "charge", amount: -1 }]);
    expect(await sendBalance(key)).toBe(9);
    expect(message.events.map((event) => event.type)).toEqual(["relay.sent"]);
  });

  it("bounces on 550 5.1.1: refunds the credit, suppresses the address, and skips it next time without charging", async () => {
    const { account, key, from } = await setup();
    const to = rcpt("nobody");
    await sinkRule({ match: to, phase: "rcpt", responses: [{ code: 550, message: "5.1.1 <nobody>: Recipient address rejected: User unknown" }] });
    const id = await send(key, from, to);
    const message = await settled(key, id);
    expect(message.status).toBe("bounced");
    expect(message.recipients[0]).toMatchObject({ status: "bounced", smtp_response: expect.stringContaining("550 5.1.1") });
    expect(message.events.map((event) => event.type)).toEqual(["relay.bounced"]);
    expect(message.events[0]!.data).toMatchObject({ recipient: to, bounce_type: "hard", smtp_code: 550, enhanced_code: "5.1.1" });
    expect(await ledgerOf(account, id)).toEqual([
      { kind: "charge", amount: -1 },
      { kind: "refund", amount: 1 },
    ]);
    expect(await sendBalance(key)).toBe(10);

    const suppressions = await json<{ data: { email: string; reason: string }[] }>(
      await call(`/api/v1/suppressions?email=${encodeURIComponent(to)}`, { key }),
    );
    expect(suppressions.data).toMatchObject([{ email: to, reason: "bounce" }]);
    const next = await json(await call("/api/v1/send", { key, body: { from, to: [to], subject: "again", text: "x" } }));
    expect(next).toMatchObject({ status: "suppressed", credits_charged: 0 });
    expect(await sendBalance(key)).toBe(10);
  });

  it("gives up after the last attempt when the provider keeps refusing: failed, refunded, relay.failed", async () => {
    const { account, key, from } = await setup();
    const to = rcpt("unavailable");
    await sinkRule({ match: to, phase: "rcpt", responses: [{ code: 421, message: "4.3.2 Service not available, closing channel" }], times: 3 });
    const id = await send(key, from, to);
    const message = await settled(key, id);
    expect(message.status).toBe("failed");
    expect(message.attempts).toBe(3);
    expect(message.events.map((event) => event.type)).toEqual(["relay.failed"]);
    expect(await ledgerOf(account, id)).toEqual([
      { kind: "charge", amount: -1 },
      { kind: "refund", amount: 1 },
    ]);
    expect(await sinkMessagesTo(to)).toEqual([]);
  }, 20_000);
});

const unreachable = () => new SmtpTransport({ host: "127.0.0.1", port: 9, secure: "off", connectTimeoutMs: 1000 });

describe("the send consumer", () => {
  it("retries a connection failure with doubling delays, then fails and refunds", async () => {
    const { account, key, from, domainId } = await setup();
    const id = await storedMessage(account.id, domainId, from, rcpt("down"));
    const delays: (number | undefined)[] = [];
    // The suite retries with no delay (vitest.config.ts); the production base shows the doubling.
    const withBackoff = { ...env, SEND_RETRY_BASE_SECONDS: "60" };
    for (let attempt = 1; attempt <= 3; attempt++) {
      const batch = createMessageBatch("mailforge-send", [
        { id: `q${attempt}`, timestamp: new Date(), attempts: attempt, body: { message_id: id, database: account.database } },
      ]);
      const ctx = createExecutionContext();
      // getQueueResult reports that a message was retried but not its delay, so the delay is read off the call.
      const queued = batch.messages[0]!;
      const retry = queued.retry.bind(queued);
      let delay: number | undefined;
      Object.defineProperty(queued, "retry", {
        value: (options?: QueueRetryOptions) => {
          delay = options?.delaySeconds;
          retry(options);
        },
      });
      await consumeSendBatch(batch, withBackoff, { openTransport: unreachable });
      const result = await getQueueResult(batch, ctx);
      expect(result.retryMessages.length + result.explicitAcks.length).toBe(1);
      delays.push(delay);
    }
    expect(delays).toEqual([60, 120, undefined]);
    const message = await messageOf(key, id);
    expect(message).toMatchObject({ status: "failed", attempts: 3 });
    expect(message.recipients[0]!.status).toBe("failed");
    expect(await ledgerOf(account, id)).toEqual([
      { kind: "charge", amount: -1 },
      { kind: "refund", amount: 1 },
    ]);
  });

  it("does nothing for a message that was already delivered (at-least-once redelivery)", async () => {
    const { account, key, from } = await setup();
    const to = rcpt("once");
    const id = await send(key, from, to);
    await settled(key, id);
    const batch = createMessageBatch("mailforge-send", [
      { id: "dup", timestamp: new Date(), attempts: 2, body: { message_id: id, database: account.database } },
    ]);
    const ctx = createExecutionContext();
    await consumeSendBatch(batch, env);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["dup"]);
    expect(await sinkMessagesTo(to)).toHaveLength(1);
  });

  it("spreads a batch over at most 5 reused connections instead of one per message", async () => {
    const { account, from, domainId } = await setup();
    const recipients = Array.from({ length: 9 }, (_, i) => rcpt(`lane${i}`));
    const ids = [];
    for (const to of recipients) ids.push(await storedMessage(account.id, domainId, from, to));
    const batch = createMessageBatch(
      "mailforge-send",
      ids.map((id, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body: { message_id: id, database: account.database } })),
    );
    const ctx = createExecutionContext();
    await consumeSendBatch(batch, env);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toHaveLength(9);
    const received = (await Promise.all(recipients.map(sinkMessagesTo))).flat();
    expect(received).toHaveLength(9);
    expect(new Set(received.map((message) => message.session_id)).size).toBe(5);
  });

  it("sends a batch whose messages add up to more than is prepared ahead at once (8 MiB), every one exactly once", async () => {
    const { account, from, domainId } = await setup();
    const recipients = Array.from({ length: 4 }, (_, i) => rcpt(`large${i}`));
    const ids = [];
    for (const to of recipients) {
      const id = await storedMessage(account.id, domainId, from, to);
      // 3 MB of text each, kept in R2 as accepted large content is: four of them do not fit the budget together.
      const row = await d1Of(account).prepare("SELECT content FROM messages WHERE id = ?").bind(id).first<{ content: string }>();
      const content = { ...JSON.parse(row!.content), text: `${"large body line\r\n".repeat(180_000)}` };
      await env.BLOBS.put(`messages/${id}.json`, JSON.stringify(content));
      await d1Of(account).prepare("UPDATE messages SET content = NULL, content_key = ?2 WHERE id = ?1").bind(id, `messages/${id}.json`).run();
      ids.push(id);
    }
    const batch = createMessageBatch(
      "mailforge-send",
      ids.map((id, i) => ({ id: `large${i}`, timestamp: new Date(), attempts: 1, body: { message_id: id, database: account.database } })),
    );
    const ctx = createExecutionContext();
    // One connection: the messages wait for each other, so preparing ahead has to pause and resume.
    const oneConnection: Env & { SMTP_CONNECTIONS_PER_BATCH: string } = { ...env, SMTP_CONNECTIONS_PER_BATCH: "1" };
    await consumeSendBatch(batch, oneConnection);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toHaveLength(4);
    for (const to of recipients) {
      const received = await sinkMessagesTo(to);
      expect(received).toHaveLength(1);
      expect(received[0]!.size).toBeGreaterThan(3_000_000);
    }
    // 12 MB through R2, MIME, DKIM and SMTP: a hang guard for a loaded machine, not a speed check.
  }, 60_000);

  it("dispatches a batch's events after handing the queue its answer, through waitUntil", async () => {
    const { account, from, domainId } = await setup();
    const id = await storedMessage(account.id, domainId, from, rcpt("after"));
    const batch = createMessageBatch("mailforge-send", [
      { id: "after", timestamp: new Date(), attempts: 1, body: { message_id: id, database: account.database } },
    ]);
    const ctx = createExecutionContext();
    const handedOver: Promise<unknown>[] = [];
    await consumeSendBatch(batch, env, {
      waitUntil: (promise) => {
        handedOver.push(promise);
        ctx.waitUntil(promise);
      },
    });
    expect(handedOver).toHaveLength(1);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["after"]);
    await waitOnExecutionContext(ctx);
    const event = await d1Of(account)
      .prepare("SELECT type, dispatched_at FROM events WHERE data LIKE ?1")
      .bind(`%${id}%`)
      .first<{ type: string; dispatched_at: string | null }>();
    expect(event).toMatchObject({ type: "relay.sent", dispatched_at: expect.any(String) });
  });

  it("drops unreadable queue bodies instead of retrying them forever", async () => {
    const batch = createMessageBatch("mailforge-send", [{ id: "junk", timestamp: new Date(), attempts: 1, body: { nope: true } }]);
    const ctx = createExecutionContext();
    await consumeSendBatch(batch, env, { openTransport: unreachable });
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["junk"]);
  });

  it("a message that lands in the dead-letter queue is marked failed and refunded, never left queued", async () => {
    const { account, key, from, domainId } = await setup();
    const id = await storedMessage(account.id, domainId, from, rcpt("dlq"));
    const batch = createMessageBatch("mailforge-send-dlq", [
      { id: "dead", timestamp: new Date(), attempts: 6, body: { message_id: id, database: account.database } },
    ]);
    await consumeSendDeadLetters(batch, env);
    const message = await messageOf(key, id);
    expect(message.status).toBe("failed");
    expect(message.recipients.map((recipient) => recipient.status)).toEqual(["failed"]);
    expect(message.events.map((event) => event.type)).toEqual(["relay.failed"]);
    expect(await ledgerOf(account, id)).toEqual([
      { kind: "charge", amount: -1 },
      { kind: "refund", amount: 1 },
    ]);
    expect(await sendBalance(key)).toBe(10);
  });

  it("records what the rest of a batch did when one message cannot be prepared, and retries only that one", async () => {
    const { account, key, from, domainId } = await setup();
    const [good, broken] = [rcpt("good"), rcpt("broken")];
    const goodId = await storedMessage(account.id, domainId, from, good);
    const brokenId = await storedMessage(account.id, domainId, from, broken);
    // Its content lives in R2 under a key that holds nothing.
    await d1Of(account).prepare("UPDATE messages SET content = NULL, content_key = 'messages/missing.json' WHERE id = ?").bind(brokenId).run();
    const batch = createMessageBatch("mailforge-send", [
      { id: "good", timestamp: new Date(), attempts: 1, body: { message_id: goodId, database: account.database } },
      { id: "broken", timestamp: new Date(), attempts: 1, body: { message_id: brokenId, database: account.database } },
    ]);
    const ctx = createExecutionContext();
    await consumeSendBatch(batch, env);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks).toEqual(["good"]);
    expect(result.retryMessages.map((message) => message.msgId)).toEqual(["broken"]);
    expect((await messageOf(key, goodId)).status).toBe("sent");
    expect(await sinkMessagesTo(good)).toHaveLength(1);
    expect((await messageOf(key, brokenId)).status).toBe("deferred");
    expect(await sinkMessagesTo(broken)).toEqual([]);
  });
});
