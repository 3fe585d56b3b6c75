import { describe, expect, it } from "vitest";
import PostalMime from "postal-mime";
import { call, json } from "../support/helpers";
import { eventually, messageOf, sinkMessagesTo, sinkRaw, sinkRule } from "../support/sending";
import { audienceOf, campaignAccount, campaignMessages, tag, waitForStatus, type Campaign } from "../support/campaigns";

// Message streams, scoped suppressions and subscription topics (docs/streams.md), through the real Worker: campaigns
// fan out through the send queue to the dev SMTP sink, and unsubscribes go through the links recipients get.

type Topic = { id: string; name: string; default_subscribed: boolean };

async function topic(key: string, name: string, extra: Record<string, unknown> = {}): Promise<Topic> {
  const response = await call("/api/v1/topics", { key, body: { name, ...extra } });
  expect(response.status).toBe(201);
  return json<Topic>(response);
}

async function campaignTo(key: string, sender: string, list: string, topicId?: string): Promise<Campaign> {
  const created = await call("/api/v1/campaigns", {
    key,
    body: { name: `news ${tag()}`, sender_id: sender, subject: "News", text: "Hello", lists: [list], ...(topicId ? { topic_id: topicId } : {}) },
  });
  expect(created.status).toBe(201);
  const draft = await json<Campaign>(created);
  expect((await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: {} })).status).toBe(202);
  return waitForStatus(key, draft.id, "sent");
}

/** The campaign mail an address received: its List-Unsubscribe link's path, and its headers. */
async function receivedBy(address: string, count = 1) {
  const mails = await eventually(async () => {
    const found = await sinkMessagesTo(address);
    return found.length >= count ? found : undefined;
  });
  const parsed = await PostalMime.parse(await sinkRaw(mails.at(-1)!.id));
  const header = parsed.headers.find((entry) => entry.key === "list-unsubscribe")?.value;
  return { parsed, unsubscribePath: header ? new URL(header.slice(1, -1)).pathname : undefined };
}

const oneClick = (path: string) =>
  call(path, { method: "POST", body: "List-Unsubscribe=One-Click", headers: { "Content-Type": "application/x-www-form-urlencoded" } });

describe("streams: a marketing unsubscribe never blocks a password reset", () => {
  it("after one-click unsubscribing from a campaign, the address is left out of the next one but a transactional send is delivered", async () => {
    const { key, domain, sender } = await campaignAccount();
    const { list, addresses } = await audienceOf(key, 2);
    const [ann, bob] = addresses as [string, string];
    await campaignTo(key, sender, list);
    const { parsed, unsubscribePath } = await receivedBy(ann);
    expect(parsed.headers.find((entry) => entry.key === "list-unsubscribe-post")?.value).toBe("List-Unsubscribe=One-Click");
    expect((await oneClick(unsubscribePath!)).status).toBe(200);

    const entries = await json<{ data: { scope: string; reason: string }[] }>(await call(`/api/v1/suppressions?email=${ann}`, { key }));
    expect(entries.data).toEqual([expect.objectContaining({ reason: "unsubscribe", scope: "broadcast" })]);
    const second = await campaignTo(key, sender, list);
    expect((await campaignMessages(second.id)).map((message) => message.email)).toEqual([bob]);

    // The password reset: accepted, charged, delivered, with no unsubscribe link in it.
    const reset = await call("/api/v1/send", { key, body: { from: `hello@${domain.name}`, to: ann, subject: "Reset your password", text: "x" } });
    expect(reset.status).toBe(202);
    expect(await json(reset)).toMatchObject({ status: "queued", credits_charged: 1 });
    const delivered = await receivedBy(ann, 2);
    expect(delivered.parsed.subject).toBe("Reset your password");
    expect(delivered.unsubscribePath).toBeUndefined();
  });

  it("an address a provider refused with 550 5.1.1 is suppressed for transactional mail too", async () => {
    const { key, domain } = await campaignAccount();
    const from = `hello@${domain.name}`;
    const gone = `gone-${tag()}@example.net`;
    await sinkRule({ match: gone, phase: "rcpt", responses: [{ code: 550, message: "5.1.1 No such user" }] });
    const first = await json<{ id: string }>(await call("/api/v1/send", { key, body: { from, to: gone, subject: "Receipt", text: "x" } }));
    await eventually(async () => {
      const entries = await json<{ data: { scope: string }[] }>(await call(`/api/v1/suppressions?email=${gone}`, { key }));
      return entries.data.length > 0 ? entries : undefined;
    });
    const entries = await json<{ data: { scope: string; reason: string; source_message_id: string }[] }>(
      await call(`/api/v1/suppressions?email=${gone}`, { key }),
    );
    expect(entries.data).toEqual([expect.objectContaining({ reason: "bounce", scope: "all", source_message_id: first.id })]);
    for (const stream of ["transactional", "broadcast"]) {
      const again = await json(await call("/api/v1/send", { key, body: { from, to: gone, subject: "Receipt", text: "x", stream } }));
      expect(again).toMatchObject({ status: "suppressed", credits_charged: 0 });
    }
  });
});

describe("reports by stream", () => {
  it("GET /reports/overview counts transactional and broadcast mail apart, and ?stream= keeps one", async () => {
    const { key, domain } = await campaignAccount();
    const from = `hello@${domain.name}`;
    const sent = async (body: Record<string, unknown>) => {
      const accepted = await json<{ id: string }>(await call("/api/v1/send", { key, body: { from, subject: "x", text: "x", ...body } }));
      await eventually(async () => ((await messageOf(key, accepted.id)).status === "sent" ? true : undefined));
    };
    await sent({ to: [`t1-${tag()}@example.net`, `t2-${tag()}@example.net`] });
    await sent({ to: `b1-${tag()}@example.net`, stream: "broadcast" });
    const today = new Date().toISOString().slice(0, 10);
    const overview = await json<{ totals: { sent: number }; streams: { stream: string; sent: number }[] }>(
      await call(`/api/v1/reports/overview?from=${today}&to=${today}`, { key }),
    );
    expect(overview.totals.sent).toBe(3);
    expect(overview.streams.map((row) => [row.stream, row.sent])).toEqual([
      ["transactional", 2],
      ["broadcast", 1],
    ]);
    const broadcast = await json<{ totals: { sent: number } }>(await call(`/api/v1/reports/overview?stream=broadcast`, { key }));
    expect(broadcast.totals.sent).toBe(1);
    expect((await call("/api/v1/reports/overview?stream=marketing", { key })).status).toBe(422);
  });
});

describe("topics", () => {
  it("unsubscribing from a Newsletter campaign leaves the address out of the next Newsletter campaign and in the next Product one", async () => {
    const { key, sender } = await campaignAccount();
    const newsletter = await topic(key, "Newsletter", { description: "Monthly news" });
    const product = await topic(key, "Product");
    const { list, addresses } = await audienceOf(key, 2);
    const [ann, bob] = addresses as [string, string];

    const first = await campaignTo(key, sender, list, newsletter.id);
    const { unsubscribePath } = await receivedBy(ann);
    // The link's page is a preference page listing every topic, with the one-click button for this topic.
    const page = await call(unsubscribePath!);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("Newsletter");
    expect(html).toContain("Product");
    expect(html).toContain("Unsubscribe from Newsletter");
    expect(html).toContain("Unsubscribe from all marketing emails");
    expect(html).not.toMatch(/<script/i);

    const left = await oneClick(unsubscribePath!);
    expect(left.status).toBe(200);
    expect(await left.text()).toContain("unsubscribed from Newsletter");
    // No suppression: the contact stays subscribed, only not to that topic.
    expect((await json<{ data: unknown[] }>(await call(`/api/v1/suppressions?email=${ann}`, { key }))).data).toEqual([]);
    const contacts = await json<{ data: { status: string; topics: Record<string, boolean> }[] }>(
      await call(`/api/v1/contacts?email=${ann}`, { key }),
    );
    expect(contacts.data[0]).toMatchObject({ status: "subscribed", topics: { [newsletter.id]: false, [product.id]: true } });

    const nextNews = await campaignTo(key, sender, list, newsletter.id);
    expect((await campaignMessages(nextNews.id)).map((message) => message.email)).toEqual([bob]);
    const nextProduct = await campaignTo(key, sender, list, product.id);
    expect((await campaignMessages(nextProduct.id)).map((message) => message.email).sort()).toEqual([ann, bob].sort());

    // What a webhook gets: one `unsubscribed` event naming the topic; and the campaign's report counts it.
    const annsMessage = (await campaignMessages(first.id)).find((row) => row.email === ann)!;
    const events = (await messageOf(key, annsMessage.id)).events.filter((event) => event.type === "unsubscribed");
    expect(events.map((event) => event.data)).toEqual([
      expect.objectContaining({ email: ann, campaign_id: first.id, topic_id: newsletter.id, method: "one_click" }),
    ]);
    const report = await json<{ topic_id: string; totals: { unsubscribes: number } }>(await call(`/api/v1/reports/campaigns/${first.id}`, { key }));
    expect(report).toMatchObject({ topic_id: newsletter.id, totals: { unsubscribes: 1 } });
  });

  it("the preference page saves topic choices and leaving all marketing; an opt-in topic reaches only those who chose it", async () => {
    const { key, sender } = await campaignAccount();
    const news = await topic(key, "News");
    const beta = await topic(key, "Beta", { default_subscribed: false });
    const { list, addresses } = await audienceOf(key, 2);
    const [ann, bob] = addresses as [string, string];
    // Nobody chose the opt-in topic yet: its campaign has no audience to send to.
    const empty = await json<Campaign>(
      await call("/api/v1/campaigns", {
        key,
        body: { name: "beta", sender_id: sender, subject: "Beta", text: "x", lists: [list], topic_id: beta.id },
      }),
    );
    const refused = await call(`/api/v1/campaigns/${empty.id}/send`, { key, body: {} });
    expect(refused.status).toBe(422);
    expect(JSON.stringify(await json(refused))).toMatch(/audience/i);

    await campaignTo(key, sender, list, news.id);
    const { unsubscribePath } = await receivedBy(ann);
    const saved = await call(unsubscribePath!, {
      method: "POST",
      body: new URLSearchParams([
        ["preferences", "1"],
        ["topic", beta.id],
      ]).toString(),
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    expect(saved.status).toBe(200);
    expect(await saved.text()).toContain("Your preferences are saved.");
    const contact = (await json<{ data: { topics: Record<string, boolean> }[] }>(await call(`/api/v1/contacts?email=${ann}`, { key }))).data[0];
    expect(contact?.topics).toEqual({ [news.id]: false, [beta.id]: true });
    expect((await campaignMessages((await campaignTo(key, sender, list, beta.id)).id)).map((row) => row.email)).toEqual([ann]);

    // Leaving all marketing: a broadcast suppression, the contact unsubscribed; ticking it off again undoes both.
    const all = await call(unsubscribePath!, {
      method: "POST",
      body: new URLSearchParams([
        ["preferences", "1"],
        ["all", "1"],
      ]).toString(),
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    expect(all.status).toBe(200);
    expect((await json<{ data: { status: string }[] }>(await call(`/api/v1/contacts?email=${ann}`, { key }))).data[0]?.status).toBe("unsubscribed");
    expect((await campaignMessages((await campaignTo(key, sender, list)).id)).map((row) => row.email)).toEqual([bob]);
    const back = await call(unsubscribePath!, {
      method: "POST",
      body: "preferences=1",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    expect(back.status).toBe(200);
    expect((await json<{ data: { status: string }[] }>(await call(`/api/v1/contacts?email=${ann}`, { key }))).data[0]?.status).toBe("subscribed");
    expect((await json<{ data: unknown[] }>(await call(`/api/v1/suppressions?email=${ann}`, { key }))).data).toEqual([]);
  });

  it("topics API: create, list, rename, refuse duplicates and unknown references, delete", async () => {
    const { key, sender } = await campaignAccount();
    const created = await topic(key, "Weekly");
    expect(created).toMatchObject({ id: expect.stringMatching(/^top_/), name: "Weekly", default_subscribed: true });
    const duplicate = await call("/api/v1/topics", { key, body: { name: "Weekly" } });
    expect(duplicate.status).toBe(422);
    expect(await json(duplicate)).toMatchObject({ code: "validation_failed", errors: { name: [expect.stringContaining("Weekly")] } });
    expect((await call("/api/v1/topics", { key, body: { name: "" } })).status).toBe(422);
    expect((await call("/api/v1/topics", { key, body: { name: "x", colour: "red" } })).status).toBe(422);

    const renamed = await call(`/api/v1/topics/${created.id}`, { key, method: "PATCH", body: { name: "Weekly digest", default_subscribed: false } });
    expect(await json(renamed)).toMatchObject({ name: "Weekly digest", default_subscribed: false });
    expect((await json<{ data: Topic[] }>(await call("/api/v1/topics", { key }))).data.map((row) => row.name)).toEqual(["Weekly digest"]);

    const { list } = await audienceOf(key, 1);
    const unknown = await call("/api/v1/campaigns", {
      key,
      body: { name: "x", sender_id: sender, subject: "x", text: "x", lists: [list], topic_id: "top_nope" },
    });
    expect(unknown.status).toBe(422);
    expect(await json(unknown)).toMatchObject({ errors: { topic_id: [expect.stringContaining("top_nope")] } });
    const badContact = await call("/api/v1/contacts", { key, body: { email: `x-${tag()}@example.net`, topics: { top_nope: true } } });
    expect(badContact.status).toBe(422);
    expect(await json(badContact)).toMatchObject({ errors: { "topics.top_nope": [expect.any(String)] } });

    const contact = await json<{ id: string; topics: Record<string, boolean> }>(
      await call("/api/v1/contacts", { key, body: { email: `y-${tag()}@example.net`, topics: { [created.id]: true } } }),
    );
    expect(contact.topics).toEqual({ [created.id]: true });
    const patched = await call(`/api/v1/contacts/${contact.id}`, { key, method: "PATCH", body: { topics: { [created.id]: false } } });
    expect(await json(patched)).toMatchObject({ topics: { [created.id]: false } });

    const other = await campaignAccount();
    expect((await call(`/api/v1/topics/${created.id}`, { key: other.key })).status).toBe(404);
    expect((await call(`/api/v1/topics/${created.id}`, { key, method: "DELETE" })).status).toBe(200);
    expect((await call(`/api/v1/topics/${created.id}`, { key })).status).toBe(404);
    expect((await json<{ topics: Record<string, boolean> }>(await call(`/api/v1/contacts/${contact.id}`, { key }))).topics).toEqual({});
  });
});
