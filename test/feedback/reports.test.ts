import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { databaseTag } from "../../src/db/client";
import { createdIn, lastAccountDatabase, otherAccountDatabase } from "../support/databases";
import { call, d1Of, json } from "../support/helpers";
import { messageOf, sendBalance } from "../support/sending";
import { addReceiverRule, receiverPath, receiverUrl, waitForRequests } from "../support/webhooks";
import { deliverToEmailHandler, rcpt, report, sender, sentMessage } from "../support/feedback";

async function suppression(key: string, email: string) {
  const response = await call(`/api/v1/suppressions?email=${encodeURIComponent(email)}`, { key });
  return (await json<{ data: { email: string; reason: string; scope: string }[] }>(response)).data[0];
}

describe("DSNs and ARF reports through the email() handler", () => {
  for (const fixture of ["postfixHardBounce", "gmailHardBounce", "microsoftHardBounce"] as const) {
    it(`a ${fixture} DSN bounces the recipient, suppresses it without a refund, and emits relay.bounced`, async () => {
      const { key, from } = await sender();
      const hook = receiverPath();
      await addReceiverRule({ path: hook, status: 200 });
      expect((await call("/api/v1/webhooks", { key, body: { url: receiverUrl(hook), events: ["relay.bounced"] } })).status).toBe(201);
      const to = rcpt("gone");
      const sent = await sentMessage(key, from, to);
      expect(await sendBalance(key)).toBe(99);

      const rejected = await deliverToEmailHandler(
        sent.returnPath,
        report(fixture, { returnPath: sent.returnPath, recipient: to, messageId: sent.messageIdHeader }),
      );
      expect(rejected).toBeUndefined();

      const message = await messageOf(key, sent.id);
      expect(message.status).toBe("bounced");
      expect(message.recipients).toEqual([expect.objectContaining({ email: to, status: "bounced" })]);
      const bounced = message.events.find((event) => event.type === "relay.bounced");
      expect(bounced?.data).toMatchObject({
        recipient: to,
        bounce_type: "hard",
        feedback_source: "dsn",
        enhanced_code: expect.stringMatching(/^5\./),
      });
      expect(await suppression(key, to)).toMatchObject({ reason: "bounce" });
      // A mailed report is not proof our transport's hand-off failed: anyone who received the message can write one.
      expect(await sendBalance(key)).toBe(99);
      const [delivery] = await waitForRequests(hook, 1);
      expect(JSON.parse(delivery!.body)).toMatchObject({ type: "relay.bounced", data: { message_id: sent.id, recipient: to, bounce_type: "hard" } });

      // The same DSN again (a retried delivery of the report) changes nothing: one event.
      await deliverToEmailHandler(sent.returnPath, report(fixture, { returnPath: sent.returnPath, recipient: to, messageId: sent.messageIdHeader }));
      expect(await sendBalance(key)).toBe(99);
      expect((await messageOf(key, sent.id)).events.filter((event) => event.type === "relay.bounced")).toHaveLength(1);
    });
  }

  it("a late DSN for a campaign recipient whose outcome was lost bounces it without refunding a credit it was never charged", async () => {
    const { account, key, from } = await sender();
    const to = rcpt("lost");
    const sent = await sentMessage(key, from, to);
    // As a campaign message swept to `unknown` by the cron: campaign recipients are charged only when sent, and this
    // one's reserved credit went back with its campaign's settlement.
    const d1 = d1Of(account);
    await d1.batch([
      d1.prepare("UPDATE messages SET source = 'campaign', campaign_id = 'cmp_settled' WHERE id = ?").bind(sent.id),
      d1.prepare("UPDATE message_recipients SET status = 'unknown' WHERE message_id = ?").bind(sent.id),
    ]);
    const balance = await sendBalance(key);

    await deliverToEmailHandler(
      sent.returnPath,
      report("postfixHardBounce", { returnPath: sent.returnPath, recipient: to, messageId: sent.messageIdHeader }),
    );

    const message = await messageOf(key, sent.id);
    expect(message.recipients).toEqual([expect.objectContaining({ email: to, status: "bounced" })]);
    expect(message.events.map((event) => event.type)).toContain("bounced");
    expect(await suppression(key, to)).toMatchObject({ reason: "bounce" });
    expect(await sendBalance(key)).toBe(balance);
  });

  it("a delayed DSN (soft) is counted and the recipient kept: no suppression, no refund", async () => {
    const { key, from } = await sender();
    const to = rcpt("full");
    const sent = await sentMessage(key, from, to);
    await deliverToEmailHandler(
      sent.returnPath,
      report("postfixDelayed", { returnPath: sent.returnPath, recipient: to, messageId: sent.messageIdHeader }),
    );

    const message = await messageOf(key, sent.id);
    expect(message.recipients).toEqual([expect.objectContaining({ status: "sent" })]);
    expect(await suppression(key, to)).toBeUndefined();
    expect(await sendBalance(key)).toBe(99);
    const today = new Date().toISOString().slice(0, 10);
    const overview = await json<{ totals: { soft_bounces: number; hard_bounces: number } }>(
      await call(`/api/v1/reports/overview?from=${today}&to=${today}`, { key }),
    );
    expect(overview.totals).toMatchObject({ soft_bounces: 1, hard_bounces: 0 });
  });

  it("a complaint about broadcast mail keeps broadcast mail away and lets receipts through", async () => {
    const { key, from } = await sender();
    const to = rcpt("newsreader");
    const contact = await json<{ id: string }>(await call("/api/v1/contacts", { key, body: { email: to } }));
    const sent = await sentMessage(key, from, to, { stream: "broadcast" });
    await deliverToEmailHandler(
      "fbl@bounces.mailforge.test",
      report("yahooArfComplaint", { returnPath: sent.returnPath, recipient: to, messageId: sent.messageIdHeader }),
    );
    expect(await suppression(key, to)).toMatchObject({ reason: "complaint", scope: "broadcast" });
    expect((await json<{ status: string }>(await call(`/api/v1/contacts/${contact.id}`, { key }))).status).toBe("complained");
    const news = await json(await call("/api/v1/send", { key, body: { from, to, subject: "News", text: "x", stream: "broadcast" } }));
    expect(news).toMatchObject({ status: "suppressed", credits_charged: 0 });
    const receipt = await json(await call("/api/v1/send", { key, body: { from, to, subject: "Receipt", text: "x" } }));
    expect(receipt).toMatchObject({ status: "queued", credits_charged: 1 });
  });

  for (const fixture of ["yahooArfComplaint", "microsoftJmrpComplaint"] as const) {
    it(`a ${fixture} report marks the recipient complained, suppresses it and unsubscribes its contact`, async () => {
      const { key, from } = await sender();
      const to = rcpt("angry");
      const contact = await json<{ id: string }>(await call("/api/v1/contacts", { key, body: { email: to } }));
      const sent = await sentMessage(key, from, to);

      // Feedback loops write to a fixed address at the bounce domain; the quoted Return-Path names the message.
      await deliverToEmailHandler(
        "fbl@bounces.mailforge.test",
        report(fixture, { returnPath: sent.returnPath, recipient: to, messageId: sent.messageIdHeader }),
      );

      const message = await messageOf(key, sent.id);
      expect(message.recipients).toEqual([expect.objectContaining({ status: "complained" })]);
      expect(message.events.find((event) => event.type === "relay.complained")?.data).toMatchObject({ recipient: to, feedback_type: "abuse" });
      // A complaint about a receipt keeps every stream away (docs/streams.md).
      expect(await suppression(key, to)).toMatchObject({ reason: "complaint", scope: "all" });
      const stored = await json<{ status: string }>(await call(`/api/v1/contacts/${contact.id}`, { key }));
      expect(stored.status).toBe("complained");
      const today = new Date().toISOString().slice(0, 10);
      const overview = await json<{ totals: { complaints: number } }>(await call(`/api/v1/reports/overview?from=${today}&to=${today}`, { key }));
      expect(overview.totals.complaints).toBe(1);
    });
  }

  it("a DSN with a forged or altered token changes nothing", async () => {
    const { key, from } = await sender();
    const to = rcpt("victim");
    const sent = await sentMessage(key, from, to);
    const forged = sent.returnPath.replace(/-[0-9a-f]{16}@/, "-0123456789abcdef@");
    const unsigned = `bounces+${sent.id}@bounces.mailforge.test`;
    for (const address of [forged, unsigned]) {
      await deliverToEmailHandler(address, report("postfixHardBounce", { returnPath: address, recipient: to, messageId: sent.messageIdHeader }));
    }
    // Another message's valid token cannot bounce this recipient either: the report names a recipient it does not have.
    const other = await sentMessage(key, from, rcpt("other"));
    await deliverToEmailHandler(
      other.returnPath,
      report("postfixHardBounce", { returnPath: other.returnPath, recipient: to, messageId: sent.messageIdHeader }),
    );

    const message = await messageOf(key, sent.id);
    expect(message.status).toBe("sent");
    expect(message.recipients).toEqual([expect.objectContaining({ status: "sent" })]);
    expect(message.events.map((event) => event.type)).not.toContain("relay.bounced");
    expect(await suppression(key, to)).toBeUndefined();
    expect(await sendBalance(key)).toBe(98);
  });

  it("mail that is not a report, and oversized mail, are dropped or rejected without effect", async () => {
    const { key, from } = await sender();
    const to = rcpt("ooo");
    const sent = await sentMessage(key, from, to);
    const vacation = `From: ${to}\r\nTo: ${sent.returnPath}\r\nSubject: Out of office\r\nMessage-ID: <ooo@example.org>\r\n\r\nI am away.\r\n`;
    expect(await deliverToEmailHandler(sent.returnPath, vacation)).toBeUndefined();
    const huge = `Subject: big\r\n\r\n${"x".repeat(5 * 1024 * 1024 + 10)}`;
    expect(await deliverToEmailHandler(sent.returnPath, huge)).toMatch(/too large/);
    expect((await messageOf(key, sent.id)).recipients).toEqual([expect.objectContaining({ status: "sent" })]);
  });
});

describe("reports by mail for an account in another account database", () => {
  it("a DSN to the VERP address of a message in the last account database bounces its recipient, as do return paths made before account databases or before a move", async () => {
    const { account, key, from } = await createdIn(lastAccountDatabase(), async () => {
      const made = await sender();
      return { ...made, database: made.account.database };
    });
    const tag = databaseTag(account.database);
    const stale = databaseTag(otherAccountDatabase(account.database));
    expect(stale).not.toBe("");
    for (const made of ["tagged", "untagged", "stale"] as const) {
      const to = rcpt(made);
      const sent = await sentMessage(key, from, to);
      // The return path names the database; the signature is the one it had before (over the message and recipient).
      expect(sent.returnPath.startsWith(`bounces+${tag}.${sent.id}-`)).toBe(true);
      const returnPath =
        made === "tagged" ? sent.returnPath : sent.returnPath.replace(`bounces+${tag}.`, made === "untagged" ? "bounces+" : `bounces+${stale}.`);
      const rejected = await deliverToEmailHandler(
        returnPath,
        report("postfixHardBounce", { returnPath, recipient: to, messageId: sent.messageIdHeader }),
      );
      expect(rejected).toBeUndefined();

      const message = await messageOf(key, sent.id);
      expect(message.recipients, made).toEqual([expect.objectContaining({ email: to, status: "bounced" })]);
      expect(message.events.map((event) => event.type)).toContain("relay.bounced");
      expect(await suppression(key, to)).toMatchObject({ reason: "bounce" });
    }
    expect(await env.DB.prepare("SELECT count(*) AS n FROM suppressions WHERE account_id = ?").bind(account.id).first()).toEqual({ n: 0 });
  });
});
