import { exports } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import { signBridgeRequest } from "@mailforge/bridge-contract";
import { call, createAccount, createKey, d1Of, json } from "../support/helpers";
import { campaignAccount, campaignMessages } from "../support/campaigns";
import { signIn } from "../support/dashboard";
import { eventually, messageOf, sendBalance, sinkMessagesTo, sinkRaw, verifiedDomain, type SinkMessage } from "../support/sending";

// What POST /send puts in the message beyond to/subject/body: copies, custom headers, inline images, the generated
// text part; and reading back what was sent (GET /messages/{id}/content and /raw).

async function setup() {
  const account = await createAccount({ send_credits: 100 });
  const domain = await verifiedDomain(account.api_key);
  return { account, domain, key: account.api_key, from: `Acme <hello@${domain.name}>` };
}

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

async function send(key: string, body: Record<string, unknown>) {
  const response = await call("/api/v1/send", { key, body });
  return {
    status: response.status,
    body: await json<{ id: string; credits_charged: number; recipients: { email: string; status: string }[] }>(response),
  };
}

/** The one copy the sink received for `address` (each recipient is checked to get exactly one). */
async function deliveredTo(address: string): Promise<{ message: SinkMessage; raw: string }> {
  const [message, ...more] = await eventually(async () => {
    const found = await sinkMessagesTo(address);
    return found.length > 0 ? found : undefined;
  });
  expect(more).toEqual([]);
  return { message: message!, raw: await sinkRaw(message!.id) };
}

const headerSection = (raw: string) => raw.slice(0, raw.indexOf("\r\n\r\n"));
const headerNames = (raw: string) => [...headerSection(raw).matchAll(/^([^\s:]+):/gm)].map((match) => match[1]!.toLowerCase());

describe("cc and bcc", () => {
  it("are recipients: charged, in the envelope and recorded, Cc in the headers and Bcc nowhere", async () => {
    const { key, from } = await setup();
    const [to, cc, bcc] = [rcpt("to"), rcpt("cc"), rcpt("bcc")];
    const before = await sendBalance(key);
    const accepted = await send(key, { from, to, cc: [`Carol Copy <${cc}>`], bcc, subject: "Copies", text: "Hello" });
    expect(accepted.status).toBe(202);
    expect(accepted.body.credits_charged).toBe(3);
    expect(accepted.body.recipients).toEqual([
      { email: to, status: "queued" },
      { email: cc, status: "queued" },
      { email: bcc, status: "queued" },
    ]);
    expect(await sendBalance(key)).toBe(before - 3);

    for (const address of [to, cc, bcc]) {
      const { message, raw } = await deliveredTo(address);
      expect(message.rcpt_to).toContain(address);
      const parsed = await PostalMime.parse(raw);
      expect(parsed.to?.map((mailbox) => mailbox.address)).toEqual([to]);
      expect(parsed.cc).toEqual([{ name: "Carol Copy", address: cc }]);
      expect(parsed.bcc).toBeUndefined();
      expect(headerNames(raw)).not.toContain("bcc");
      expect(headerSection(raw)).not.toContain(bcc);
    }
    const record = await eventually(async () => {
      const current = await messageOf(key, accepted.body.id);
      return current.recipients.every((recipient) => recipient.status === "sent") ? current : undefined;
    });
    expect(record.recipients.map((recipient) => recipient.email).sort()).toEqual([to, cc, bcc].sort());
    expect(record.events.filter((event) => event.type === "relay.sent")).toHaveLength(1);
  });

  it("are free when suppressed, count toward the recipient cap, and are checked like to", async () => {
    const { key, from } = await setup();
    const [to, bcc] = [rcpt("to"), rcpt("suppressed")];
    expect((await call("/api/v1/suppressions", { key, body: { email: bcc, reason: "manual" } })).status).toBe(201);
    const accepted = await send(key, { from, to, bcc: [bcc], subject: "One suppressed", text: "Hello" });
    expect(accepted.body.credits_charged).toBe(1);
    expect(accepted.body.recipients).toEqual([
      { email: to, status: "queued" },
      { email: bcc, status: "suppressed" },
    ]);

    const many = (label: string, count: number) => Array.from({ length: count }, (_, i) => `${label}${i}@example.net`);
    const tooMany = await call("/api/v1/send", {
      key,
      body: { from, to: many("t", 30), cc: many("c", 15), bcc: many("b", 6), subject: "x", text: "x" },
    });
    expect(tooMany.status).toBe(422);
    expect((await json<{ errors: Record<string, string[]> }>(tooMany)).errors).toEqual({ to: ["At most 50 recipients per message"] });
    // 50 in all is the cap, not over it.
    expect((await send(key, { from, to: many("t", 30), cc: many("c", 14), bcc: many("b", 6), subject: "x", text: "x" })).status).toBe(202);

    const bad = await call("/api/v1/send", { key, body: { from, to, cc: ["not-an-address"], bcc: [], subject: "x", text: "x" } });
    expect(bad.status).toBe(422);
    expect(Object.keys((await json<{ errors: Record<string, string[]> }>(bad)).errors).sort()).toEqual(["bcc", "cc.0"]);
  });
});

describe("custom headers", () => {
  it("arrive as given, long values folded, and the platform's own are refused by name", async () => {
    const { key, from } = await setup();
    const to = rcpt("headers");
    const long = Array.from({ length: 30 }, (_, i) => `part${i}`).join(" ");
    const accepted = await send(key, { from, to, subject: "Headers", text: "Hi", headers: { "X-Entity-Ref-ID": "order-1042", "X-Long": long } });
    expect(accepted.status).toBe(202);
    const { raw } = await deliveredTo(to);
    const parsed = await PostalMime.parse(raw);
    expect(parsed.headers.find((header) => header.key === "x-entity-ref-id")?.value).toBe("order-1042");
    expect(parsed.headers.find((header) => header.key === "x-long")?.value).toBe(long);
    const folded = /^X-Long: .*(?:\r\n .*)*/m.exec(headerSection(raw))![0].split("\r\n");
    expect(folded.length).toBeGreaterThan(1);
    expect(folded.every((line) => line.length <= 78)).toBe(true);

    const refused = async (headers: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
      const response = await call("/api/v1/send", { key, body: { from, to, subject: "x", text: "x", headers, ...extra } });
      expect(response.status).toBe(422);
      return (await json<{ errors: Record<string, string[]> }>(response)).errors;
    };
    expect(await refused({ "DKIM-Signature": "v=1; a=rsa-sha256" })).toEqual({
      "headers.DKIM-Signature": ["DKIM-Signature is set by the platform and cannot be given in headers"],
    });
    for (const name of [
      "From",
      "bcc",
      "Subject",
      "Date",
      "Message-ID",
      "Return-Path",
      "Received",
      // What receivers write about the path and its checks, and our own.
      "Authentication-Results",
      "ARC-Seal",
      "arc-message-signature",
      "ARC-Authentication-Results",
      "Received-SPF",
      "Delivered-To",
      "X-Original-To",
      "X-Mailforge-Track",
      "x-mailforge-anything",
      "MIME-Version",
      "Content-Type",
      "content-transfer-encoding",
    ]) {
      expect(Object.keys(await refused({ [name]: "x" }))).toEqual([`headers.${name}`]);
    }
    // One-click unsubscribe is the platform's on a single-recipient broadcast message (or one that asks for it); with
    // several recipients, or on transactional mail, it is the sender's (test/sending/send.test.ts).
    expect(Object.keys(await refused({ "List-Unsubscribe": "<mailto:u@example.org>" }, { stream: "broadcast" }))).toEqual([
      "headers.List-Unsubscribe",
    ]);
    expect(Object.keys(await refused({ "List-Unsubscribe": "<mailto:u@example.org>" }, { unsubscribe: true }))).toEqual(["headers.List-Unsubscribe"]);
    expect(Object.keys(await refused({ "X-Inject": "a\r\nBcc: victim@example.org" }))).toEqual(["headers.X-Inject"]);
    expect(Object.keys(await refused({ "Bad Name": "x" }))).toEqual(["headers.Bad Name"]);
    expect(Object.keys(await refused({ "X-Number": 1 }))).toEqual(["headers.X-Number"]);
    expect(Object.keys(await refused({ "X-Word": "x".repeat(991) }))).toEqual(["headers.X-Word"]);

    const [first, second] = [rcpt("list-a"), rcpt("list-b")];
    const own = await send(key, {
      from,
      to: [first, second],
      subject: "List",
      text: "Hi",
      headers: { "List-Unsubscribe": "<mailto:u@example.org>" },
    });
    expect(own.status).toBe(202);
    const listHeader = (await PostalMime.parse((await deliveredTo(first)).raw)).headers.filter((header) => header.key === "list-unsubscribe");
    expect(listHeader.map((header) => header.value)).toEqual(["<mailto:u@example.org>"]);
  });
});

describe("inline images and the text part", () => {
  it("sends an attachment with content_id inline in multipart/related, referenced by cid:", async () => {
    const { key, from } = await setup();
    const to = rcpt("inline");
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    const accepted = await send(key, {
      from,
      to,
      subject: "Logo",
      html: '<p>Our logo: <img src="cid:logo" alt="Acme"></p>',
      attachments: [
        { filename: "logo.png", content: png, content_type: "image/png", content_id: "logo" },
        { filename: "terms.txt", content: btoa("terms"), content_type: "text/plain" },
      ],
    });
    expect(accepted.status).toBe(202);
    const { raw } = await deliveredTo(to);
    expect(raw).toMatch(/^Content-Type: multipart\/related; boundary=/m);
    const parsed = await PostalMime.parse(raw);
    expect(parsed.html).toContain('src="cid:logo"');
    const [logo, terms] = parsed.attachments;
    expect(logo).toMatchObject({ filename: "logo.png", mimeType: "image/png", disposition: "inline", contentId: "<logo>" });
    expect(terms).toMatchObject({ filename: "terms.txt", disposition: "attachment" });

    const badCid = await call("/api/v1/send", {
      key,
      body: {
        from,
        to,
        subject: "x",
        html: "x",
        attachments: [{ filename: "a.png", content: png, content_type: "image/png", content_id: "two words" }],
      },
    });
    expect(badCid.status).toBe(422);
    expect(Object.keys((await json<{ errors: Record<string, string[]> }>(badCid)).errors)).toEqual(["attachments.0.content_id"]);
  });

  it("gives an html-only message a generated text alternative with readable (tracked) links", async () => {
    const { key, from } = await setup();
    const to = rcpt("alt");
    const html = '<h1>Welcome</h1><p>Read the <a href="https://example.com/docs">docs</a>.</p><img src="https://example.com/x.png" alt="">';
    expect((await send(key, { from, to, subject: "Alt", html })).status).toBe(202);
    const { raw } = await deliveredTo(to);
    expect(raw).toMatch(/^Content-Type: multipart\/alternative; boundary=/m);
    const parsed = await PostalMime.parse(raw);
    expect(parsed.text?.trim()).toBe("Welcome\n\nRead the docs [https://example.com/docs].");

    const tracked = rcpt("alt-tracked");
    expect((await send(key, { from, to: tracked, subject: "Alt", html, track_clicks: true, track_opens: true })).status).toBe(202);
    const trackedText = (await PostalMime.parse((await deliveredTo(tracked)).raw)).text ?? "";
    expect(trackedText).toMatch(/^Read the docs\s+\[http:\/\/127\.0\.0\.1:8787\/t\/c\/[^\]\s]+\]\.$/m);
    // The open pixel is an image: not in the text.
    expect(trackedText).not.toContain("/t/o/");
  });
});

describe("GET /messages/{id}/content and /raw", () => {
  it("return what the provider received, 409 before anything was built, 404 for another account's message", async () => {
    const { key, from } = await setup();
    const to = rcpt("read-back");
    const accepted = await send(key, {
      from,
      to,
      subject: "Hello {{first_name}}",
      html: "<p>Hi {{first_name}}, see <a href='https://example.com/a'>this</a></p>",
      variables: { first_name: "Ann" },
    });
    const { raw } = await deliveredTo(to);
    const source = await eventually(async () => {
      const response = await call(`/api/v1/messages/${accepted.body.id}/raw`, { key });
      return response.status === 200 ? response : undefined;
    });
    expect(source.headers.get("Content-Type")).toBe("message/rfc822");
    expect(await source.text()).toBe(raw);

    const parsed = await PostalMime.parse(raw);
    const content = await call(`/api/v1/messages/${accepted.body.id}/content`, { key });
    expect(content.status).toBe(200);
    expect(await json(content)).toEqual({ id: accepted.body.id, subject: "Hello Ann", html: parsed.html, text: parsed.text });
    expect(parsed.html).toContain("Hi Ann");

    const other = await createAccount({ send_credits: 10 });
    for (const path of ["content", "raw"]) {
      expect((await call(`/api/v1/messages/${accepted.body.id}/${path}`, { key: other.api_key })).status).toBe(404);
      expect((await call(`/api/v1/messages/msg_doesnotexist/${path}`, { key })).status).toBe(404);
    }

    // A test-mode message is simulated, never built.
    const testKey = await createKey(key, { name: "test", mode: "test" });
    const simulated = await send(testKey.key, { from, to: rcpt("simulated"), subject: "Test", text: "x" });
    expect(simulated.status).toBe(202);
    const conflict = await call(`/api/v1/messages/${simulated.body.id}/raw`, { key });
    expect(conflict.status).toBe(409);
    expect((await json<{ message: string }>(conflict)).message).toMatch(/Test-mode messages/);
  });
});

// The SMTP relay and POST /send are one pipeline: the same fields give the same recipients, charges and headers.
describe("the relay and the API", () => {
  it("give the same recipients, charges and headers for Cc, Bcc and a custom header", async () => {
    const { account, key, domain } = await setup();
    const created = await call("/api/v1/smtp-credentials", { key, body: { name: "relay" } });
    const credential = await json<{ id: string }>(created);
    const sender = `app@${domain.name}`;

    async function viaApi() {
      const [to, cc, bcc] = [rcpt("api-to"), rcpt("api-cc"), rcpt("api-bcc")];
      const accepted = await send(key, { from: sender, to, cc: [cc], bcc: [bcc], subject: "Same", text: "Hello", headers: { "X-Ref": "1" } });
      return { accepted: accepted.body, to, cc, bcc };
    }
    async function viaRelay() {
      const [to, cc, bcc] = [rcpt("relay-to"), rcpt("relay-cc"), rcpt("relay-bcc")];
      const raw = [`From: ${sender}`, `To: ${to}`, `Cc: ${cc}`, `Bcc: ${bcc}`, "Subject: Same", "X-Ref: 1", "", "Hello", ""].join("\r\n");
      const body = JSON.stringify({ credential_id: credential.id, mail_from: sender, rcpt_to: [to, cc, bcc], raw: btoa(raw) });
      const signature = await signBridgeRequest("test-bridge-secret", { method: "POST", path: "/internal/relay/messages", body });
      const response = await call("/internal/relay/messages", { body, headers: { "X-Bridge-Signature": signature } });
      expect(response.status).toBe(202);
      return {
        accepted: await json<{ id: string; credits_charged: number; recipients: { email: string; status: string }[] }>(response),
        to,
        cc,
        bcc,
      };
    }

    const before = await sendBalance(account.api_key);
    for (const sent of [await viaApi(), await viaRelay()]) {
      expect(sent.accepted.credits_charged).toBe(3);
      expect(sent.accepted.recipients.map((recipient) => recipient.email)).toEqual([sent.to, sent.cc, sent.bcc]);
      for (const address of [sent.to, sent.cc, sent.bcc]) {
        const { raw } = await deliveredTo(address);
        const parsed = await PostalMime.parse(raw);
        expect(parsed.cc?.map((mailbox) => mailbox.address)).toEqual([sent.cc]);
        expect(headerNames(raw)).not.toContain("bcc");
        expect(headerSection(raw)).not.toContain(sent.bcc);
        expect(parsed.headers.find((header) => header.key === "x-ref")?.value).toBe("1");
      }
    }
    expect(await sendBalance(account.api_key)).toBe(before - 6);
  });
});

describe("a campaign message's record", () => {
  it("shows the subject its recipient saw, in GET /messages, GET /messages/{id}, its opened event and /content", async () => {
    const { account, key, sender } = await campaignAccount();
    const list = (await json<{ id: string }>(await call("/api/v1/lists", { key, body: { name: "bob" } }))).id;
    const bob = rcpt("bob");
    expect((await call("/api/v1/contacts", { key, body: { email: bob, first_name: "Bob", lists: [list] } })).status).toBeLessThan(300);
    const created = await call("/api/v1/campaigns", {
      key,
      body: { name: "news", sender_id: sender, subject: "News for {{first_name|you}}", html: "<p>Hi {{first_name}}</p>", lists: [list] },
    });
    const campaign = await json<{ id: string }>(created);
    expect((await call(`/api/v1/campaigns/${campaign.id}/send`, { key, body: {} })).status).toBe(202);

    const { raw } = await deliveredTo(bob);
    const received = await PostalMime.parse(raw);
    expect(received.subject).toBe("News for Bob");
    const [row] = await campaignMessages(campaign.id);
    const record = await eventually(async () => {
      const current = await json<{ status: string; subject: string }>(await call(`/api/v1/messages/${row!.id}`, { key }));
      return current.status === "sent" ? current : undefined;
    });
    expect(record.subject).toBe("News for Bob");
    const listed = await json<{ data: { id: string; subject: string }[] }>(await call("/api/v1/messages", { key }));
    expect(listed.data.find((message) => message.id === row!.id)?.subject).toBe("News for Bob");
    const content = await json<{ subject: string; text: string }>(await call(`/api/v1/messages/${row!.id}/content`, { key }));
    expect(content.subject).toBe("News for Bob");
    // An open after sending names the message by the subject its reader saw.
    const pixel = /src="(http:\/\/127\.0\.0\.1:8787\/t\/o\/[^"]+)"/.exec(received.html ?? "")![1]!;
    await d1Of(account)
      .prepare("UPDATE messages SET sent_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-60 seconds') WHERE id = ?1")
      .bind(row!.id)
      .run();
    const reader = { "User-Agent": "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148" };
    expect((await exports.default.fetch(new Request(pixel.replace("http://127.0.0.1:8787", "http://localhost"), { headers: reader }))).status).toBe(
      200,
    );
    const opened = await eventually(async () => (await messageOf(key, row!.id)).events.find((event) => event.type === "opened"));
    expect(opened.data.subject).toBe("News for Bob");
    // A campaign with html only gets a text part too, unsubscribe link included.
    expect(content.text).toMatch(/^Hi Bob\n\nUnsubscribe\s+\[http:\/\/127\.0\.0\.1:8787\/u\/\S+\]\s*$/);
  });
});

describe("the dashboard's message page", () => {
  it("frames the body as sent under a sandboxing policy and links the raw source", async () => {
    const { key, from } = await setup();
    const to = rcpt("dashboard");
    const accepted = await send(key, { from, to, subject: "Framed", html: "<p>Shown <b>as sent</b></p>", track_opens: true });
    const { raw } = await deliveredTo(to);
    const browser = await signIn(key);
    const page = await eventually(async () => {
      const html = await (await browser.get(`/dashboard/messages/${accepted.body.id}`)).text();
      return html.includes("<iframe") ? html : undefined;
    });
    expect(page).toContain(`src="/dashboard/messages/${accepted.body.id}/body"`);
    expect(page).toContain(`href="/dashboard/messages/${accepted.body.id}/raw"`);

    const body = await browser.get(`/dashboard/messages/${accepted.body.id}/body`);
    // Sandboxed, and no remote image: the open pixel must not fire when the sender looks at the message.
    expect(body.headers.get("Content-Security-Policy")).toBe(
      "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; frame-ancestors 'self'; base-uri 'none'",
    );
    const shown = await body.text();
    expect(shown).toBe((await PostalMime.parse(raw)).html);
    expect(shown).toContain("/t/o/");

    const source = await browser.get(`/dashboard/messages/${accepted.body.id}/raw`);
    expect(source.headers.get("Content-Type")).toBe("text/plain; charset=utf-8");
    expect(await source.text()).toBe(raw);
    // Another account's message is not found.
    const stranger = await signIn((await createAccount()).api_key);
    expect((await stranger.get(`/dashboard/messages/${accepted.body.id}/raw`)).status).toBe(404);
  });
});
