import { databaseTag, openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { config } from "../../src/config";
import { returnPath } from "../../src/domain/feedback/return-path";
import { requeueLostMessages, sweepStaleClaims } from "../../src/domain/sending/recovery";
import { SmtpTransport } from "../../src/domain/transport/smtp";
import { consumeSendBatch } from "../../src/queues/send";
import { createAccount, d1Of, json, type CreatedAccount } from "../support/helpers";
import { eventually, messageOf, storedMessage, verifiedDomain } from "../support/sending";

// The provider misbehaving at every step of the SMTP dialogue, and D1 failing after a send. Rules go to a sink of
// their own (TEST_FAULT_SINK_*): a "*" rule there cannot disturb the other test files.

type Reply = { code: number; message: string } | { drop: true };
type Phase = "connect" | "ehlo" | "mail" | "rcpt" | "data_command" | "data";

const faultSink = env.TEST_FAULT_SINK_HTTP_URL;
// With the transport's own time limits, as a deployment has them. The sink runs in Vitest's process, which in
// `npm test` also serves the runtimes' module loads and the other loopback servers: on a busy machine its reply can
// take seconds, and the 2 s limits this transport had turned that wait into a deferral no test here asks for (a 550
// at RCPT came back "deferred"; a batch counted 30 acks for 31). Time-outs are tested in test/transport/smtp.test.ts.
const toFaultSink = () => new SmtpTransport({ host: "127.0.0.1", port: Number(env.TEST_FAULT_SINK_SMTP_PORT), secure: "off" });

async function rule(phase: Phase, responses: Reply[], match = "*") {
  const response = await fetch(`${faultSink}/api/rules`, {
    method: "POST",
    body: JSON.stringify({ match, phase, responses }),
    headers: { "Content-Type": "application/json" },
  });
  expect(response.status).toBe(201);
}

async function delivered(address: string): Promise<{ id: string; rcpt_to: string[] }[]> {
  const response = await fetch(`${faultSink}/api/messages?to=${encodeURIComponent(address)}`);
  return (await json<{ data: { id: string; rcpt_to: string[] }[] }>(response)).data;
}

async function ledgerOf(id: string) {
  const rows = await d1Of(account)
    .prepare("SELECT kind, amount FROM credit_ledger WHERE reference_id = ?1 OR reference_id LIKE ?1 || ':%' ORDER BY created_at, kind")
    .bind(id)
    .all();
  return rows.results;
}

async function suppressed(accountId: string, email: string) {
  return (await d1Of(account).prepare("SELECT 1 FROM suppressions WHERE account_id = ?1 AND email = ?2").bind(accountId, email).first()) !== null;
}

/** One delivery attempt of one message through the consumer; what it told the queue. */
async function attempt(id: string, transport = toFaultSink) {
  const batch = createMessageBatch("mailforge-send", [
    { id: `q-${crypto.randomUUID()}`, timestamp: new Date(), attempts: 1, body: { message_id: id, database: account.database } },
  ]);
  const ctx = createExecutionContext();
  await consumeSendBatch(batch, env, { openTransport: transport });
  const result = await getQueueResult(batch, ctx);
  return { acked: result.explicitAcks.length === 1, retried: result.retryMessages.length === 1 };
}

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

let account: CreatedAccount;
let from: string;
let domainId: string;

beforeAll(async () => {
  account = await createAccount({ send_credits: 1_000 });
  const domain = await verifiedDomain(account.api_key);
  from = `hello@${domain.name}`;
  domainId = domain.id;
});

beforeEach(async () => {
  await fetch(`${faultSink}/api/rules`, { method: "DELETE" });
});

const temporary: Reply[] = [{ code: 451, message: "4.3.0 Try again later" }];
const closing: Reply[] = [{ code: 421, message: "4.3.2 Service shutting down" }];
const drop: Reply[] = [{ drop: true }];

// Refusals of the session (greeting, EHLO) are about the server or our configuration, never the message: retried.
// Everything from MAIL on: 4xx and a lost connection retry; 5xx bounces and refunds.
const matrix: { phase: Phase; label: string; responses: Reply[]; outcome: "deferred" | "bounced" }[] = [
  { phase: "connect", label: "421 greeting", responses: closing, outcome: "deferred" },
  { phase: "connect", label: "554 greeting", responses: [{ code: 554, message: "5.3.2 No service" }], outcome: "deferred" },
  { phase: "connect", label: "dropped", responses: drop, outcome: "deferred" },
  // Both EHLO and the HELO fallback refused.
  { phase: "ehlo", label: "451", responses: [...temporary, ...temporary], outcome: "deferred" },
  {
    phase: "ehlo",
    label: "550",
    responses: [
      { code: 550, message: "5.7.1 Go away" },
      { code: 550, message: "5.7.1 Go away" },
    ],
    outcome: "deferred",
  },
  { phase: "ehlo", label: "dropped", responses: drop, outcome: "deferred" },
  { phase: "mail", label: "451", responses: temporary, outcome: "deferred" },
  { phase: "mail", label: "550 5.1.8", responses: [{ code: 550, message: "5.1.8 Sender address rejected" }], outcome: "bounced" },
  { phase: "mail", label: "dropped", responses: drop, outcome: "deferred" },
  { phase: "rcpt", label: "450", responses: [{ code: 450, message: "4.2.1 Mailbox busy" }], outcome: "deferred" },
  { phase: "rcpt", label: "550 5.1.1", responses: [{ code: 550, message: "5.1.1 User unknown" }], outcome: "bounced" },
  { phase: "rcpt", label: "dropped", responses: drop, outcome: "deferred" },
  { phase: "data_command", label: "451", responses: temporary, outcome: "deferred" },
  { phase: "data_command", label: "554", responses: [{ code: 554, message: "5.5.1 No valid recipients" }], outcome: "bounced" },
  { phase: "data_command", label: "dropped", responses: drop, outcome: "deferred" },
  { phase: "data", label: "451 greylisting", responses: [{ code: 451, message: "4.7.1 Greylisted" }], outcome: "deferred" },
  { phase: "data", label: "421", responses: closing, outcome: "deferred" },
  { phase: "data", label: "554 5.7.1 content filter", responses: [{ code: 554, message: "5.7.1 Message rejected as spam" }], outcome: "bounced" },
  { phase: "data", label: "552 too big", responses: [{ code: 552, message: "5.3.4 Message size exceeds limit" }], outcome: "bounced" },
  { phase: "data", label: "dropped before the reply", responses: drop, outcome: "deferred" },
];

describe("the provider refuses or fails at each step of the SMTP dialogue", () => {
  for (const { phase, label, responses, outcome } of matrix) {
    it(`${phase}: ${label} → ${outcome}`, async () => {
      const to = rcpt(phase);
      const id = await storedMessage(account.id, domainId, from, to);
      // MAIL FROM is the message's VERP return path (BOUNCE_DOMAIN is set in the tests).
      const mailFrom = await returnPath(config(env), { messageId: id, tag: databaseTag(account.database) }, to, from);
      await rule(phase, responses, phase === "connect" || phase === "ehlo" ? "*" : phase === "mail" ? mailFrom : to);

      const told = await attempt(id);
      const message = await messageOf(account.api_key, id);
      expect(message.status).toBe(outcome);
      // The server's own last reply, as the user reads it; a dropped connection, some reply (a string) that is never a
      // time-out of ours.
      const last = responses.at(-1)!;
      const smtpResponse =
        "code" in last ? expect.stringMatching(new RegExp(`^${last.code}\\b`)) : expect.stringMatching(/^(?![\s\S]*time(d)? ?out)[\s\S]+$/i);
      expect(message.recipients).toEqual([
        { email: to, status: outcome, smtp_response: smtpResponse, opens: 0, clicks: 0, opened_at: null, clicked_at: null },
      ]);
      expect(message.events.map((event) => event.type)).not.toContain("relay.sent");
      expect(await delivered(to)).toEqual([]);
      if (outcome === "deferred") {
        expect(told).toEqual({ acked: false, retried: true });
        expect(await ledgerOf(id)).toEqual([{ kind: "charge", amount: -1 }]);
      } else {
        expect(told).toEqual({ acked: true, retried: false });
        expect(await ledgerOf(id)).toEqual([
          { kind: "charge", amount: -1 },
          { kind: "refund", amount: 1 },
        ]);
        expect(message.events.map((event) => event.type)).toEqual(["relay.bounced"]);
        // Only a refusal of the recipient itself puts it on the suppression list.
        expect(await suppressed(account.id, to)).toBe(phase === "rcpt");
      }
    });
  }

  it("a 451 after DATA is retried and then delivered once, charged once", async () => {
    const to = rcpt("greylisted");
    await rule("data", [{ code: 451, message: "4.7.1 Greylisted" }], to);
    const id = await storedMessage(account.id, domainId, from, to);
    expect(await attempt(id)).toEqual({ acked: false, retried: true });
    expect(await attempt(id)).toEqual({ acked: true, retried: false });
    const message = await messageOf(account.api_key, id);
    expect(message).toMatchObject({ status: "sent", attempts: 2 });
    expect(message.events.map((event) => event.type)).toEqual(["relay.sent"]);
    expect(message.events[0]!.data).toMatchObject({ recipients: [to], from });
    expect(await delivered(to)).toHaveLength(1);
    expect(await ledgerOf(id)).toEqual([{ kind: "charge", amount: -1 }]);
  });

  it("a 554 at the final dot bounces the recipient of each copy it refuses; one RCPT refused keeps its own reply", async () => {
    const accepted = [rcpt("a"), rcpt("b")];
    const unknown = rcpt("unknown");
    await rule("rcpt", [{ code: 550, message: "5.1.1 User unknown" }], unknown);
    // Each recipient's copy is its own transaction (its own VERP return path): the content filter refuses each.
    for (const email of accepted) await rule("data", [{ code: 554, message: "5.7.1 Content rejected" }], email);
    const id = await storedMessage(account.id, domainId, from, [...accepted, unknown]);
    expect(await attempt(id)).toEqual({ acked: true, retried: false });
    const message = await messageOf(account.api_key, id);
    expect(message.status).toBe("bounced");
    const byEmail = Object.fromEntries(message.recipients.map((r) => [r.email, r]));
    for (const email of accepted) expect(byEmail[email]).toMatchObject({ status: "bounced", smtp_response: "554 5.7.1 Content rejected" });
    expect(byEmail[unknown]).toMatchObject({ status: "bounced", smtp_response: "550 5.1.1 User unknown" });
    expect(
      message.events
        .filter((event) => event.type === "relay.bounced")
        .map((event) => event.data.bounce_type)
        .sort(),
    ).toEqual(["blocked", "blocked", "hard"]);
    expect(await ledgerOf(id)).toEqual([
      { kind: "charge", amount: -3 },
      { kind: "refund", amount: 1 },
      { kind: "refund", amount: 1 },
      { kind: "refund", amount: 1 },
    ]);
    // A content rejection says nothing about the mailboxes; the unknown user is suppressed.
    expect(await suppressed(account.id, accepted[0]!)).toBe(false);
    expect(await suppressed(account.id, unknown)).toBe(true);
  });

  it("each recipient's copy is its own transaction: one refused at the final dot and one greylisted do not hold back the third", async () => {
    const [ok, greylisted, filtered] = [rcpt("ok"), rcpt("greylisted"), rcpt("filtered")];
    await rule("data", [{ code: 451, message: "4.7.1 Greylisted" }], greylisted);
    await rule("data", [{ code: 554, message: "5.7.1 Content rejected" }], filtered);
    const id = await storedMessage(account.id, domainId, from, [ok, greylisted, filtered]);
    expect(await attempt(id)).toEqual({ acked: false, retried: true });
    let message = await messageOf(account.api_key, id);
    expect(Object.fromEntries(message.recipients.map((r) => [r.email, r.status]))).toEqual({
      [ok]: "sent",
      [greylisted]: "deferred",
      [filtered]: "bounced",
    });
    expect(await delivered(ok)).toEqual([expect.objectContaining({ rcpt_to: [ok] })]);
    // A refusal our own SMTP session saw is refunded.
    expect(await ledgerOf(id)).toEqual([
      { kind: "charge", amount: -3 },
      { kind: "refund", amount: 1 },
    ]);

    expect(await attempt(id)).toEqual({ acked: true, retried: false });
    message = await messageOf(account.api_key, id);
    expect(message.status).toBe("sent");
    expect(await delivered(greylisted)).toEqual([expect.objectContaining({ rcpt_to: [greylisted] })]);
    expect(await delivered(ok)).toHaveLength(1);
  });

  it("a 451 after DATA defers the recipients RCPT accepted and bounces the one it refused", async () => {
    const ok = rcpt("ok");
    const unknown = rcpt("unknown");
    await rule("rcpt", [{ code: 550, message: "5.1.1 User unknown" }], unknown);
    await rule("data", [{ code: 451, message: "4.3.0 Queue full" }], ok);
    const id = await storedMessage(account.id, domainId, from, [ok, unknown]);
    expect(await attempt(id)).toEqual({ acked: false, retried: true });
    let message = await messageOf(account.api_key, id);
    expect(message.status).toBe("deferred");
    expect(Object.fromEntries(message.recipients.map((r) => [r.email, r.status]))).toEqual({ [ok]: "deferred", [unknown]: "bounced" });

    // The retry goes to the deferred recipient only.
    expect(await attempt(id)).toEqual({ acked: true, retried: false });
    message = await messageOf(account.api_key, id);
    expect(message.status).toBe("sent");
    expect(await delivered(ok)).toEqual([expect.objectContaining({ rcpt_to: [ok] })]);
    expect(await delivered(unknown)).toEqual([]);
  });
});

/**
 * Makes every write of the message's delivery outcome fail, as a locked or unreachable database does, until
 * `release()`. Claiming it (status `sending`) still works.
 */
async function blockOutcomeWrites(id: string) {
  const name = `block_${crypto.randomUUID().replace(/-/g, "")}`;
  await d1Of(account)
    .prepare(
      `CREATE TRIGGER ${name} BEFORE UPDATE OF status ON messages WHEN NEW.id = '${id}' AND NEW.status != 'sending' BEGIN SELECT RAISE(ABORT, 'database is locked'); END`,
    )
    .run();
  return { release: () => d1Of(account).prepare(`DROP TRIGGER IF EXISTS ${name}`).run() };
}

/** The messages' statuses, in the order of `ids` (read from D1: polling the API for 30 messages would hit its rate limit). */
async function statuses(ids: string[]): Promise<string[]> {
  const rows = await d1Of(account)
    .prepare("SELECT id, status FROM messages WHERE id IN (SELECT value FROM json_each(?1))")
    .bind(JSON.stringify(ids))
    .all<{ id: string; status: string }>();
  const byId = new Map(rows.results.map((row) => [row.id, row.status]));
  return ids.map((id) => byId.get(id) ?? "missing");
}

describe("exactly one copy under at-least-once queues", () => {
  it("D1 failing for 1.5 s after the send: the outcome is written on a later try and nothing is sent twice", async () => {
    const to = rcpt("locked");
    const id = await storedMessage(account.id, domainId, from, to);
    const block = await blockOutcomeWrites(id);
    const consumer = attempt(id);
    await eventually(async () => ((await delivered(to)).length > 0 ? true : undefined), 5_000);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await block.release();
    expect(await consumer).toEqual({ acked: true, retried: false });
    // The queue delivers the same message again: it is not sent again.
    expect(await attempt(id)).toEqual({ acked: true, retried: false });
    expect(await delivered(to)).toHaveLength(1);
    expect(await messageOf(account.api_key, id)).toMatchObject({ status: "sent", attempts: 1 });
  });

  it("D1 failing for good after the send: the message stays claimed, is never resent, and the cron marks it unknown", async () => {
    const to = rcpt("lost-outcome");
    const id = await storedMessage(account.id, domainId, from, to);
    const block = await blockOutcomeWrites(id);
    try {
      expect(await attempt(id)).toEqual({ acked: true, retried: false });
      expect(await attempt(id)).toEqual({ acked: true, retried: false });
    } finally {
      await block.release();
    }
    expect(await delivered(to)).toHaveLength(1);
    expect((await messageOf(account.api_key, id)).status).toBe("sending");

    // Not yet stale: the consumer could still be running.
    expect(await sweepStaleClaims(openCtx(env, undefined, account))).toBe(0);
    expect(await sweepStaleClaims(openCtx(env, undefined, account), new Date(Date.now() + 16 * 60_000))).toBe(1);
    const message = await messageOf(account.api_key, id);
    expect(message.status).toBe("unknown");
    expect(message.recipients).toEqual([
      { email: to, status: "unknown", smtp_response: expect.stringContaining("interrupted"), opens: 0, clicks: 0, opened_at: null, clicked_at: null },
    ]);
    // Unknown is final: a redelivery does not send it, and it stays charged (it may have been delivered).
    expect(await attempt(id)).toEqual({ acked: true, retried: false });
    expect(await delivered(to)).toHaveLength(1);
    expect(await ledgerOf(id)).toEqual([{ kind: "charge", amount: -1 }]);
  }, 30_000);

  it("a batch's outcomes are written while it is still sending: a message held at its final dot does not hold back the others'", async () => {
    const early = Array.from({ length: 30 }, (_, i) => rcpt(`early${i}`));
    const late = rcpt("late");
    const ids: string[] = [];
    for (const to of [...early, late]) ids.push(await storedMessage(account.id, domainId, from, to));
    await fetch(`${faultSink}/api/hold?to=${encodeURIComponent(late)}`, { method: "PUT" });
    const batch = createMessageBatch(
      "mailforge-send",
      ids.map((id, i) => ({ id: `w${i}`, timestamp: new Date(), attempts: 1, body: { message_id: id, database: account.database } })),
    );
    const ctx = createExecutionContext();
    let consumer: Promise<void> | undefined;
    try {
      consumer = consumeSendBatch(batch, env, { openTransport: toFaultSink });
      await eventually(async () => ((await json<{ waiting: number }>(await fetch(`${faultSink}/api/hold`))).waiting === 1 ? true : undefined));
      // The message sent behind the held one on its connection waits for it too; the rest are recorded already.
      const recorded = await eventually(async () => {
        const sent = (await statuses(ids.slice(0, 30))).filter((status) => status === "sent").length;
        return sent >= 25 ? sent : undefined;
      });
      expect(recorded).toBeGreaterThanOrEqual(25);
      expect(await statuses([ids[30]!])).toEqual(["sending"]);
    } finally {
      await fetch(`${faultSink}/api/hold`, { method: "DELETE" });
    }
    await consumer;
    expect((await getQueueResult(batch, ctx)).explicitAcks).toHaveLength(31);
    for (const to of [...early, late]) expect(await delivered(to)).toHaveLength(1);
    expect(await statuses(ids)).toEqual(ids.map(() => "sent"));
  });

  it("two copies of one queue message in concurrent batches deliver one message", async () => {
    const to = rcpt("twice");
    const id = await storedMessage(account.id, domainId, from, to);
    const results = await Promise.all([attempt(id), attempt(id), attempt(id)]);
    expect(results.every((result) => result.acked)).toBe(true);
    expect(await delivered(to)).toHaveLength(1);
    const message = await messageOf(account.api_key, id);
    expect(message).toMatchObject({ status: "sent", attempts: 1 });
    expect(message.events.map((event) => event.type)).toEqual(["relay.sent"]);
  });
});

describe("nothing stuck", () => {
  it("a queued message whose queue message was lost is enqueued again by the cron and delivered", async () => {
    const key = account.api_key;
    // As if the queue had refused it and the undo had failed too: queued, 20 minutes old, on no queue.
    const lost = await storedMessage(account.id, domainId, from, rcpt("lost"));
    const deferred = await storedMessage(account.id, domainId, from, rcpt("lost-retry"));
    await d1Of(account).batch([
      d1Of(account)
        .prepare("UPDATE messages SET updated_at = ?2 WHERE id = ?1")
        .bind(lost, new Date(Date.now() - 20 * 60_000).toISOString()),
      d1Of(account)
        .prepare("UPDATE messages SET status = 'deferred', attempts = 1, updated_at = ?2 WHERE id = ?1")
        .bind(deferred, new Date(Date.now() - 20 * 60_000).toISOString()),
    ]);
    expect(await requeueLostMessages(openCtx(env, undefined, account))).toBe(2);
    // The real queue consumer (delivering to the main dev sink) picks both up.
    for (const messageId of [lost, deferred]) {
      await eventually(async () => ((await messageOf(key, messageId)).status === "sent" ? true : undefined), 15_000);
    }
    // A message that is simply waiting is left alone.
    const fresh = await storedMessage(account.id, domainId, from, rcpt("fresh"));
    expect(await requeueLostMessages(openCtx(env, undefined, account))).toBe(0);
    expect((await messageOf(key, fresh)).status).toBe("queued");
  }, 40_000);

  it("when the queue refuses one slice of the lost messages, the sweep still enqueues the other slices, then fails", async () => {
    // 150 lost messages: two sendBatch slices, 100 and 50.
    const ids = Array.from({ length: 150 }, (_, i) => `msg_lost${String(i).padStart(3, "0")}${crypto.randomUUID().slice(0, 8)}`);
    const longAgo = new Date(Date.now() - 20 * 60_000).toISOString();
    await d1Of(account).batch([
      d1Of(account)
        .prepare(
          `INSERT INTO messages (id, account_id, source, status, from_address, domain_id, subject, tags, metadata, content, credits_charged, updated_at)
         SELECT value, ?1, 'api', 'queued', ?2, ?3, 'Lost', '[]', '{}', '{}', 1, ?4 FROM json_each(?5)`,
        )
        .bind(account.id, from, domainId, longAgo, JSON.stringify(ids)),
      d1Of(account)
        .prepare(
          "INSERT INTO message_recipients (message_id, email, account_id, status) SELECT value, 'lost@example.net', ?1, 'queued' FROM json_each(?2)",
        )
        .bind(account.id, JSON.stringify(ids)),
    ]);
    const offered: string[][] = [];
    const firstRefused = {
      sendBatch: async (batch: MessageSendRequest<{ message_id: string }>[]) => {
        offered.push(batch.map((message) => message.body.message_id));
        if (offered.length === 1) throw new Error("queue unavailable");
      },
    } as unknown as Queue;

    await expect(requeueLostMessages(openCtx({ ...env, SEND_QUEUE: firstRefused }, undefined, account))).rejects.toThrow("queue unavailable");
    expect(offered.flat()).toEqual(expect.arrayContaining(ids));
    expect(offered.every((slice) => slice.length <= 100)).toBe(true);
    // Left lost (and out of the sweeps of this file's other tests).
    await d1Of(account)
      .prepare("UPDATE messages SET status = 'cancelled' WHERE id IN (SELECT value FROM json_each(?1))")
      .bind(JSON.stringify(ids))
      .run();
  });
});
