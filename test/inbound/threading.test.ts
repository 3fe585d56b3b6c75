import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { countingD1 } from "../support/d1-counting";
import { call, createKey, d1Of, json } from "../support/helpers";
import { audienceOf, campaignAccount, campaignMessages, sendCampaign, waitForStatus } from "../support/campaigns";
import { sender, sentMessage } from "../support/feedback";
import { messageOf, sinkMessagesTo } from "../support/sending";
import { addReceiverRule, createEndpoint, receiverPath, receiverUrl, waitForRequests } from "../support/webhooks";
import { deliver, inboundList, inboundMail, receivingDomain } from "../support/inbound";

const today = () => new Date().toISOString().slice(0, 10);

async function overviewReplies(key: string): Promise<number> {
  const overview = await json<{ totals: { replies: number } }>(await call(`/api/v1/reports/overview?from=${today()}&to=${today()}`, { key }));
  return overview.totals.replies;
}

describe("replies threaded to what was sent", () => {
  it("a reply naming a sent message's Message-ID in In-Reply-To links to it, which gets a replied event", async () => {
    const { key, from, domain } = await sender();
    // The sending domain receives too: replies come back to the address the mail came from.
    const patched = await call(`/api/v1/domains/${domain.id}`, { key, method: "PATCH", body: { receiving: true } });
    expect(patched.status).toBe(200);
    const hook = receiverPath();
    await addReceiverRule({ path: hook, status: 200 });
    await createEndpoint(key, { url: receiverUrl(hook), events: ["replied"] });
    // One that also receives email.received (set up with an inbound key) may read the reply's words in `replied` too.
    const fullHook = receiverPath();
    await addReceiverRule({ path: fullHook, status: 200 });
    await createEndpoint(key, { url: receiverUrl(fullHook), events: ["replied", "email.received"] });
    const customer = `ann-${crypto.randomUUID().slice(0, 8)}@example.org`;
    const sent = await sentMessage(key, from, customer);
    expect(sent.messageIdHeader).toBe(`<${sent.id}@${domain.name}>`);

    const to = `hello@${domain.name}`;
    expect(await deliver(to, inboundMail("replyWithAttachments", { to, inReplyTo: sent.messageIdHeader }), { from: customer })).toEqual({
      rejected: undefined,
    });

    const [reply] = await inboundList(key);
    expect(reply).toMatchObject({ in_reply_to_message_id: sent.id });
    const detail = await json<{ in_reply_to_message_id: string; campaign_id: string | null }>(await call(`/api/v1/inbound/${reply!.id}`, { key }));
    expect(detail).toMatchObject({ in_reply_to_message_id: sent.id, campaign_id: null });

    const message = await messageOf(key, sent.id);
    const replied = message.events.filter((event) => event.type === "replied");
    expect(replied).toEqual([
      expect.objectContaining({
        data: { message_id: sent.id, campaign_id: null, inbound_id: reply!.id, from: "Jane Doe <jane@example.org>", subject: "Re: Your receipt" },
      }),
    ]);
    // An endpoint subscribed to `replied` alone learns that a reply came and where to read it, not what it says.
    const [delivery] = await waitForRequests(hook, 1);
    expect(JSON.parse(delivery!.body)).toMatchObject({ type: "replied", data: { message_id: sent.id, campaign_id: null, inbound_id: reply!.id } });
    expect(JSON.parse(delivery!.body).data).toEqual({ message_id: sent.id, campaign_id: null, inbound_id: reply!.id });
    const fullDeliveries = await waitForRequests(fullHook, 2);
    const fullReplied = fullDeliveries.map((request) => JSON.parse(request.body)).find((body) => body.type === "replied");
    expect(fullReplied.data).toMatchObject({ from: "Jane Doe <jane@example.org>", subject: "Re: Your receipt" });
    expect(await overviewReplies(key)).toBe(1);
  });

  it("a threaded reply is received in 3 D1 round trips (DB: the domain with its account's database; the account's: hourly count, duplicate check and thread, then writes) and its event dispatched in 3", async () => {
    const { account, key, from, domain } = await sender();
    expect((await call(`/api/v1/domains/${domain.id}`, { key, method: "PATCH", body: { receiving: true } })).status).toBe(200);
    const sent = await sentMessage(key, from, "jane@example.org");
    const shared = countingD1(env.DB);
    const own = countingD1(d1Of(account));
    const to = `hello@${domain.name}`;
    const mail = inboundMail("replyWithAttachments", { to, inReplyTo: sent.messageIdHeader });
    const counting = { ...env, DB: shared.counted, [account.database]: own.counted };
    expect(await deliver(to, mail, { from: "jane@example.org", env: counting })).toEqual({ rejected: undefined });
    expect((await inboundList(key))[0]).toMatchObject({ in_reply_to_message_id: sent.id });
    expect(shared.usage.roundTrips).toBe(1);
    expect(own.usage.roundTrips).toBe(5);
  });

  it("a reply that names our message only in References is threaded too; one naming another account's message is not", async () => {
    const { key, from, domain } = await sender();
    const customer = `bo-${crypto.randomUUID().slice(0, 8)}@example.org`;
    const sent = await sentMessage(key, from, customer);
    const other = await sender();
    const receiving = await receivingDomain(other.key);
    const to = `support@${receiving.name}`;
    // Another account's receiving domain gets a reply to this account's message: not linked across accounts.
    await deliver(to, inboundMail("replyWithAttachments", { to, inReplyTo: sent.messageIdHeader }));
    expect((await inboundList(other.key))[0]).toMatchObject({ in_reply_to_message_id: null });
    expect((await messageOf(key, sent.id)).events.map((event) => event.type)).not.toContain("replied");

    await call(`/api/v1/domains/${domain.id}`, { key, method: "PATCH", body: { receiving: true } });
    const own = `hello@${domain.name}`;
    const references = inboundMail("autoReply", { to: own })
      .replace(/^Auto-Submitted: auto-replied\r\n/m, "")
      .replace(/^In-Reply-To: .*\r\n/m, "In-Reply-To: <unrelated@example.org>\r\n")
      .replace(/^References: .*\r\n/m, `References: ${sent.messageIdHeader} <unrelated@example.org>\r\n`);
    await deliver(own, references, { from: customer });
    expect((await inboundList(key))[0]).toMatchObject({ in_reply_to_message_id: sent.id });
    // A Message-ID in our form on another domain than the message's From is not ours.
    const forged = inboundMail("replyWithAttachments", { to: own, inReplyTo: `<${sent.id}@elsewhere.example>` });
    await deliver(own, forged, { from: customer });
    expect((await inboundList(key))[0]).toMatchObject({ in_reply_to_message_id: null });
    expect((await messageOf(key, sent.id)).events.filter((event) => event.type === "replied")).toHaveLength(1);
  });

  it("a send-only key sees that a reply came and its inbound id, not who wrote it or its subject", async () => {
    const { key, from, domain } = await sender();
    expect((await call(`/api/v1/domains/${domain.id}`, { key, method: "PATCH", body: { receiving: true } })).status).toBe(200);
    const customer = `dee-${crypto.randomUUID().slice(0, 8)}@example.org`;
    const sent = await sentMessage(key, from, customer);
    const to = `hello@${domain.name}`;
    const secret = inboundMail("replyWithAttachments", { to, inReplyTo: sent.messageIdHeader }).replace(
      "Subject: Re: Your receipt",
      "Subject: Re: hello - my SSN is 078-05-1120",
    );
    await deliver(to, secret, { from: customer });
    const [reply] = await inboundList(key);

    const sendOnly = await createKey(key, { name: "sender", scopes: ["send"] });
    const seen = await json<{ events: { type: string; data: Record<string, unknown> }[] }>(
      await call(`/api/v1/messages/${sent.id}`, { key: sendOnly.key }),
    );
    const replied = seen.events.find((event) => event.type === "replied");
    expect(replied?.data).toEqual({ message_id: sent.id, campaign_id: null, inbound_id: reply!.id });
    expect(JSON.stringify(seen)).not.toContain("SSN");
    expect(JSON.stringify(seen)).not.toContain("Jane Doe");

    const reader = await createKey(key, { name: "support desk", scopes: ["send", "inbound"] });
    const read = await json<{ events: { type: string; data: Record<string, unknown> }[] }>(
      await call(`/api/v1/messages/${sent.id}`, { key: reader.key }),
    );
    expect(read.events.find((event) => event.type === "replied")?.data).toMatchObject({
      from: "Jane Doe <jane@example.org>",
      subject: "Re: hello - my SSN is 078-05-1120",
    });
  });

  it("mail from strangers naming a sent Message-ID is stored but is no reply; a recipient's, in any letter case, is", async () => {
    const { key, from, domain } = await sender();
    expect((await call(`/api/v1/domains/${domain.id}`, { key, method: "PATCH", body: { receiving: true } })).status).toBe(200);
    const customer = `eve-${crypto.randomUUID().slice(0, 8)}@example.org`;
    const sent = await sentMessage(key, from, customer);
    const to = `hello@${domain.name}`;
    for (const stranger of ["mallory@example.net", "trent@example.com", `${customer}.evil`]) {
      const mail = inboundMail("replyWithAttachments", { to, inReplyTo: sent.messageIdHeader }).replace(
        "From: Jane Doe <jane@example.org>",
        `From: <${stranger}>`,
      );
      expect(await deliver(to, mail, { from: stranger })).toEqual({ rejected: undefined });
    }
    const stored = await inboundList(key);
    expect(stored).toHaveLength(3);
    expect(stored.map((row) => row.in_reply_to_message_id)).toEqual([null, null, null]);
    expect((await messageOf(key, sent.id)).events.map((event) => event.type)).not.toContain("replied");
    expect(await overviewReplies(key)).toBe(0);

    // The recipient answering from a client that writes the address in capitals (envelope and From).
    const shouted = customer.toUpperCase();
    const mail = inboundMail("replyWithAttachments", { to, inReplyTo: sent.messageIdHeader }).replace(
      "From: Jane Doe <jane@example.org>",
      `From: Eve <${shouted}>`,
    );
    await deliver(to, mail, { from: shouted });
    expect((await inboundList(key))[0]).toMatchObject({ in_reply_to_message_id: sent.id });
    expect((await messageOf(key, sent.id)).events.filter((event) => event.type === "replied")).toHaveLength(1);
    expect(await overviewReplies(key)).toBe(1);
  });

  it("an auto-reply is recorded as such and linked, but is not a reply: no replied event, not counted", async () => {
    const { key, from, domain } = await sender();
    await call(`/api/v1/domains/${domain.id}`, { key, method: "PATCH", body: { receiving: true } });
    const customer = `cy-${crypto.randomUUID().slice(0, 8)}@example.org`;
    const sent = await sentMessage(key, from, customer);
    const to = `hello@${domain.name}`;
    await deliver(to, inboundMail("autoReply", { to, inReplyTo: sent.messageIdHeader }), { from: customer });
    const [stored] = await inboundList(key);
    const detail = await json<{ auto_submitted: string; in_reply_to_message_id: string }>(await call(`/api/v1/inbound/${stored!.id}`, { key }));
    expect(detail).toMatchObject({ auto_submitted: "auto-replied", in_reply_to_message_id: sent.id });
    expect((await messageOf(key, sent.id)).events.map((event) => event.type)).not.toContain("replied");
    expect(await overviewReplies(key)).toBe(0);
  });

  it("a reply to a campaign message is linked to the campaign, and the campaign's report counts it once", async () => {
    const { key, domain, sender: senderId } = await campaignAccount();
    const { list, addresses } = await audienceOf(key, 2);
    const campaign = await sendCampaign(key, senderId, list);
    await waitForStatus(key, campaign.id, "sent");
    const [first] = await campaignMessages(campaign.id);
    const [copy] = await sinkMessagesTo(first!.email);
    expect(copy!.message_id).toBe(`<${first!.id}@${domain.name}>`);

    await call(`/api/v1/domains/${domain.id}`, { key, method: "PATCH", body: { receiving: true } });
    const to = `hello@${domain.name}`;
    const reply = inboundMail("replyWithAttachments", { to, inReplyTo: copy!.message_id! }).replaceAll("jane@example.org", first!.email);
    await deliver(to, reply);
    await deliver(to, reply);

    const [stored, ...others] = await inboundList(key);
    expect(others).toEqual([]);
    const detail = await json<{ campaign_id: string; in_reply_to_message_id: string }>(await call(`/api/v1/inbound/${stored!.id}`, { key }));
    expect(detail).toMatchObject({ campaign_id: campaign.id, in_reply_to_message_id: first!.id });
    const report = await json<{ totals: { replies: number; sent: number } }>(await call(`/api/v1/reports/campaigns/${campaign.id}`, { key }));
    expect(report.totals).toMatchObject({ replies: 1, sent: addresses.length });
    expect((await messageOf(key, first!.id)).events.filter((event) => event.type === "replied")).toEqual([
      expect.objectContaining({ data: expect.objectContaining({ campaign_id: campaign.id, inbound_id: stored!.id }) }),
    ]);
  });
});
