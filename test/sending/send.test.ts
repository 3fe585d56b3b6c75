import { env } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import { databaseTag } from "../../src/db/client";
import { ADMIN_TOKEN, call, createAccount, createKey, d1Of, d1OfAccount, json } from "../support/helpers";
import { eventually, messageOf, sendBalance, sinkMessagesTo, sinkRaw, verifiedDomain } from "../support/sending";

const pdf = btoa("%PDF-1.4 tiny test document");

async function setup(overrides: Record<string, unknown> = {}) {
  const account = await createAccount({ send_credits: 100, ...overrides });
  const domain = await verifiedDomain(account.api_key);
  return { account, domain, key: account.api_key, from: `Acme <hello@${domain.name}>` };
}

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

describe("POST /send", () => {
  it("sends a templated broadcast message with placeholders, an attachment and a tag to the provider, DKIM-signed with one-click unsubscribe", async () => {
    const { account, key, from, domain } = await setup();
    const template = await json<{ id: string; variables: string[] }>(
      await call("/api/v1/templates", {
        key,
        body: {
          name: "welcome",
          subject: "Welcome, {{first_name|friend}}",
          html: "<p>Hi {{first_name}}, your plan: {{plan|free}}</p>",
          text: "Hi {{first_name}}",
        },
      }),
    );
    expect(template.variables).toEqual(["first_name", "plan"]);
    const to = rcpt("ann");
    const response = await call("/api/v1/send", {
      key,
      body: {
        from,
        to: [to],
        reply_to: "support@example.org",
        template_id: template.id,
        variables: { first_name: "<Ann & Co>" },
        tags: ["welcome"],
        metadata: { user_id: "42" },
        attachments: [{ filename: "terms.pdf", content: pdf, content_type: "application/pdf" }],
        stream: "broadcast",
      },
    });
    expect(response.status).toBe(202);
    const accepted = await json(response);
    expect(accepted).toEqual({
      id: expect.stringMatching(/^msg_/),
      recipients: [{ email: to, status: "queued" }],
      credits_charged: 1,
      status: "queued",
      test_mode: false,
    });

    const [delivered] = await eventually(async () => ((await sinkMessagesTo(to)).length > 0 ? sinkMessagesTo(to) : undefined));
    // The envelope sender is the message's signed VERP address at BOUNCE_DOMAIN, so its bounces come back to us; it
    // names the account's database first.
    const tag = databaseTag(account.database);
    expect(delivered!.mail_from).toMatch(new RegExp(`^bounces\\+${tag ? `${tag}\\.` : ""}${accepted.id}-[0-9a-f]{16}@bounces\\.mailforge\\.test$`));
    const raw = await sinkRaw(delivered!.id);
    // Ed25519 first (its key is published by verifiedDomain), then RSA, both for the sender's domain.
    const signatures = [...raw.matchAll(/^DKIM-Signature: v=1; a=([a-z0-9-]+); c=relaxed\/relaxed;\r\n d=([^;]+); s=([^;]+);/gm)];
    expect(signatures.map((match) => [match[1], match[2], match[3]])).toEqual([
      ["ed25519-sha256", domain.name, expect.stringMatching(/^mf\d{6}e$/)],
      ["rsa-sha256", domain.name, expect.stringMatching(/^mf\d{6}$/)],
    ]);
    expect(raw.startsWith("DKIM-Signature: v=1; a=ed25519-sha256")).toBe(true);
    const parsed = await PostalMime.parse(raw);
    expect(parsed.subject).toBe("Welcome, <Ann & Co>");
    expect(parsed.html).toContain("Hi &lt;Ann &amp; Co&gt;, your plan: free");
    expect(parsed.text?.trim()).toBe("Hi <Ann & Co>");
    expect(parsed.from).toEqual({ name: "Acme", address: `hello@${domain.name}` });
    expect(parsed.replyTo?.[0]?.address).toBe("support@example.org");
    expect(parsed.messageId).toBe(`<${accepted.id}@${domain.name}>`);
    expect(parsed.attachments).toHaveLength(1);
    expect(parsed.attachments[0]).toMatchObject({ filename: "terms.pdf", mimeType: "application/pdf" });
    const unsubscribe = parsed.headers.find((header) => header.key === "list-unsubscribe")!.value;
    expect(unsubscribe).toMatch(/^<http:\/\/127\.0\.0\.1:8787\/u\/[^>]+>$/);
    expect(parsed.headers.find((header) => header.key === "list-unsubscribe-post")?.value).toBe("List-Unsubscribe=One-Click");

    const message = await eventually(async () => {
      const current = await messageOf(key, accepted.id as string);
      return current.status === "sent" ? current : undefined;
    });
    expect(message.recipients).toEqual([
      { email: to, status: "sent", smtp_response: expect.stringMatching(/^250/), opens: 0, clicks: 0, opened_at: null, clicked_at: null },
    ]);
    expect(message.events.map((event) => event.type)).toEqual(["relay.sent"]);
    expect(message).toMatchObject({ stream: "broadcast" });
    expect(message.events[0]!.data).toMatchObject({
      message_id: accepted.id,
      tags: ["welcome"],
      metadata: { user_id: "42" },
      source: "api",
      stream: "broadcast",
    });

    // The one-click link works as RFC 8058 describes: a POST unsubscribes, and the address is then skipped.
    const path = new URL(unsubscribe.slice(1, -1)).pathname;
    const page = await call(path);
    expect(page.status).toBe(200);
    const oneClick = await call(path, {
      method: "POST",
      body: "List-Unsubscribe=One-Click",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    expect(oneClick.status).toBe(200);
    const again = await json(await call("/api/v1/send", { key, body: { from, to: [to], subject: "again", text: "x", stream: "broadcast" } }));
    expect(again).toMatchObject({ status: "suppressed", credits_charged: 0, recipients: [{ email: to, status: "suppressed" }] });
    // An unsubscribe is from marketing: the password reset still goes.
    const reset = await json(await call("/api/v1/send", { key, body: { from, to: [to], subject: "Reset your password", text: "x" } }));
    expect(reset).toMatchObject({ status: "queued", credits_charged: 1, recipients: [{ email: to, status: "queued" }] });
    expect((await call(`/u/${path.slice(3)}x`, { method: "POST" })).status).toBe(404);
  });

  it("charges one credit per deliverable recipient and lists them", async () => {
    const { account, key, from } = await setup();
    const to = [rcpt("a"), rcpt("b"), rcpt("c")];
    const before = await sendBalance(key);
    const accepted = await json(await call("/api/v1/send", { key, body: { from, to, subject: "Hello", text: "Hi" } }));
    expect(accepted).toMatchObject({ credits_charged: 3, status: "queued" });
    expect(await sendBalance(key)).toBe(before - 3);
    const ledger = await d1Of(account).prepare("SELECT kind, amount, reference_id FROM credit_ledger WHERE reference_id = ?").bind(accepted.id).all();
    expect(ledger.results).toEqual([{ kind: "charge", amount: -3, reference_id: accepted.id }]);
  });

  it("refuses a from domain the account has not verified with 403, saying what to do, and charges nothing", async () => {
    const { key } = await setup();
    const response = await call("/api/v1/send", { key, body: { from: "a@unverified.example", to: [rcpt("x")], subject: "Hi", text: "Hello" } });
    expect(response.status).toBe(403);
    expect(await json(response)).toMatchObject({
      code: "domain_not_verified",
      message:
        "The from domain unverified.example is not a verified sending domain of this account; add and verify it first (Domains in the dashboard, or POST /api/v1/domains then POST /api/v1/domains/{id}/verify)",
    });
    expect(await sendBalance(key)).toBe(100);
  });

  it.each([
    ["an unverified from domain", { from: "a@unverified.example" }, 403, "domain_not_verified"],
    ["a malformed from", { from: "not an address" }, 422, "from"],
    ["a malformed recipient", { to: ["ok@example.net", "bad@@example.net"] }, 422, "to.1"],
    ["51 recipients", { to: Array.from({ length: 51 }, (_, i) => `r${i}@example.net`) }, 422, "to"],
    ["no recipients", { to: [] }, 422, "to"],
    ["CRLF in the subject", { subject: "Hi\r\nBcc: victim@example.net" }, 422, "subject"],
    ["CRLF in the from name", { from: "Acme\r\nBcc: x@y.z <hello@x.com>" }, 422, "from"],
    ["bad base64", { attachments: [{ filename: "a.txt", content: "not*base64!", content_type: "text/plain" }] }, 422, "attachments.0.content"],
    ["a bad content type", { attachments: [{ filename: "a.txt", content: "aGk=", content_type: "text" }] }, 422, "attachments.0.content_type"],
    ["an unknown template_id", { template_id: "tpl_missing", text: undefined }, 422, "template_id"],
    ["no body", { text: undefined }, 422, "html"],
    ["an unknown field", { cc_list: ["x@example.net"] }, 422, "body"],
  ])("refuses %s with a clear error", async (_name, change, status, field) => {
    const { key, from } = await setup();
    const body = { from, to: [rcpt("x")], subject: "Hi", text: "Hello", ...change };
    const response = await call("/api/v1/send", { key, body });
    expect(response.status).toBe(status);
    const error = await json<{ code: string; message: string; errors?: Record<string, string[]> }>(response);
    if (status === 422) expect(Object.keys(error.errors ?? {})).toContain(field);
    else expect(error.code).toBe(field);
    expect(error.message.length).toBeGreaterThan(5);
    expect(await sendBalance(key)).toBe(100);
  });

  it("lists every invalid field at once: a bad recipient, a missing subject and a bad from in one 422", async () => {
    const { key } = await setup();
    const response = await call("/api/v1/send", { key, body: { from: "not an address", to: ["bad@@example.net"], text: "Hello" } });
    expect(response.status).toBe(422);
    const error = await json<{ code: string; errors: Record<string, string[]> }>(response);
    expect(error.code).toBe("validation_failed");
    expect(Object.keys(error.errors).sort()).toEqual(["from", "subject", "to.0"]);
    // Cross-field rules still report when a field has the wrong type.
    const mixed = await json<{ errors: Record<string, string[]> }>(
      await call("/api/v1/send", { key, body: { from: "x", to: ["ok@example.net", 7], tags: "welcome" } }),
    );
    expect(Object.keys(mixed.errors).sort()).toEqual(["from", "html", "subject", "tags", "to.1"]);
    expect(await sendBalance(key)).toBe(100);
  });

  it("accepts a recipient in the display form: the address is the recipient, the name stays in the To header", async () => {
    const { key, from } = await setup();
    const address = rcpt("ann");
    const before = await sendBalance(key);
    const response = await call("/api/v1/send", {
      key,
      body: { from, to: [`Ann Lee <${address}>`, address.toUpperCase().replace("@EXAMPLE.NET", "@example.net")], subject: "Hi", text: "Hello" },
    });
    expect(response.status).toBe(202);
    const accepted = await json(response);
    // One recipient: the second entry is the same address, compared without the name.
    expect(accepted).toMatchObject({ recipients: [{ email: address, status: "queued" }], credits_charged: 1, status: "queued" });
    expect(await sendBalance(key)).toBe(before - 1);
    const message = await eventually(async () => {
      const current = await messageOf(key, accepted.id as string);
      return ["queued", "sending", "deferred"].includes(current.status) ? undefined : current;
    });
    expect(message.status).toBe("sent");
    const [delivered] = await sinkMessagesTo(address);
    expect(delivered!.rcpt_to).toEqual([address]);
    const parsed = await PostalMime.parse(await sinkRaw(delivered!.id));
    expect(parsed.to?.[0]).toEqual({ name: "Ann Lee", address });

    // A suppressed address is found through its display form too, and nothing is charged for it.
    expect((await call("/api/v1/suppressions", { key, body: { email: address, reason: "manual" } })).status).toBe(201);
    const suppressed = await json(await call("/api/v1/send", { key, body: { from, to: [`"Lee, Ann" <${address}>`], subject: "Hi", text: "x" } }));
    expect(suppressed).toMatchObject({ status: "suppressed", credits_charged: 0, recipients: [{ email: address, status: "suppressed" }] });
  });

  it("keeps reply_to's display name, through /send and /send/batch: quoted when it has a comma, RFC 2047-encoded when not ASCII", async () => {
    const { key, from, domain } = await setup();
    const [one, two] = [rcpt("reply"), rcpt("reply")];
    const single = await json(
      await call("/api/v1/send", { key, body: { from, to: [one], reply_to: `"Support, Team" <help@${domain.name}>`, subject: "Hi", text: "x" } }),
    );
    const batch = await call("/api/v1/send/batch", {
      key,
      body: [{ from, to: [two], reply_to: `Équipe Support <aide@${domain.name}>`, subject: "Salut", text: "x" }],
    });
    expect(batch.status).toBe(202);

    const delivered = async (address: string) => {
      const [message] = await eventually(async () => ((await sinkMessagesTo(address)).length > 0 ? sinkMessagesTo(address) : undefined));
      return sinkRaw(message!.id);
    };
    const first = await delivered(one);
    expect(first).toContain(`\r\nReply-To: "Support, Team" <help@${domain.name}>\r\n`);
    expect((await PostalMime.parse(first)).replyTo).toEqual([{ name: "Support, Team", address: `help@${domain.name}` }]);
    const second = await delivered(two);
    expect(second).toMatch(/\r\nReply-To: =\?UTF-8\?B\?[^?]+\?= <aide@/);
    expect((await PostalMime.parse(second)).replyTo).toEqual([{ name: "Équipe Support", address: `aide@${domain.name}` }]);
    // The message record shows what the mail carries.
    expect(await json(await call(`/api/v1/messages/${single.id}`, { key }))).toMatchObject({ reply_to: `"Support, Team" <help@${domain.name}>` });
  });

  it("puts the bare address in the one-click unsubscribe link of a display-form recipient", async () => {
    const { key, from } = await setup();
    const address = rcpt("una");
    const accepted = await json(
      await call("/api/v1/send", { key, body: { from, to: [`Una <${address}>`], subject: "Hi", text: "Hello", stream: "broadcast" } }),
    );
    const [delivered] = await eventually(async () => ((await sinkMessagesTo(address)).length > 0 ? sinkMessagesTo(address) : undefined));
    const parsed = await PostalMime.parse(await sinkRaw(delivered!.id));
    const unsubscribe = parsed.headers.find((header) => header.key === "list-unsubscribe")!.value;
    const path = new URL(unsubscribe.slice(1, -1)).pathname;
    expect(
      (await call(path, { method: "POST", body: "List-Unsubscribe=One-Click", headers: { "Content-Type": "application/x-www-form-urlencoded" } }))
        .status,
    ).toBe(200);
    const again = await json(await call("/api/v1/send", { key, body: { from, to: [address], subject: "again", text: "x", stream: "broadcast" } }));
    expect(again).toMatchObject({ status: "suppressed", credits_charged: 0 });
    expect(accepted.id).not.toBe(again.id);
  });

  it("a transactional message (the default) carries no List-Unsubscribe unless it asks; a receipt's own is kept", async () => {
    const { key, from } = await setup();
    const raw = async (body: Record<string, unknown>) => {
      const to = rcpt("receipt");
      const response = await call("/api/v1/send", { key, body: { from, to: [to], subject: "Your receipt", text: "Paid", ...body } });
      expect(response.status).toBe(202);
      const [delivered] = await eventually(async () => ((await sinkMessagesTo(to)).length > 0 ? sinkMessagesTo(to) : undefined));
      return (await PostalMime.parse(await sinkRaw(delivered!.id))).headers;
    };
    const plain = await raw({});
    expect(plain.some((header) => header.key.startsWith("list-unsubscribe"))).toBe(false);
    const asked = await raw({ unsubscribe: true });
    expect(asked.find((header) => header.key === "list-unsubscribe")?.value).toMatch(/^<http:\/\/127\.0\.0\.1:8787\/u\/[^>]+>$/);
    expect(asked.find((header) => header.key === "list-unsubscribe-post")?.value).toBe("List-Unsubscribe=One-Click");
    // Without the platform's, a transactional message may carry the sender's own.
    const own = await raw({ headers: { "List-Unsubscribe": "<mailto:leave@example.org>" } });
    expect(own.find((header) => header.key === "list-unsubscribe")?.value).toBe("<mailto:leave@example.org>");
    const refused = await call("/api/v1/send", {
      key,
      body: { from, to: [rcpt("x")], subject: "x", text: "x", stream: "broadcast", headers: { "List-Unsubscribe": "<mailto:leave@example.org>" } },
    });
    expect(refused.status).toBe(422);
    const invalid = await call("/api/v1/send", { key, body: { from, to: [rcpt("x")], subject: "x", text: "x", stream: "marketing" } });
    expect(invalid.status).toBe(422);
    expect(Object.keys((await json<{ errors: Record<string, string[]> }>(invalid)).errors)).toEqual(["stream"]);
  });

  it("refuses attachments over 10 MB with 413 and charges nothing", async () => {
    const { key, from } = await setup();
    const big = btoa("x".repeat(3 * 1024 * 1024));
    const response = await call("/api/v1/send", {
      key,
      body: {
        from,
        to: [rcpt("big")],
        subject: "big",
        text: "x",
        attachments: [1, 2, 3, 4].map((i) => ({ filename: `${i}.bin`, content: big, content_type: "application/octet-stream" })),
      },
    });
    expect(response.status).toBe(413);
    expect(await json(response)).toMatchObject({ code: "payload_too_large" });
    expect(await sendBalance(key)).toBe(100);
  });

  it("needs the email_api and smtp_relay features and the send scope", async () => {
    const { account, key, from } = await setup();
    await call(`/admin/v1/accounts/${account.id}`, { key: ADMIN_TOKEN, method: "PATCH", body: { features: ["email_api"] } });
    const refused = await call("/api/v1/send", { key, body: { from, to: [rcpt("f")], subject: "x", text: "x" } });
    expect(refused.status).toBe(403);
    expect(await json(refused)).toMatchObject({ code: "feature_disabled" });
    await call(`/admin/v1/accounts/${account.id}`, { key: ADMIN_TOKEN, method: "PATCH", body: { features: ["email_api", "smtp_relay"] } });
    const verifyOnly = await createKey(key, { name: "v", scopes: ["verify"] });
    expect((await call("/api/v1/send", { key: verifyOnly.key, body: { from, to: [rcpt("f")], subject: "x", text: "x" } })).status).toBe(403);
  });

  it("accepts a send whose recipients are all suppressed without charging, with relay.suppressed events", async () => {
    const { key, from } = await setup();
    const to = rcpt("gone");
    expect((await call("/api/v1/suppressions", { key, body: { email: to.toUpperCase(), reason: "manual" } })).status).toBe(201);
    const response = await call("/api/v1/send", { key, body: { from, to: [to], subject: "x", text: "x" } });
    expect(response.status).toBe(202);
    const accepted = await json(response);
    expect(accepted).toMatchObject({ credits_charged: 0, status: "suppressed", recipients: [{ email: to, status: "suppressed" }] });
    expect(await sendBalance(key)).toBe(100);
    const message = await messageOf(key, accepted.id as string);
    expect(message.status).toBe("suppressed");
    expect(message.events.map((event) => event.type)).toEqual(["relay.suppressed"]);
    // The suppression's own reason, and the message fields every message event carries.
    expect(accepted).toEqual({
      id: accepted.id,
      credits_charged: 0,
      status: "suppressed",
      recipients: [{ email: to, status: "suppressed" }],
      test_mode: false,
    });
    expect(message.events[0]!.data).toMatchObject({ recipient: to, reason: "manual", from, subject: "x", source: "api" });
  });

  it("charges exactly the balance under 50 concurrent sends: 20 accepted, 30 refused with 402, balance 0", async () => {
    const { key, from } = await setup({ send_credits: 20, rate_limit_per_minute: 1000, daily_send_limit: 1000 });
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) => call("/api/v1/send", { key, body: { from, to: [rcpt(`c${i}`)], subject: "x", text: "x" } })),
    );
    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status === 202)).toHaveLength(20);
    expect(statuses.filter((status) => status === 402)).toHaveLength(30);
    const refused = await json(responses.find((response) => response.status === 402)!);
    expect(refused).toMatchObject({ code: "insufficient_credits", message: expect.stringContaining("Not enough sending credits") });
    expect(await sendBalance(key)).toBe(0);
    const me = await json<{ id: string }>(await call("/api/v1/me", { key }));
    const rows = await (await d1OfAccount(me.id))
      .prepare("SELECT count(*) AS n FROM messages WHERE account_id = ?")
      .bind(me.id)
      .first<{ n: number }>();
    expect(rows?.n).toBe(20);
  });

  it("stops at the daily sending limit with 429 and Retry-After until midnight UTC, and does not count refused sends", async () => {
    const { key, from } = await setup({ daily_send_limit: 3, send_credits: 2 });
    expect((await call("/api/v1/send", { key, body: { from, to: [rcpt("d1"), rcpt("d2")], subject: "x", text: "x" } })).status).toBe(202);
    expect((await call("/api/v1/send", { key, body: { from, to: [rcpt("d3")], subject: "x", text: "x" } })).status).toBe(402);
    const { account } = { account: await json<{ id: string }>(await call("/api/v1/me", { key })) };
    await call(`/admin/v1/accounts/${account.id}/credits`, { key: ADMIN_TOKEN, body: { send: 10 } });
    expect((await call("/api/v1/send", { key, body: { from, to: [rcpt("d4")], subject: "x", text: "x" } })).status).toBe(202);
    const before = Date.now();
    const limited = await call("/api/v1/send", { key, body: { from, to: [rcpt("d5")], subject: "x", text: "x" } });
    const after = Date.now();
    expect(limited.status).toBe(429);
    expect(await json(limited)).toMatchObject({ code: "daily_limit_reached" });
    const retryAfter = Number(limited.headers.get("Retry-After"));
    const midnight = new Date();
    midnight.setUTCHours(24, 0, 0, 0);
    // Whole seconds from some moment during the request until midnight.
    expect(retryAfter).toBeGreaterThanOrEqual(Math.floor((midnight.getTime() - after) / 1000));
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil((midnight.getTime() - before) / 1000));
  });

  it("keeps the content of a message over 64 KB in R2 only for a stored message: refusals and a lost race leave no object", async () => {
    const { key, from } = await setup({ daily_send_limit: 4, send_credits: 1 });
    const me = await json<{ id: string }>(await call("/api/v1/me", { key }));
    // The content objects (`.json`); a delivered message's raw source (`.eml`) is another matter.
    const contentObjects = async () =>
      (await env.BLOBS.list({ prefix: "messages/" })).objects
        .map((object) => object.key)
        .filter((key) => key.endsWith(".json"))
        .sort();
    const large = (to: string[]) => ({ from, to, subject: "large", html: `<p>${"x".repeat(70_000)}</p>` });
    const before = await contentObjects();

    const unpaid = await call("/api/v1/send", { key, body: large([rcpt("r2a"), rcpt("r2b")]) });
    expect(unpaid.status).toBe(402);
    expect(await contentObjects()).toEqual(before);

    await call(`/admin/v1/accounts/${me.id}/credits`, { key: ADMIN_TOKEN, body: { send: 10 } });
    // Two requests with one Idempotency-Key at once: one message, and at most the loser's object, which it deletes.
    const headers = { "Idempotency-Key": "large-once" };
    const body = large([rcpt("r2c"), rcpt("r2d")]);
    const [first, second] = await Promise.all([call("/api/v1/send", { key, body, headers }), call("/api/v1/send", { key, body, headers })]);
    expect([first.status, second.status]).toEqual([202, 202]);
    const accepted = await json<{ id: string }>(first);
    expect((await json<{ id: string }>(second)).id).toBe(accepted.id);
    expect(await contentObjects()).toEqual([...before, `messages/${accepted.id}.json`].sort());

    // 2 of the day's 4 recipients are used: refused after the content was composed, before anything was written.
    const limited = await call("/api/v1/send", { key, body: large([rcpt("r2e"), rcpt("r2f"), rcpt("r2g")]) });
    expect(limited.status).toBe(429);
    expect(await json(limited)).toMatchObject({ code: "daily_limit_reached" });
    expect(await contentObjects()).toEqual([...before, `messages/${accepted.id}.json`].sort());
    const stored = await (await d1OfAccount(me.id)).prepare("SELECT id, content_key FROM messages WHERE account_id = ?").bind(me.id).all();
    expect(stored.results).toEqual([{ id: accepted.id, content_key: `messages/${accepted.id}.json` }]);
  });

  it("replays the first response for the same Idempotency-Key and body, 409 for another body", async () => {
    const { key, from } = await setup();
    const body = { from, to: [rcpt("idem")], subject: "once", text: "x" };
    const headers = { "Idempotency-Key": "order-1042" };
    const [first, second] = await Promise.all([call("/api/v1/send", { key, body, headers }), call("/api/v1/send", { key, body, headers })]);
    expect(first.status).toBe(202);
    expect(second.status).toBe(202);
    const [a, b] = [await json(first), await json(second)];
    expect(a.id).toBe(b.id);
    expect(await sendBalance(key)).toBe(99);
    const third = await call("/api/v1/send", { key, body, headers });
    expect(third.headers.get("Idempotent-Replayed")).toBe("true");
    expect((await json(third)).id).toBe(a.id);
    const conflict = await call("/api/v1/send", { key, body: { ...body, subject: "changed" }, headers });
    expect(conflict.status).toBe(409);
    expect(await json(conflict)).toMatchObject({ code: "idempotency_conflict" });
  });

  it("never replays a test key's answer for a live key with the same Idempotency-Key", async () => {
    const { key, from } = await setup();
    const testKey = await createKey(key, { name: "sandbox", mode: "test" });
    const body = { from, to: [rcpt("idem-mode")], subject: "once", text: "x" };
    const headers = { "Idempotency-Key": "order-7" };
    const simulated = await json(await call("/api/v1/send", { key: testKey.key, body, headers }));
    expect(simulated).toMatchObject({ test_mode: true, credits_charged: 0 });
    const live = await call("/api/v1/send", { key, body, headers });
    expect(live.status).toBe(202);
    expect(live.headers.get("Idempotent-Replayed")).toBeNull();
    const liveAnswer = await json(live);
    expect(liveAnswer).toMatchObject({ test_mode: false, credits_charged: 1 });
    // The live key's own retry replays the live answer.
    const retried = await call("/api/v1/send", { key, body, headers });
    expect(retried.headers.get("Idempotent-Replayed")).toBe("true");
    expect((await json(retried)).id).toBe(liveAnswer.id);
  });

  it("applies the 1 MB body cap to /senders (the 15 MB cap is /send's alone)", async () => {
    const { key } = await setup();
    const response = await call("/api/v1/senders", { key, body: { name: "x".repeat(2 * 1024 * 1024), email: "a@b.test" } });
    expect(response.status).toBe(413);
    expect(response.headers.get("X-Request-Id")).toMatch(/^req_/);
    expect(await json(response)).toEqual({ code: "payload_too_large", message: "The request body is larger than this endpoint accepts (1 MB)" });
  });
});

describe("test mode", () => {
  it("sk_test_ keys simulate each outcome by recipient, never deliver and never charge", async () => {
    const { key, from } = await setup();
    const testKey = await createKey(key, { name: "sandbox", mode: "test" });
    const delivered = `delivered-${crypto.randomUUID().slice(0, 6)}@example.net`;
    const response = await call("/api/v1/send", {
      key: testKey.key,
      body: { from, to: [delivered, "bounced@example.net", "complained@example.net"], subject: "sandbox", text: "x" },
    });
    expect(response.status).toBe(202);
    const accepted = await json(response);
    expect(accepted).toMatchObject({ credits_charged: 0, test_mode: true });
    const message = await eventually(async () => {
      const current = await messageOf(key, accepted.id as string);
      return ["queued", "sending"].includes(current.status) ? undefined : current;
    });
    expect(message.status).toBe("delivered");
    expect(Object.fromEntries(message.recipients.map((r) => [r.email.split("-")[0]!.split("@")[0], r.status]))).toEqual({
      delivered: "delivered",
      bounced: "bounced",
      complained: "delivered",
    });
    expect(message.events.map((event) => event.type).sort()).toEqual([
      "relay.bounced",
      "relay.complained",
      "relay.delivered",
      "relay.delivered",
      "relay.sent",
    ]);
    expect(await sinkMessagesTo(delivered)).toEqual([]);
    expect(await sendBalance(key)).toBe(100);
  });
});

describe("GET /messages", () => {
  it("filters by status, recipient, tag and date, paginates with a cursor, and hides other accounts' messages", async () => {
    const { key, from } = await setup();
    const alice = rcpt("alice");
    for (let i = 0; i < 3; i++)
      await call("/api/v1/send", {
        key,
        body: { from, to: [i === 0 ? alice : rcpt(`m${i}`)], subject: `m${i}`, text: "x", tags: i === 1 ? ["promo"] : [] },
      });
    const page1 = await json<{ data: { subject: string }[]; has_more: boolean; next_cursor: string }>(
      await call("/api/v1/messages?limit=2", { key }),
    );
    expect(page1.data.map((m) => m.subject)).toEqual(["m2", "m1"]);
    expect(page1.has_more).toBe(true);
    const page2 = await json<{ data: { subject: string }[]; has_more: boolean }>(
      await call(`/api/v1/messages?limit=2&cursor=${page1.next_cursor}`, { key }),
    );
    expect(page2.data.map((m) => m.subject)).toEqual(["m0"]);
    expect(page2.has_more).toBe(false);
    expect(
      (await json<{ data: { subject: string }[] }>(await call(`/api/v1/messages?to=${encodeURIComponent(alice.toUpperCase())}`, { key }))).data.map(
        (m) => m.subject,
      ),
    ).toEqual(["m0"]);
    expect((await json<{ data: { subject: string }[] }>(await call("/api/v1/messages?tag=promo", { key }))).data.map((m) => m.subject)).toEqual([
      "m1",
    ]);
    const today = new Date().toISOString().slice(0, 10);
    expect(
      (await json<{ data: unknown[] }>(await call(`/api/v1/messages?created_after=${today}&created_before=${today}`, { key }))).data,
    ).toHaveLength(3);
    expect((await json<{ data: unknown[] }>(await call("/api/v1/messages?created_before=2000-01-01", { key }))).data).toHaveLength(0);
    expect((await call("/api/v1/messages?cursor=garbage", { key })).status).toBe(422);
    expect((await call("/api/v1/messages?status=lost", { key })).status).toBe(422);

    const other = await createAccount();
    expect((await json<{ data: unknown[] }>(await call("/api/v1/messages", { key: other.api_key }))).data).toEqual([]);
    const id = (await json<{ data: { id: string }[] }>(await call("/api/v1/messages?limit=1", { key }))).data[0]!.id;
    expect((await call(`/api/v1/messages/${id}`, { key: other.api_key })).status).toBe(404);
  });
});
