import { exports } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import { call, createAccount, d1Of, json } from "../support/helpers";
import { audienceOf, campaignAccount, waitForStatus } from "../support/campaigns";
import { eventually, messageOf, sinkMessagesTo, sinkRaw, verifiedDomain } from "../support/sending";
import { createEndpoint, receiverPath, receiverUrl, waitForRequests } from "../support/webhooks";

const site = "http://127.0.0.1:8787";
const reader = { "User-Agent": "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148" };
const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

const html =
  '<html><body><h1>Spring sale</h1><p><a href="https://shop.example/sale?from=mail&amp;id=7">Shop now</a> or ' +
  '<a href="https://shop.example/faq">read the FAQ</a>. <a href="mailto:help@shop.example">Write to us</a></p></body></html>';
const text = "Spring sale: https://shop.example/sale?from=mail&id=7";

async function setup() {
  const account = await createAccount({ send_credits: 100 });
  const domain = await verifiedDomain(account.api_key);
  return { account, key: account.api_key, from: `Shop <news@${domain.name}>` };
}

/** Sends through POST /send and waits until the dev sink has it; returns the message id and the parsed MIME. */
async function sendAndReceive(key: string, body: Record<string, unknown>, inbox: string) {
  const response = await call("/api/v1/send", { key, body });
  expect(response.status).toBe(202);
  const { id } = await json<{ id: string }>(response);
  const [received] = await eventually(async () => ((await sinkMessagesTo(inbox)).length > 0 ? sinkMessagesTo(inbox) : undefined));
  const parsed = await PostalMime.parse(await sinkRaw(received!.id));
  await eventually(async () => ((await messageOf(key, id)).status === "sent" ? true : undefined));
  return { id, parsed };
}

const trackedLinks = (markup: string) => [...markup.matchAll(/href="(http:\/\/127\.0\.0\.1:8787\/t\/c\/[^"]+)"/g)].map((match) => match[1]!);
const pixelOf = (markup: string) => markup.match(/<img src="(http:\/\/127\.0\.0\.1:8787\/t\/o\/[^"]+)"/)?.[1];
const pathOf = (url: string) => new URL(url).pathname;

/** A GET of a /t/ link as a mail client makes it, seeing the redirect itself rather than following it. */
const hit = (path: string, headers: Record<string, string> = reader) =>
  exports.default.fetch(new Request(`http://localhost${path}`, { headers, redirect: "manual" }));

/** The message was handed over a minute ago: past the window in which an open counts as a prefetch. */
async function sentAMinuteAgo(account: { database: string }, messageId: string) {
  await d1Of(account)
    .prepare("UPDATE messages SET sent_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-60 seconds') WHERE id = ?1")
    .bind(messageId)
    .run();
}

async function rollups(account: { id: string; database: string }) {
  return d1Of(account)
    .prepare(
      `SELECT total(opens) AS opens, total(unique_opens) AS unique_opens, total(machine_opens) AS machine_opens,
       total(clicks) AS clicks, total(unique_clicks) AS unique_clicks FROM daily_stats WHERE account_id = ?1`,
    )
    .bind(account.id)
    .first<Record<"opens" | "unique_opens" | "machine_opens" | "clicks" | "unique_clicks", number>>();
}

/** The recipient's engagement as GET /messages/{id} shows it. */
async function recipientRow(key: string, messageId: string) {
  return (await messageOf(key, messageId)).recipients[0];
}

const eventsOf = async (key: string, id: string, type: string) => (await messageOf(key, id)).events.filter((event) => event.type === type);

describe("open and click tracking", () => {
  it("a tracked send arrives with redirects and a pixel; opens and clicks become events, engagement and rollups", async () => {
    const { account, key, from } = await setup();
    const to = rcpt("ann");
    const contact = await json<{ id: string }>(await call("/api/v1/contacts", { key, body: { email: to } }));
    const hooks = receiverPath();
    await createEndpoint(key, { url: receiverUrl(hooks), events: ["opened", "clicked"] });

    const { id, parsed } = await sendAndReceive(key, { from, to, subject: "Sale", html, text, track_opens: true, track_clicks: true }, to);
    // Both http(s) links go through the redirect, mailto: does not; the pixel closes the body; the text part is as sent.
    const links = trackedLinks(parsed.html!);
    expect(links).toHaveLength(2);
    expect(parsed.html).toContain('<a href="mailto:help@shop.example">Write to us</a>');
    expect(parsed.html).not.toContain("https://shop.example/");
    const pixel = pixelOf(parsed.html!);
    expect(parsed.html).toMatch(/<img src="http:\/\/127\.0\.0\.1:8787\/t\/o\/[^"]+"[^>]*><\/body><\/html>/);
    expect(parsed.text?.trim()).toBe(text);
    expect(pixel?.startsWith(`${site}/t/o/`)).toBe(true);

    await sentAMinuteAgo(account, id);
    for (let i = 0; i < 2; i++) {
      const open = await hit(pathOf(pixel!));
      expect(open.status).toBe(200);
      expect(open.headers.get("Content-Type")).toBe("image/gif");
      expect(open.headers.get("Cache-Control")).toContain("no-store");
      expect(new Uint8Array(await open.arrayBuffer()).slice(0, 6)).toEqual(new TextEncoder().encode("GIF89a"));
    }
    const opened = await eventually(async () => {
      const row = await recipientRow(key, id);
      return row?.opens === 2 ? row : undefined;
    });
    expect(opened.opened_at).toEqual(expect.any(String));
    expect(await rollups(account)).toMatchObject({ opens: 2, unique_opens: 1, machine_opens: 0 });
    const openEvents = await eventsOf(key, id, "opened");
    expect(openEvents).toHaveLength(1);
    expect(openEvents[0]!.data).toMatchObject({ message_id: id, recipient: to, user_agent: reader["User-Agent"], source: "api" });

    // The first link twice, the second once: a 302 to the URL as it was in the message each time.
    const clicks = [links[0]!, links[0]!, links[1]!];
    for (const link of clicks) {
      const click = await hit(pathOf(link));
      expect(click.status).toBe(302);
    }
    expect((await hit(pathOf(links[0]!))).headers.get("Location")).toBe("https://shop.example/sale?from=mail&id=7");
    expect((await hit(pathOf(links[1]!))).headers.get("Location")).toBe("https://shop.example/faq");
    const clicked = await eventually(async () => {
      const row = await recipientRow(key, id);
      return row?.clicks === 5 ? row : undefined;
    });
    expect(clicked.clicked_at).toEqual(expect.any(String));
    expect(await rollups(account)).toMatchObject({ clicks: 5, unique_clicks: 1 });
    const clickEvents = await eventsOf(key, id, "clicked");
    expect(clickEvents.map((event) => event.data.url).sort()).toEqual(["https://shop.example/faq", "https://shop.example/sale?from=mail&id=7"]);
    expect(clickEvents[0]!.data).toMatchObject({ message_id: id, recipient: to });

    const contactRow = await d1Of(account)
      .prepare("SELECT last_activity_at FROM contacts WHERE id = ?1")
      .bind(contact.id)
      .first<{ last_activity_at: string }>();
    expect(contactRow?.last_activity_at).toEqual(expect.any(String));
    // Webhooks get the one `opened` and the two `clicked` events, like any other event.
    const delivered = await waitForRequests(hooks, 3);
    expect(delivered.map((request) => (JSON.parse(request.body) as { type: string }).type).sort()).toEqual(["clicked", "clicked", "opened"]);
  });

  it("a token with one character changed is a 404, never a redirect, and counts nothing", async () => {
    const { account, key, from } = await setup();
    const to = rcpt("bob");
    const { id, parsed } = await sendAndReceive(key, { from, to, subject: "Sale", html, track_opens: true, track_clicks: true }, to);
    const path = pathOf(trackedLinks(parsed.html!)[0]!);
    const pixel = pathOf(pixelOf(parsed.html!)!);
    await sentAMinuteAgo(account, id);
    const flip = (value: string, at: number) => `${value.slice(0, at)}${value[at] === "A" ? "B" : "A"}${value.slice(at + 1)}`;
    for (const altered of [flip(path, "/t/c/".length + 3), flip(path, path.length - 2), flip(pixel, pixel.length - 2), `${path}x`, "/t/c/nothing"]) {
      const response = await hit(altered);
      expect(response.status).toBe(404);
      expect(response.headers.get("Location")).toBeNull();
      expect(await json(response)).toEqual({ message: "This tracking link is not valid", code: "not_found" });
    }
    // A click token is not a pixel and a pixel token is not a link.
    expect((await hit(path.replace("/t/c/", "/t/o/"))).status).toBe(404);
    expect((await hit(pixel.replace("/t/o/", "/t/c/"))).status).toBe(404);
    // The real link still works afterwards, and only it was counted.
    expect((await hit(path)).status).toBe(302);
    await eventually(async () => ((await recipientRow(key, id))?.clicks === 1 ? true : undefined));
    expect(await rollups(account)).toMatchObject({ clicks: 1, opens: 0 });
  });

  it("machine opens (Apple MPP, a prefetch right after sending) are counted apart; scanner clicks redirect uncounted", async () => {
    const { account, key, from } = await setup();
    const to = rcpt("cy");
    const { id, parsed } = await sendAndReceive(key, { from, to, subject: "Sale", html, track_opens: true, track_clicks: true }, to);
    const pixel = pathOf(pixelOf(parsed.html!)!);
    // Within 10 s of sending, even a mail client's fetch is a prefetch.
    expect((await hit(pixel)).status).toBe(200);
    await eventually(async () => ((await rollups(account))?.machine_opens === 1 ? true : undefined));
    await sentAMinuteAgo(account, id);
    expect((await hit(pixel, { "User-Agent": "Mozilla/5.0" })).status).toBe(200);
    expect((await hit(pixel, { ...reader, "CF-Connecting-IP": "17.58.1.20" })).status).toBe(200);
    const scanner = await hit(pathOf(trackedLinks(parsed.html!)[0]!), { "User-Agent": "Mimecast-URL-Protect/1.0" });
    expect(scanner.status).toBe(302);
    expect(scanner.headers.get("Location")).toBe("https://shop.example/sale?from=mail&id=7");
    await eventually(async () => ((await rollups(account))?.machine_opens === 3 ? true : undefined));
    expect(await rollups(account)).toMatchObject({ opens: 0, unique_opens: 0, clicks: 0 });
    expect(await recipientRow(key, id)).toMatchObject({ opens: 0, clicks: 0, opened_at: null });
    expect((await messageOf(key, id)).events.map((event) => event.type)).toEqual(["relay.sent"]);
  });

  it("an untracked send leaves the HTML as it was written", async () => {
    const { key, from } = await setup();
    const to = rcpt("dee");
    const { parsed } = await sendAndReceive(key, { from, to, subject: "Sale", html, text }, to);
    expect(parsed.html?.trimEnd()).toBe(html);
    expect(parsed.html).not.toContain("/t/");
  });

  it("several recipients share one message's tracking: events name the message and recipient null", async () => {
    const { account, key, from } = await setup();
    const [a, b] = [rcpt("eve"), rcpt("fay")];
    const { id, parsed } = await sendAndReceive(key, { from, to: [a, b], subject: "Sale", html, track_opens: true }, a);
    expect(trackedLinks(parsed.html!)).toEqual([]);
    const pixel = pathOf(pixelOf(parsed.html!)!);
    await sentAMinuteAgo(account, id);
    await hit(pixel);
    await hit(pixel);
    await eventually(async () => ((await rollups(account))?.opens === 2 ? true : undefined));
    expect(await rollups(account)).toMatchObject({ opens: 2, unique_opens: 1 });
    const events = await eventsOf(key, id, "opened");
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ message_id: id, recipient: null });
  });

  it("a token never reveals another message: another account's id in a token is a 404, hits land in the owner's account only", async () => {
    const owner = await setup();
    const other = await setup();
    const [toOwner, toOther] = [rcpt("gil"), rcpt("hal")];
    const mine = await sendAndReceive(owner.key, { from: owner.from, to: toOwner, subject: "Mine", html, track_clicks: true }, toOwner);
    const theirs = await sendAndReceive(other.key, { from: other.from, to: toOther, subject: "Theirs", html, track_clicks: true }, toOther);
    const token = pathOf(trackedLinks(mine.parsed.html!)[0]!).slice("/t/c/".length);
    const [payload, signature] = token.split(".") as [string, string];
    const fields = JSON.parse(atob(payload.replace(/-/g, "+").replace(/_/g, "/"))) as unknown[];
    expect(fields[1]).toBe(mine.id);
    const swapped = btoa(JSON.stringify(["c", theirs.id, toOther, fields[3], fields[4]]))
      .replace(/\+/g, "-")
      .replace(/\//g, "_")
      .replace(/=+$/, "");
    expect((await hit(`/t/c/${swapped}.${signature}`)).status).toBe(404);

    expect((await hit(`/t/c/${token}`)).status).toBe(302);
    await eventually(async () => ((await eventsOf(owner.key, mine.id, "clicked")).length === 1 ? true : undefined));
    expect(await eventsOf(other.key, theirs.id, "clicked")).toEqual([]);
    expect((await call(`/api/v1/messages/${mine.id}`, { key: other.key })).status).toBe(404);
    expect(await rollups(other.account)).toMatchObject({ clicks: 0 });
  });

  it("a campaign is tracked by default and its report links count clicks per URL", async () => {
    const { account, key, sender } = await campaignAccount();
    const { list, addresses } = await audienceOf(key, 2);
    const created = await call("/api/v1/campaigns", { key, body: { name: "spring", sender_id: sender, subject: "Sale", html, lists: [list] } });
    expect(created.status).toBe(201);
    const campaign = await json<{ id: string; track_opens: boolean; track_clicks: boolean }>(created);
    expect(campaign).toMatchObject({ track_opens: true, track_clicks: true });
    expect((await call(`/api/v1/campaigns/${campaign.id}/send`, { key, body: {} })).status).toBe(202);
    await waitForStatus(key, campaign.id, "sent");

    const htmlOf = async (address: string) => {
      const [received] = await eventually(async () => ((await sinkMessagesTo(address)).length > 0 ? sinkMessagesTo(address) : undefined));
      return (await PostalMime.parse(await sinkRaw(received!.id))).html!;
    };
    const [first, second] = await Promise.all(addresses.map(htmlOf));
    // The unsubscribe footer link is not rewritten; each recipient's links are their own.
    expect(first).toMatch(/<a href="http:\/\/127\.0\.0\.1:8787\/u\/[^"]+"[^>]*>Unsubscribe<\/a>/);
    const [firstSale, firstFaq] = trackedLinks(first!);
    const [secondSale] = trackedLinks(second!);
    expect(firstSale).not.toBe(secondSale);
    await d1Of(account)
      .prepare("UPDATE messages SET sent_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-60 seconds') WHERE campaign_id = ?1")
      .bind(campaign.id)
      .run();

    for (const link of [firstSale!, firstSale!, firstFaq!, secondSale!]) expect((await hit(pathOf(link))).status).toBe(302);
    const links = await eventually(async () => {
      const rows = (
        await d1Of(account)
          .prepare("SELECT url, clicks, unique_clicks FROM campaign_links WHERE campaign_id = ?1 ORDER BY clicks DESC")
          .bind(campaign.id)
          .all()
      ).results;
      return rows.reduce((total, row) => total + (row.clicks as number), 0) === 4 ? rows : undefined;
    });
    expect(links).toEqual([
      { url: "https://shop.example/sale?from=mail&id=7", clicks: 3, unique_clicks: 2 },
      { url: "https://shop.example/faq", clicks: 1, unique_clicks: 1 },
    ]);
    const byCampaign = await d1Of(account)
      .prepare("SELECT sum(clicks) AS clicks, sum(unique_clicks) AS unique_clicks FROM daily_stats WHERE campaign_id = ?1")
      .bind(campaign.id)
      .first();
    expect(byCampaign).toEqual({ clicks: 4, unique_clicks: 2 });
    expect(await rollups(account)).toMatchObject({ clicks: 4, unique_clicks: 2 });
  });
});
