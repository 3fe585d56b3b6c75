import { env } from "cloudflare:workers";
import { createMessageBatch } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { consumeSendBatch } from "../../src/queues/send";
import { ADMIN_TOKEN, call, d1Of, d1OfAccount, json } from "../support/helpers";
import { audienceOf, campaignAccount, campaignOf, runCron, sendCampaign } from "../support/campaigns";
import { accountIn, allAccountRows } from "../support/databases";
import { addReceiverRule, receiverPath, receiverUrl, waitForRequests } from "../support/webhooks";
import { eventually, messageOf, sinkMessagesTo, storedMessage, verifiedDomain } from "../support/sending";
import { deliverToEmailHandler, rcpt, report, sender, sentMessage } from "../support/feedback";

type Warmup = { status: string; schedule: number[]; today_cap: number | null; sent_today: number; day: number | null; paused_reason: string | null };
type DomainView = {
  warmup: Warmup;
  reputation: { status: string; reason: string | null; today: { sent: number; hard_bounces: number; bounce_rate: number } };
};

async function subscribe(key: string, events: string[]) {
  const path = receiverPath();
  await addReceiverRule({ path, status: 200 });
  const created = await call("/api/v1/webhooks", { key, body: { url: receiverUrl(path), events } });
  expect(created.status).toBe(201);
  return path;
}

/**
 * Makes D1 refuse to store events about the domain (a trigger aborts the insert, and with it the transaction it is
 * part of), as an outage between a state change and its event would; the returned function lifts it.
 */
async function refuseEventsAbout(domainId: string): Promise<() => Promise<void>> {
  const trigger = `refuse_events_${domainId}`;
  // The events are in the account's database (the domain's row in DB names the account).
  const domain = await env.DB.prepare("SELECT account_id FROM domains WHERE id = ?1").bind(domainId).first<{ account_id: string }>();
  const d1 = await d1OfAccount(domain!.account_id);
  await d1
    .prepare(`CREATE TRIGGER ${trigger} BEFORE INSERT ON events WHEN NEW.subject_id = '${domainId}' BEGIN SELECT RAISE(ABORT, 'events refused'); END`)
    .run();
  return async () => void (await d1.prepare(`DROP TRIGGER ${trigger}`).run());
}

const warmupEventsOf = (domainId: string) =>
  allAccountRows<{ data: string }>("SELECT data FROM events WHERE subject_id = ?1 AND type = 'warmup.status_changed'", domainId);

const tomorrow = () => new Date(Date.parse(new Date().toISOString().slice(0, 10)) + 86_400_000).toISOString();

describe("warm-up schedules", () => {
  it("cap 3 a day and 10 sends: 3 go out today, 7 wait for tomorrow; nothing is refused; status events are emitted", async () => {
    const { domain, key, from } = await sender();
    const hook = await subscribe(key, ["warmup.status_changed"]);
    const started = await call(`/api/v1/domains/${domain.id}/warmup`, { key, method: "PUT", body: { enabled: true, schedule: [3, 10] } });
    expect(started.status).toBe(200);
    expect(await json<Warmup>(started)).toMatchObject({ status: "active", schedule: [3, 10], day: 0, today_cap: 3, sent_today: 0 });

    const ids: string[] = [];
    const recipients = Array.from({ length: 10 }, (_, i) => rcpt(`w${i}`));
    for (const to of recipients) {
      const response = await call("/api/v1/send", { key, body: { from, to: [to], subject: "Warm", text: "Hello" } });
      expect(response.status).toBe(202);
      ids.push((await json<{ id: string }>(response)).id);
    }
    const settled = await eventually(async () => {
      const messages = await Promise.all(ids.map((id) => messageOf(key, id)));
      return messages.every((message) => message.status === "sent" || message.status === "deferred") ? messages : undefined;
    });
    const sent = settled.filter((message) => message.status === "sent");
    const deferred = settled.filter((message) => message.status === "deferred");
    expect(sent).toHaveLength(3);
    expect(deferred).toHaveLength(7);
    for (const message of deferred) {
      expect(message).toMatchObject({ next_attempt_at: tomorrow(), attempts: 0, smtp_response: expect.stringMatching(/warm-up cap/) });
      expect(message.recipients).toEqual([expect.objectContaining({ status: "queued" })]);
    }
    const delivered = (await Promise.all(recipients.map(sinkMessagesTo))).filter((found) => found.length > 0);
    expect(delivered).toHaveLength(3);
    expect(await json<Warmup>(await call(`/api/v1/domains/${domain.id}/warmup`, { key }))).toMatchObject({ today_cap: 3, sent_today: 3 });

    // Pausing lets nothing more through by itself, and says so; the events carry each transition.
    const paused = await json<Warmup>(await call(`/api/v1/domains/${domain.id}/warmup`, { key, method: "PUT", body: { enabled: false } }));
    expect(paused).toMatchObject({ status: "paused", today_cap: null, paused_reason: "paused by the account" });
    const events = (await waitForRequests(hook, 2)).map((request) => JSON.parse(request.body) as { type: string; data: Record<string, unknown> });
    expect(events.map((event) => [event.type, event.data.previous_status, event.data.status])).toEqual([
      ["warmup.status_changed", "off", "active"],
      ["warmup.status_changed", "active", "paused"],
    ]);
    expect(events[0]!.data).toMatchObject({ domain_id: domain.id, domain: domain.name });
  });

  it("a schedule that has run out completes the warm-up on the next send", async () => {
    const { domain, key, from } = await sender();
    const hook = await subscribe(key, ["warmup.status_changed"]);
    const threeDaysAgo = new Date(Date.now() - 3 * 86_400_000).toISOString().slice(0, 10);
    const set = await json<Warmup>(
      await call(`/api/v1/domains/${domain.id}/warmup`, {
        key,
        method: "PUT",
        body: { enabled: true, schedule: [1, 2, 3, 4], started_at: threeDaysAgo },
      }),
    );
    expect(set).toMatchObject({ status: "active", day: 3, today_cap: 4 });
    await env.DB.prepare("UPDATE domains SET warmup_started_at = ?1 WHERE id = ?2")
      .bind(new Date(Date.now() - 4 * 86_400_000).toISOString().slice(0, 10), domain.id)
      .run();
    const to = rcpt("done");
    await call("/api/v1/send", { key, body: { from, to: [to], subject: "Warm", text: "Hello" } });
    await eventually(async () => ((await sinkMessagesTo(to)).length > 0 ? true : undefined));
    const events = (await waitForRequests(hook, 2)).map((request) => JSON.parse(request.body) as { data: { status: string } });
    expect(events.map((event) => event.data.status)).toEqual(["active", "completed"]);
    expect((await json<DomainView>(await call(`/api/v1/domains/${domain.id}`, { key }))).warmup).toMatchObject({
      status: "completed",
      today_cap: null,
    });
  });

  it("in one batch, messages back before their time keep each its own next attempt; those over the cap wait for the next UTC midnight", async () => {
    const { account, domain, key } = await sender();
    const from = `hello@${domain.name}`;
    await call(`/api/v1/domains/${domain.id}/warmup`, { key, method: "PUT", body: { enabled: true, schedule: [1, 1] } });
    const soon = new Date(Date.now() + 2 * 3_600_000).toISOString();
    const later = new Date(Date.now() + 5 * 3_600_000).toISOString();
    const [early1, early2, fresh1, fresh2] = [
      await storedMessage(account.id, domain.id, from, rcpt("e1")),
      await storedMessage(account.id, domain.id, from, rcpt("e2")),
      await storedMessage(account.id, domain.id, from, rcpt("f1")),
      await storedMessage(account.id, domain.id, from, rcpt("f2")),
    ];
    // Held back by an earlier batch: deferred until their due times, and back (a queue delay stops at 12 hours).
    for (const [id, due] of [
      [early1, soon],
      [early2, later],
    ] as const) {
      await d1Of(account).prepare("UPDATE messages SET status = 'deferred', next_attempt_at = ?1 WHERE id = ?2").bind(due, id).run();
    }

    const ids = [early1, early2, fresh1, fresh2];
    await consumeSendBatch(
      createMessageBatch(
        "mailforge-send",
        ids.map((id, i) => ({ id: `w${i}`, timestamp: new Date(), attempts: 1, body: { message_id: id, database: account.database } })),
      ),
      env,
    );
    const [e1, e2, f1, f2] = await Promise.all(ids.map((id) => messageOf(key, id)));
    expect(e1).toMatchObject({ status: "deferred", next_attempt_at: soon, smtp_response: expect.stringMatching(/warm-up cap/) });
    expect(e2).toMatchObject({ status: "deferred", next_attempt_at: later });
    // The cap of 1 lets one fresh message through; the other waits for tomorrow.
    const [sent, deferred] = [f1!, f2!].sort((a, b) => (a.status === "sent" ? -1 : b.status === "sent" ? 1 : 0));
    expect(sent).toMatchObject({ status: "sent" });
    expect(deferred).toMatchObject({ status: "deferred", next_attempt_at: tomorrow() });
    expect(await json<Warmup>(await call(`/api/v1/domains/${domain.id}/warmup`, { key }))).toMatchObject({ today_cap: 1, sent_today: 1 });
  });

  it("a status change is written with its event or not at all: when the event cannot be stored, the warm-up stays as it was", async () => {
    const { domain, key } = await sender();
    const hook = await subscribe(key, ["warmup.status_changed"]);
    const allow = await refuseEventsAbout(domain.id);
    const refused = await call(`/api/v1/domains/${domain.id}/warmup`, { key, method: "PUT", body: { enabled: true, schedule: [3, 10] } });
    expect(refused.status).toBe(500);
    expect(await json<Warmup>(await call(`/api/v1/domains/${domain.id}/warmup`, { key }))).toMatchObject({ status: "off", today_cap: null });
    expect(await warmupEventsOf(domain.id)).toEqual([]);

    await allow();
    const started = await call(`/api/v1/domains/${domain.id}/warmup`, { key, method: "PUT", body: { enabled: true, schedule: [3, 10] } });
    expect(await json<Warmup>(started)).toMatchObject({ status: "active", today_cap: 3 });
    const [event] = (await waitForRequests(hook, 1)).map((request) => JSON.parse(request.body) as { data: Record<string, unknown> });
    expect(event?.data).toMatchObject({ domain_id: domain.id, previous_status: "off", status: "active" });
  });

  it("refuses a bad schedule with 422 and another account's domain with 404", async () => {
    const { domain, key } = await sender();
    for (const body of [
      { enabled: true, schedule: [] },
      { enabled: true, schedule: [0] },
      { enabled: true, preset: "warp" },
      { enabled: "yes" },
      { enabled: true, schedule: [5], preset: "standard" },
    ]) {
      const response = await call(`/api/v1/domains/${domain.id}/warmup`, { key, method: "PUT", body });
      expect(response.status).toBe(422);
    }
    const other = await sender();
    expect((await call(`/api/v1/domains/${domain.id}/warmup`, { key: other.key })).status).toBe(404);
    const preset = await json<Warmup>(
      await call(`/api/v1/domains/${domain.id}/warmup`, { key, method: "PUT", body: { enabled: true, preset: "standard" } }),
    );
    expect(preset.schedule[0]).toBe(50);
  });
});

describe("reputation guard", () => {
  it("the cron reads today's rates in each account database and holds the domain in DB, pausing its warm-up once", async () => {
    const account = await accountIn("ACCOUNT_DB_1", { send_credits: 100 });
    const { api_key: key } = account;
    const domain = await verifiedDomain(key);
    const hook = await subscribe(key, ["warmup.status_changed"]);
    await call(`/api/v1/domains/${domain.id}/warmup`, { key, method: "PUT", body: { enabled: true, schedule: [1000] } });
    // Today's rollup as the outcomes write it: 10 sent, 2 hard bounces (20%).
    await d1Of(account)
      .prepare(
        "INSERT INTO daily_stats (account_id, day, domain, provider, campaign_id, sent, hard_bounces) VALUES (?1, strftime('%Y-%m-%d', 'now'), ?2, 'other', '', 10, 2)",
      )
      .bind(account.id, domain.name)
      .run();

    await runCron();
    await runCron();
    const held = await json<DomainView>(await call(`/api/v1/domains/${domain.id}`, { key }));
    expect(held.reputation).toMatchObject({
      status: "held",
      reason: expect.stringMatching(/bounce rate 20\.0% is over 5\.0%/),
      today: { sent: 10, hard_bounces: 2 },
    });
    expect(held.warmup).toMatchObject({ status: "paused", paused_reason: expect.stringMatching(/bounce rate/) });
    // Two deliveries, in either order (each its own attempt); no second pause from the second run.
    const events = (await waitForRequests(hook, 2)).map((request) => JSON.parse(request.body) as { data: Record<string, unknown> });
    expect(events.map((event) => `${event.data.previous_status}→${event.data.status}`).sort()).toEqual(["active→paused", "off→active"]);
    expect(await warmupEventsOf(domain.id)).toHaveLength(2);
  });

  it("a day of bounces over 5% holds the domain: campaign sends are refused with 403 until an operator clears it, and its warm-up pauses", async () => {
    const { key, domain, sender: senderId } = await campaignAccount();
    await call(`/api/v1/domains/${domain.id}/warmup`, { key, method: "PUT", body: { enabled: true, schedule: [1000] } });
    const from = `hello@${domain.name}`;
    // REPUTATION_MIN_SENT is 5 in the tests: 5 sent, 1 bounced (20%).
    const recipients = Array.from({ length: 5 }, (_, i) => rcpt(`r${i}`));
    const sent = [];
    for (const to of recipients) sent.push(await sentMessage(key, from, to));
    const [first] = sent as [(typeof sent)[number]];
    const to = recipients[0]!;
    await deliverToEmailHandler(
      first.returnPath,
      report("postfixHardBounce", { returnPath: first.returnPath, recipient: to, messageId: first.messageIdHeader }),
    );

    const held = await json<DomainView>(await call(`/api/v1/domains/${domain.id}`, { key }));
    expect(held.reputation).toMatchObject({ status: "held", reason: expect.stringMatching(/bounce rate 20\.0% is over 5\.0%/) });
    expect(held.reputation.today).toMatchObject({ sent: 5, hard_bounces: 1, bounce_rate: 0.2 });
    expect(held.warmup).toMatchObject({ status: "paused", paused_reason: expect.stringMatching(/bounce rate/) });

    const { list } = await audienceOf(key, 1);
    const draft = await json<{ id: string }>(
      await call("/api/v1/campaigns", { key, body: { name: "news", sender_id: senderId, subject: "Hi", text: "Hello", lists: [list] } }),
    );
    const refused = await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: {} });
    expect(refused.status).toBe(403);
    expect(await json(refused)).toMatchObject({ code: "domain_reputation_hold", message: expect.stringMatching(/on hold/) });
    expect((await campaignOf(key, draft.id)).status).toBe("draft");

    // Only the operator can clear it (the account's own key cannot reach /admin).
    expect((await call(`/admin/v1/domains/${domain.id}/reputation/clear`, { key, body: {} })).status).toBe(401);
    const cleared = await call(`/admin/v1/domains/${domain.id}/reputation/clear`, { key: ADMIN_TOKEN, body: {} });
    expect(cleared.status).toBe(200);
    expect((await call(`/admin/v1/domains/${domain.id}/reputation/clear`, { key: ADMIN_TOKEN, body: {} })).status).toBe(404);
    expect((await json<DomainView>(await call(`/api/v1/domains/${domain.id}`, { key }))).reputation.status).toBe("ok");
    await sendCampaign(key, senderId, list);
  });

  it("a pause by the reputation guard is written with its event or not at all; the report sent again applies both", async () => {
    const { key, domain, from } = await sender();
    const hook = await subscribe(key, ["warmup.status_changed"]);
    await call(`/api/v1/domains/${domain.id}/warmup`, { key, method: "PUT", body: { enabled: true, schedule: [1000] } });
    const recipients = Array.from({ length: 5 }, (_, i) => rcpt(`p${i}`));
    const sent = [];
    for (const to of recipients) sent.push(await sentMessage(key, from, to));
    const [first] = sent as [(typeof sent)[number]];
    const dsn = report("postfixHardBounce", { returnPath: first.returnPath, recipient: recipients[0]!, messageId: first.messageIdHeader });

    const allow = await refuseEventsAbout(domain.id);
    await expect(deliverToEmailHandler(first.returnPath, dsn)).rejects.toThrow(/events refused/);
    const unchanged = await json<DomainView>(await call(`/api/v1/domains/${domain.id}`, { key }));
    expect(unchanged.reputation.status).toBe("ok");
    expect(unchanged.warmup).toMatchObject({ status: "active", paused_reason: null });
    expect((await warmupEventsOf(domain.id)).map((row) => JSON.parse(row.data).status)).toEqual(["active"]);

    await allow();
    await deliverToEmailHandler(first.returnPath, dsn);
    const held = await json<DomainView>(await call(`/api/v1/domains/${domain.id}`, { key }));
    expect(held.reputation.status).toBe("held");
    expect(held.warmup).toMatchObject({ status: "paused", paused_reason: expect.stringMatching(/bounce rate/) });
    const events = (await waitForRequests(hook, 2)).map((request) => JSON.parse(request.body) as { data: Record<string, unknown> });
    expect(events.map((event) => [event.data.previous_status, event.data.status])).toEqual([
      ["off", "active"],
      ["active", "paused"],
    ]);
  });

  it("below REPUTATION_MIN_SENT recipients a bounce does not hold the domain", async () => {
    const { key, domain, from } = await sender();
    const to = rcpt("one");
    const message = await sentMessage(key, from, to);
    await deliverToEmailHandler(
      message.returnPath,
      report("postfixHardBounce", { returnPath: message.returnPath, recipient: to, messageId: message.messageIdHeader }),
    );
    expect((await json<DomainView>(await call(`/api/v1/domains/${domain.id}`, { key }))).reputation).toMatchObject({
      status: "ok",
      today: { bounce_rate: 1 },
    });
  });
});
