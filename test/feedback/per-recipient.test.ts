// A report mail changes only the recipient its return path belongs to, and never refunds (issue 26): each recipient's
// copy leaves in its own SMTP transaction with its own signed VERP address, so a DSN or ARF report that one recipient
// forges can name the others but cannot touch them.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { config } from "../../src/config";
import { hmacSha256Hex } from "../../src/lib/crypto";
import { call, json } from "../support/helpers";
import { messageOf, sendBalance, sinkRaw } from "../support/sending";
import { deliverToEmailHandler, deliveryStatusReport, rcpt, report, sender, sentMessage, sentToMany } from "../support/feedback";

async function suppression(key: string, email: string) {
  const response = await call(`/api/v1/suppressions?email=${encodeURIComponent(email)}`, { key });
  return (await json<{ data: { email: string; reason: string }[] }>(response)).data[0];
}

async function contactStatus(key: string, id: string) {
  return (await json<{ status: string }>(await call(`/api/v1/contacts/${id}`, { key }))).status;
}

async function todaysTotals(key: string) {
  const today = new Date().toISOString().slice(0, 10);
  const overview = await json<{ totals: { soft_bounces: number; hard_bounces: number; complaints: number } }>(
    await call(`/api/v1/reports/overview?from=${today}&to=${today}`, { key }),
  );
  return overview.totals;
}

const statusOf = (message: Awaited<ReturnType<typeof messageOf>>, email: string) => message.recipients.find((r) => r.email === email)?.status;
const reportId = () => `<${crypto.randomUUID()}@mx1.example.net>`;

/** A 3-recipient message sent through the real pipeline; the recipients have contacts. */
async function threeRecipientSend() {
  const { key, from } = await sender();
  const [a, b, c] = [rcpt("ann"), rcpt("bob"), rcpt("cy")];
  const contacts = new Map<string, string>();
  for (const email of [a!, b!, c!]) contacts.set(email, (await json<{ id: string }>(await call("/api/v1/contacts", { key, body: { email } }))).id);
  const sent = await sentToMany(key, from, [a!, b!, c!]);
  return { key, a: a!, b: b!, c: c!, contacts, ...sent, returnPathOf: (email: string) => sent.copies.get(email)!.mail_from };
}

describe("per-recipient return paths", () => {
  it("sends each recipient's copy in its own SMTP transaction on one connection: same bytes, its own signed return path", async () => {
    const { a, b, c, copies } = await threeRecipientSend();
    const all = [a, b, c].map((email) => copies.get(email)!);
    for (const [i, email] of [a, b, c].entries()) expect(all[i]!.rcpt_to).toEqual([email]);
    const returnPaths = all.map((copy) => copy.mail_from);
    for (const address of returnPaths) expect(address).toMatch(/^bounces\+\d+\.msg_[A-Za-z0-9]+-[0-9a-f]{16}@bounces\.mailforge\.test$/);
    expect(new Set(returnPaths).size).toBe(3);
    expect(new Set(all.map((copy) => copy.session_id)).size).toBe(1);
    expect(new Set(all.map((copy) => copy.message_id)).size).toBe(1);
    const raws = await Promise.all(all.map((copy) => sinkRaw(copy.id)));
    expect(raws[1]).toBe(raws[0]);
    expect(raws[2]).toBe(raws[0]);
  });

  for (const status of ["5.1.1", "5.7.1"]) {
    it(`a forged DSN (${status}) to one recipient's return path naming all three changes nothing about the other two, and the balance does not move`, async () => {
      const { key, id, a, b, c, contacts, copies, returnPathOf } = await threeRecipientSend();
      expect(await sendBalance(key)).toBe(97);

      await deliverToEmailHandler(
        returnPathOf(a),
        deliveryStatusReport({
          returnPath: returnPathOf(a),
          messageId: copies.get(a)!.message_id!,
          reportId: reportId(),
          blocks: [a, b, c].map((recipient) => ({ recipient, action: "failed", status })),
        }),
      );

      const message = await messageOf(key, id);
      expect(statusOf(message, a)).toBe("bounced");
      expect(statusOf(message, b)).toBe("sent");
      expect(statusOf(message, c)).toBe("sent");
      expect(message.events.filter((event) => event.type === "relay.bounced").map((event) => event.data.recipient)).toEqual([a]);
      for (const other of [b, c]) {
        expect(await suppression(key, other)).toBeUndefined();
        expect(await contactStatus(key, contacts.get(other)!)).toBe("subscribed");
      }
      expect(await sendBalance(key)).toBe(97);
      expect((await todaysTotals(key)).hard_bounces).toBe(1);
    });
  }

  it("a DSN naming only its own recipient bounces and suppresses that recipient, with no refund", async () => {
    const { key, id, a, b, c, copies, returnPathOf } = await threeRecipientSend();
    await deliverToEmailHandler(
      returnPathOf(b),
      report("postfixHardBounce", { returnPath: returnPathOf(b), recipient: b, messageId: copies.get(b)!.message_id! }),
    );

    const message = await messageOf(key, id);
    expect([a, b, c].map((email) => statusOf(message, email))).toEqual(["sent", "bounced", "sent"]);
    expect(message.events.find((event) => event.type === "relay.bounced")?.data).toMatchObject({
      recipient: b,
      bounce_type: "hard",
      feedback_source: "dsn",
    });
    expect(await suppression(key, b)).toMatchObject({ reason: "bounce" });
    expect(await suppression(key, a)).toBeUndefined();
    expect(await sendBalance(key)).toBe(97);
  });

  it("an ARF report naming another recipient changes nothing; one that names nobody is about its return path's recipient", async () => {
    const { key, id, a, b, c, contacts, copies, returnPathOf } = await threeRecipientSend();
    const messageIdHeader = copies.get(a)!.message_id!;
    // a's return path, b as the complaining recipient.
    await deliverToEmailHandler(
      "fbl@bounces.mailforge.test",
      report("yahooArfComplaint", { returnPath: returnPathOf(a), recipient: b, messageId: messageIdHeader }),
    );
    let message = await messageOf(key, id);
    expect([a, b, c].map((email) => statusOf(message, email))).toEqual(["sent", "sent", "sent"]);
    expect(message.events.map((event) => event.type)).not.toContain("relay.complained");
    expect(await suppression(key, b)).toBeUndefined();
    expect(await contactStatus(key, contacts.get(b)!)).toBe("subscribed");

    // A feedback loop that redacts Original-Rcpt-To: the quoted To header (every visible recipient) is not evidence;
    // the token says whose copy was reported.
    const redacted = report("yahooArfComplaint", { returnPath: returnPathOf(c), recipient: b, messageId: messageIdHeader }).replace(
      /^Original-Rcpt-To: .*\r\n/m,
      "",
    );
    await deliverToEmailHandler("fbl@bounces.mailforge.test", redacted);
    message = await messageOf(key, id);
    expect([a, b, c].map((email) => statusOf(message, email))).toEqual(["sent", "sent", "complained"]);
    expect(await suppression(key, c)).toMatchObject({ reason: "complaint" });
    expect(await contactStatus(key, contacts.get(c)!)).toBe("complained");
    expect(await contactStatus(key, contacts.get(b)!)).toBe("subscribed");
    expect(await sendBalance(key)).toBe(97);
  });

  it("ten delayed DSNs with distinct ids count one soft bounce", async () => {
    const { key, from } = await sender();
    const to = rcpt("slow");
    const sent = await sentMessage(key, from, to);
    for (let i = 0; i < 10; i++) {
      await deliverToEmailHandler(
        sent.returnPath,
        deliveryStatusReport({
          returnPath: sent.returnPath,
          messageId: sent.messageIdHeader,
          reportId: reportId(),
          blocks: [{ recipient: to, action: "delayed", status: "4.2.2" }],
        }),
      );
    }
    expect(await todaysTotals(key)).toMatchObject({ soft_bounces: 1, hard_bounces: 0 });
    expect((await messageOf(key, sent.id)).recipients).toEqual([expect.objectContaining({ status: "sent" })]);
    expect(await sendBalance(key)).toBe(99);
  });

  it("a return path written before the upgrade (message id only) is believed for a single-recipient message, never for several", async () => {
    const legacy = async (messageId: string) => {
      const settings = config(env);
      const signature = (await hmacSha256Hex(`return-path:${settings.encryptionKey}`, messageId)).slice(0, 16);
      return `bounces+${messageId}-${signature}@${settings.bounceDomain}`;
    };
    const { key, id, a, b, c, copies } = await threeRecipientSend();
    const shared = await legacy(id);
    await deliverToEmailHandler(shared, report("postfixHardBounce", { returnPath: shared, recipient: a, messageId: copies.get(a)!.message_id! }));
    const message = await messageOf(key, id);
    expect([a, b, c].map((email) => statusOf(message, email))).toEqual(["sent", "sent", "sent"]);
    expect(await suppression(key, a)).toBeUndefined();

    const single = await sender();
    const to = rcpt("alone");
    const sent = await sentMessage(single.key, single.from, to);
    const own = await legacy(sent.id);
    await deliverToEmailHandler(own, report("postfixHardBounce", { returnPath: own, recipient: to, messageId: sent.messageIdHeader }));
    expect((await messageOf(single.key, sent.id)).recipients).toEqual([expect.objectContaining({ email: to, status: "bounced" })]);
    expect(await suppression(single.key, to)).toMatchObject({ reason: "bounce" });
    expect(await sendBalance(single.key)).toBe(99);
  });
});
