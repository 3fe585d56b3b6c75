import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { deliverMessages } from "../../src/domain/sending/deliver";
import { requeueLostMessages, sweepStaleClaims } from "../../src/domain/sending/recovery";
import worker from "../../src/index";
import { call, createAccount, createKey, d1Of, json } from "../support/helpers";
import { eventually, messageOf, sendBalance, sinkMessagesTo, storedMessage, verifiedDomain } from "../support/sending";

// Scheduled sends through the real Worker: D1, the send queue with its delays, the consumer and the dev SMTP sink.
// Time the test cannot wait for (hours) is moved by rewriting the stored times, as the cron tests do.

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;
const secondsFromNow = (seconds: number) => new Date(Date.now() + seconds * 1000).toISOString();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function setup(credits = 10) {
  const account = await createAccount({ send_credits: credits });
  const domain = await verifiedDomain(account.api_key);
  return { account, key: account.api_key, from: `Acme <hello@${domain.name}>`, domain };
}

type Accepted = { id: string; status: string; scheduled_at?: string; credits_charged: number };

async function schedule(key: string, from: string, to: string, scheduledAt: string) {
  const response = await call("/api/v1/send", { key, body: { from, to, subject: "Later", text: "Hello later", scheduled_at: scheduledAt } });
  expect(response.status).toBe(202);
  return json<Accepted>(response);
}

async function runCron(): Promise<void> {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ cron: "*/15 * * * *" }), env, ctx);
  await waitOnExecutionContext(ctx);
}

const delivered = async (to: string) => (await sinkMessagesTo(to)).length;

describe("scheduled sends", () => {
  it("a message scheduled 5 s ahead is charged at once, not delivered at once, and delivered at its time", async () => {
    const { key, from } = await setup();
    const to = rcpt("soon");
    const accepted = await schedule(key, from, to, secondsFromNow(5));
    expect(accepted).toMatchObject({ status: "scheduled", credits_charged: 1, scheduled_at: expect.any(String) });
    expect(await sendBalance(key)).toBe(9);

    await sleep(2_000);
    expect(await delivered(to)).toBe(0);
    expect(await messageOf(key, accepted.id)).toMatchObject({ status: "scheduled", recipients: [{ email: to, status: "queued" }] });

    const sentAt = await eventually(async () => ((await delivered(to)) > 0 ? Date.now() : undefined), 60_000);
    expect(sentAt).toBeGreaterThanOrEqual(Date.parse(accepted.scheduled_at!));
    expect((await messageOf(key, accepted.id)).status).toBe("sent");
    expect(await sendBalance(key)).toBe(9);
  }, 60_000);

  it("one scheduled an hour ahead and cancelled shows cancelled, has its credit back once and emits relay.cancelled", async () => {
    const { account, key, from } = await setup();
    const to = rcpt("cancel");
    const accepted = await schedule(key, from, to, secondsFromNow(3600));
    expect(await sendBalance(key)).toBe(9);

    const cancelled = await call(`/api/v1/messages/${accepted.id}/cancel`, { key, method: "POST" });
    expect(cancelled.status).toBe(200);
    expect(await json(cancelled)).toEqual({ id: accepted.id, status: "cancelled", credits_refunded: 1 });
    const message = await messageOf(key, accepted.id);
    expect(message).toMatchObject({ status: "cancelled", recipients: [{ email: to, status: "cancelled" }] });
    expect(message.events.map((event) => event.type)).toEqual(["relay.cancelled"]);
    expect(message.events[0]!.data).toMatchObject({ message_id: accepted.id, recipients: [to], credits_refunded: 1 });
    expect(await sendBalance(key)).toBe(10);
    const listed = await json<{ credits_charged: number; credits_refunded: number }>(await call(`/api/v1/messages/${accepted.id}`, { key }));
    expect(listed).toMatchObject({ credits_charged: 1, credits_refunded: 1 });

    // Cancelling again or moving it is a conflict, and gives nothing back twice.
    const again = await call(`/api/v1/messages/${accepted.id}/cancel`, { key, method: "POST" });
    expect(again.status).toBe(409);
    expect(await json(again)).toMatchObject({ code: "conflict", message: expect.stringContaining("already cancelled") });
    expect((await call(`/api/v1/messages/${accepted.id}`, { key, method: "PATCH", body: { scheduled_at: secondsFromNow(60) } })).status).toBe(409);
    expect(await sendBalance(key)).toBe(10);

    // Even once its time comes, a cancelled message is not sent by the consumer or the cron.
    await d1Of(account).prepare("UPDATE messages SET scheduled_at = ?2 WHERE id = ?1").bind(accepted.id, secondsFromNow(-600)).run();
    await deliverMessages(openCtx(env, undefined, account), [accepted.id]);
    await runCron();
    await sleep(1_000);
    expect(await delivered(to)).toBe(0);
    expect((await messageOf(key, accepted.id)).status).toBe("cancelled");
  }, 30_000);

  it("a test key can neither move nor cancel a live scheduled message (403), which stays scheduled and charged; its own test ones it can", async () => {
    const { key, from } = await setup();
    const testKey = (await createKey(key, { name: "ci", mode: "test" })).key;
    const live = await schedule(key, from, rcpt("live"), secondsFromNow(3600));
    const moved = await call(`/api/v1/messages/${live.id}`, { key: testKey, method: "PATCH", body: { scheduled_at: secondsFromNow(60) } });
    expect(moved.status).toBe(403);
    expect(await json(moved)).toMatchObject({ code: "live_key_required", message: expect.stringContaining("live key") });
    const cancelled = await call(`/api/v1/messages/${live.id}/cancel`, { key: testKey, method: "POST" });
    expect(cancelled.status).toBe(403);
    expect(await json(cancelled)).toMatchObject({ code: "live_key_required" });
    expect(await messageOf(key, live.id)).toMatchObject({ status: "scheduled", scheduled_at: live.scheduled_at, events: [] });
    expect(await sendBalance(key)).toBe(9);

    const own = await schedule(testKey, from, rcpt("test"), secondsFromNow(3600));
    expect((await call(`/api/v1/messages/${own.id}`, { key: testKey, method: "PATCH", body: { scheduled_at: secondsFromNow(7200) } })).status).toBe(
      200,
    );
    expect((await call(`/api/v1/messages/${own.id}/cancel`, { key: testKey, method: "POST" })).status).toBe(200);
    // The live key still moves and cancels live mail.
    expect((await call(`/api/v1/messages/${live.id}/cancel`, { key, method: "POST" })).status).toBe(200);
    expect(await sendBalance(key)).toBe(10);
  });

  it("PATCH moves a scheduled send: later, the copy for the old time does not send it; earlier, it goes at the new time", async () => {
    const { key, from } = await setup();
    const to = rcpt("moved");
    const accepted = await schedule(key, from, to, secondsFromNow(3));
    const later = secondsFromNow(3600);
    const moved = await call(`/api/v1/messages/${accepted.id}`, { key, method: "PATCH", body: { scheduled_at: later } });
    expect(moved.status).toBe(200);
    expect(await json(moved)).toEqual({ id: accepted.id, status: "scheduled", scheduled_at: later });

    // The queue message for the old time arrives and finds it not due.
    await sleep(6_000);
    expect(await delivered(to)).toBe(0);
    expect(await messageOf(key, accepted.id)).toMatchObject({ status: "scheduled" });

    const soon = secondsFromNow(2);
    expect((await call(`/api/v1/messages/${accepted.id}`, { key, method: "PATCH", body: { scheduled_at: soon } })).status).toBe(200);
    await eventually(async () => ((await delivered(to)) > 0 ? true : undefined), 60_000);
    expect(await delivered(to)).toBe(1);
    expect((await messageOf(key, accepted.id)).status).toBe("sent");

    // It has left: moving or cancelling it now is a 409, and nothing is refunded.
    const late = await call(`/api/v1/messages/${accepted.id}`, { key, method: "PATCH", body: { scheduled_at: secondsFromNow(600) } });
    expect(late.status).toBe(409);
    const cancel = await call(`/api/v1/messages/${accepted.id}/cancel`, { key, method: "POST" });
    expect(cancel.status).toBe(409);
    expect(await json(cancel)).toMatchObject({ code: "conflict", message: expect.stringContaining("has left") });
    expect(await sendBalance(key)).toBe(9);
  }, 60_000);

  it("replays an accepted scheduled send for its Idempotency-Key even once its time has passed", async () => {
    const { key, from } = await setup();
    const body = { from, to: rcpt("retry"), subject: "Later", text: "Hello later", scheduled_at: secondsFromNow(3600) };
    const first = await call("/api/v1/send", { key, body, headers: { "Idempotency-Key": "scheduled-retry" } });
    expect(first.status).toBe(202);
    // The client lost the answer and retries two hours later with the same key and body.
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 2 * 3600_000);
      const retry = await call("/api/v1/send", { key, body, headers: { "Idempotency-Key": "scheduled-retry" } });
      expect(retry.status).toBe(202);
      expect(retry.headers.get("Idempotent-Replayed")).toBe("true");
      expect((await json<Accepted>(retry)).id).toBe((await json<Accepted>(first)).id);
    } finally {
      vi.useRealTimers();
    }
    expect(await sendBalance(key)).toBe(9);
  });

  it("refuses a scheduled_at in the past, more than 30 days ahead or without an offset, with nothing charged", async () => {
    const { key, from } = await setup();
    const cases: [string, string][] = [
      [secondsFromNow(-60), "Must be in the future"],
      [secondsFromNow(31 * 86_400), "At most 30 days ahead"],
      ["2030-01-01T09:00:00", "Invalid ISO datetime"],
    ];
    for (const [scheduledAt, message] of cases) {
      const response = await call("/api/v1/send", { key, body: { from, to: rcpt("x"), subject: "S", text: "T", scheduled_at: scheduledAt } });
      expect(response.status).toBe(422);
      expect((await json<{ errors: Record<string, string[]> }>(response)).errors.scheduled_at![0]).toContain(message);
    }
    const accepted = await schedule(key, from, rcpt("x"), secondsFromNow(600));
    const patch = await call(`/api/v1/messages/${accepted.id}`, { key, method: "PATCH", body: { scheduled_at: secondsFromNow(-5) } });
    expect(patch.status).toBe(422);
    expect(await sendBalance(key)).toBe(9);
    expect((await call("/api/v1/messages/msg_doesnotexist00000000000/cancel", { key, method: "POST" })).status).toBe(404);
  });

  it("a send scheduled past the queue's 12-hour delay limit is left to the cron, which does not send it early and hands it over when due", async () => {
    const { account, key, from } = await setup();
    const to = rcpt("far");
    const accepted = await schedule(key, from, to, secondsFromNow(20 * 3600));
    // Neither the cron nor the recovery sweeps touch it while it is not due, even with its row long untouched.
    await d1Of(account)
      .prepare("UPDATE messages SET updated_at = ?2, created_at = ?2 WHERE id = ?1")
      .bind(accepted.id, secondsFromNow(-3 * 3600))
      .run();
    await runCron();
    expect(await requeueLostMessages(openCtx(env, undefined, account))).toBe(0);
    expect(await sweepStaleClaims(openCtx(env, undefined, account))).toBe(0);
    await sleep(1_000);
    expect(await delivered(to)).toBe(0);
    expect((await messageOf(key, accepted.id)).status).toBe("scheduled");

    // Time passes: it was scheduled 20 hours ahead and that time is now a few seconds away. The cron's run hands it
    // to the queue for that time.
    await d1Of(account)
      .prepare("UPDATE messages SET scheduled_at = ?2, updated_at = ?3 WHERE id = ?1")
      .bind(accepted.id, secondsFromNow(3), secondsFromNow(3 - 20 * 3600))
      .run();
    await runCron();
    expect(await delivered(to)).toBe(0);
    await eventually(async () => ((await delivered(to)) > 0 ? true : undefined), 60_000);
    expect((await messageOf(key, accepted.id)).status).toBe("sent");
  }, 60_000);

  it("a scheduled send whose queue message was lost is handed over by the cron once overdue", async () => {
    const { key, account, domain } = await setup();
    const to = rcpt("lost");
    // Stored as acceptance leaves it, but with no queue message at all.
    const id = await storedMessage(account.id, domain.id, `hello@${domain.name}`, to);
    await d1Of(account).prepare("UPDATE messages SET status = 'scheduled', scheduled_at = ?2 WHERE id = ?1").bind(id, secondsFromNow(-600)).run();
    await runCron();
    await eventually(async () => ((await delivered(to)) > 0 ? true : undefined), 30_000);
    expect((await messageOf(key, id)).status).toBe("sent");
  }, 60_000);

  it("cancel against the consumer's claim: exactly one wins, and a cancelled message is neither sent nor charged", async () => {
    const { key, account, domain } = await setup(50);
    for (let round = 0; round < 8; round++) {
      const to = rcpt(`race${round}`);
      const id = await storedMessage(account.id, domain.id, `hello@${domain.name}`, to);
      const before = await sendBalance(key);
      const [cancel] = await Promise.all([
        call(`/api/v1/messages/${id}/cancel`, { key, method: "POST" }),
        deliverMessages(openCtx(env, undefined, account), [id]),
      ]);
      const message = await messageOf(key, id);
      if (cancel.status === 200) {
        expect(message.status).toBe("cancelled");
        expect(await delivered(to)).toBe(0);
        expect(await sendBalance(key)).toBe(before + 1);
      } else {
        expect(cancel.status).toBe(409);
        expect(message.status).toBe("sent");
        expect(await delivered(to)).toBe(1);
        expect(await sendBalance(key)).toBe(before);
      }
    }
  });
});
