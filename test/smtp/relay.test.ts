import { env, exports } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import { signBridgeRequest } from "@mailforge/bridge-contract";
import { ADMIN_TOKEN, call, createAccount, d1Of, json } from "../support/helpers";
import { eventually, messageOf, sendBalance, sinkMessagesTo, sinkRaw, verifiedDomain } from "../support/sending";

// The internal relay API as the SMTP bridge calls it: every request signed with BRIDGE_SECRET.

const BRIDGE_SECRET = "test-bridge-secret";

const signed = (path: string, body: string, options: { secret?: string; t?: number } = {}) =>
  signBridgeRequest(options.secret ?? BRIDGE_SECRET, { method: "POST", path: `/internal/relay${path}`, body }, options.t);

async function relay(path: string, payload: unknown, options: { secret?: string; t?: number; header?: string | null } = {}): Promise<Response> {
  const body = JSON.stringify(payload);
  const header = options.header === undefined ? await signed(path, body, options) : options.header;
  return call(`/internal/relay${path}`, { body, headers: header === null ? {} : { "X-Bridge-Signature": header } });
}

async function accountWithCredential(overrides: Record<string, unknown> = {}, credentialBody: Record<string, unknown> = {}) {
  const account = await createAccount({ send_credits: 100, ...overrides });
  const created = await call("/api/v1/smtp-credentials", { key: account.api_key, body: { name: "relay", ...credentialBody } });
  expect(created.status).toBe(201);
  const credential = await json<{ id: string; username: string; password: string }>(created);
  return { account, credential };
}

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

function base64(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}

describe("the bridge signature", () => {
  it("is required, must match the body and BRIDGE_SECRET, and expires after 300 s", async () => {
    const { credential } = await accountWithCredential();
    const payload = { username: credential.username, password: credential.password };
    // margins of 10 s either side of the 300 s tolerance, so a slow run cannot move a case across the boundary
    const now = Math.floor(Date.now() / 1000);
    expect((await relay("/auth", payload)).status).toBe(200);
    expect((await relay("/auth", payload, { t: now - 290 })).status).toBe(200);

    const refusals = [
      await relay("/auth", payload, { header: null }),
      await relay("/auth", payload, { secret: "not-the-bridge-secret" }),
      await relay("/auth", payload, { t: now - 310 }),
      await relay("/auth", payload, { t: now + 310 }),
      await relay("/auth", payload, { header: "t=abc,v2=00" }),
      // signed for one body, sent with another
      await call("/internal/relay/auth", {
        body: JSON.stringify({ ...payload, username: "smtp_someoneelse" }),
        headers: { "X-Bridge-Signature": await signed("/auth", JSON.stringify(payload)) },
      }),
      // the v1 scheme's header (`<t>.<body>`, no request line), which a bridge older than the Worker would send
      await relay("/auth", payload, { header: `t=${now},v1=${"0".repeat(64)}` }),
    ];
    for (const response of refusals) {
      expect(response.status).toBe(401);
      expect(await json(response)).toMatchObject({ code: "bridge_signature_refused" });
    }
  });

  it("is good for the route it was made for only: a captured request replayed to another relay route is refused", async () => {
    const { account, credential } = await accountWithCredential();
    const domain = await verifiedDomain(account.api_key);
    const replayTo = async (path: string, captured: { body: string; header: string }) =>
      call(`/internal/relay${path}`, { body: captured.body, headers: { "X-Bridge-Signature": captured.header } });
    const capture = async (path: string, payload: unknown) => {
      const body = JSON.stringify(payload);
      return { body, header: await signed(path, body) };
    };

    const auth = await capture("/auth", { username: credential.username, password: credential.password });
    // A /messages body also satisfies /sender's schema (extra fields are ignored): only the signature tells them apart.
    const message = await capture("/messages", {
      credential_id: credential.id,
      mail_from: `app@${domain.name}`,
      rcpt_to: [rcpt("replayed")],
      raw: base64(`From: app@${domain.name}\r\nSubject: captured\r\n\r\nbody\r\n`),
    });
    for (const [path, captured] of [
      ["/messages", auth],
      ["/sender", auth],
      ["/sender", message],
      ["/auth", message],
    ] as const) {
      const response = await replayTo(path, captured);
      expect(response.status).toBe(401);
      expect(await json(response)).toMatchObject({ code: "bridge_signature_refused" });
    }
    // on the route it was signed for, the same request is accepted
    expect((await replayTo("/auth", auth)).status).toBe(200);
    expect((await replayTo("/messages", message)).status).toBe(202);
    expect(await sendBalance(account.api_key)).toBe(99);
  });

  it("is not an API key route: a Bearer key does not get in", async () => {
    const { account } = await accountWithCredential();
    const response = await call("/internal/relay/auth", { key: account.api_key, body: { username: "x", password: "y" } });
    expect(response.status).toBe(401);
  });
});

describe("POST /internal/relay/auth", () => {
  it("answers the credential, its account and the recipient cap for a valid username and password, and records last use", async () => {
    const { account, credential } = await accountWithCredential();
    const response = await relay("/auth", { username: credential.username, password: credential.password });
    expect(response.status).toBe(200);
    expect(await json(response)).toEqual({ credential_id: credential.id, account_id: account.id, mode: "live", max_recipients: 50 });
    const listed = await eventually(async () => {
      const list = await json<{ data: { last_used_at: string | null }[] }>(await call("/api/v1/smtp-credentials", { key: account.api_key }));
      return list.data[0]?.last_used_at ?? undefined;
    });
    expect(listed).toMatch(/^\d{4}-/);
  });

  it("refuses a wrong password, an unknown username and a revoked credential with 401", async () => {
    const { account, credential } = await accountWithCredential();
    expect((await relay("/auth", { username: credential.username, password: `${credential.password}x` })).status).toBe(401);
    expect((await relay("/auth", { username: "smtp_doesnotexist0000000", password: credential.password })).status).toBe(401);
    expect((await call(`/api/v1/smtp-credentials/${credential.id}`, { key: account.api_key, method: "DELETE" })).status).toBe(200);
    const revoked = await relay("/auth", { username: credential.username, password: credential.password });
    expect(revoked.status).toBe(401);
    expect(await json(revoked)).toMatchObject({ code: "unauthorized" });
  });

  it("answers 422 for a body without the fields", async () => {
    expect((await relay("/auth", { username: "" })).status).toBe(422);
  });
});

describe("POST /internal/relay/sender", () => {
  it("accepts a MAIL FROM on a verified domain of the account", async () => {
    const { account, credential } = await accountWithCredential();
    const domain = await verifiedDomain(account.api_key);
    const response = await relay("/sender", { credential_id: credential.id, mail_from: `App@${domain.name.toUpperCase()}` });
    expect(response.status).toBe(200);
    expect(await json(response)).toMatchObject({
      credential_id: credential.id,
      account_id: account.id,
      domain: { id: domain.id, name: domain.name },
    });
  });

  it("refuses an unverified domain, and another account's verified domain, with 403 domain_not_verified", async () => {
    const { credential } = await accountWithCredential();
    const other = await createAccount();
    const othersDomain = await verifiedDomain(other.api_key);
    for (const mailFrom of ["app@nowhere.example", `app@${othersDomain.name}`]) {
      const response = await relay("/sender", { credential_id: credential.id, mail_from: mailFrom });
      expect(response.status).toBe(403);
      expect(await json(response)).toMatchObject({
        code: "domain_not_verified",
        message: `The domain ${mailFrom.split("@")[1]} is not a verified sending domain of this account; add and verify it first (Domains in the dashboard, or POST /api/v1/domains then POST /api/v1/domains/{id}/verify)`,
      });
    }
  });

  it("refuses an account without smtp_relay with 403 feature_disabled", async () => {
    const { account, credential } = await accountWithCredential();
    const domain = await verifiedDomain(account.api_key);
    const patched = await call(`/admin/v1/accounts/${account.id}`, { key: ADMIN_TOKEN, method: "PATCH", body: { features: ["email_api"] } });
    expect(patched.status).toBe(200);
    const response = await relay("/sender", { credential_id: credential.id, mail_from: `app@${domain.name}` });
    expect(response.status).toBe(403);
    expect(await json(response)).toMatchObject({ code: "feature_disabled", message: expect.stringContaining("smtp_relay") });
  });

  it("refuses a revoked or unknown credential with 401", async () => {
    const { account, credential } = await accountWithCredential();
    const domain = await verifiedDomain(account.api_key);
    await call(`/api/v1/smtp-credentials/${credential.id}`, { key: account.api_key, method: "DELETE" });
    expect((await relay("/sender", { credential_id: credential.id, mail_from: `app@${domain.name}` })).status).toBe(401);
    expect((await relay("/sender", { credential_id: "smtp_unknown", mail_from: `app@${domain.name}` })).status).toBe(401);
  });
});

describe("POST /internal/relay/messages", () => {
  it("accepts raw MIME into the send pipeline (202) and delivers it with the user's headers kept and a DKIM signature added", async () => {
    const { account, credential } = await accountWithCredential();
    const domain = await verifiedDomain(account.api_key);
    const to = rcpt("relay");
    const raw = [
      `From: Acme <app@${domain.name}>`,
      `To: <${to}>`,
      "Subject: Relayed",
      `Message-ID: <relay-1@${domain.name}>`,
      "Reply-To: support@example.org",
      "X-Custom-Trace: keep-me",
      "MIME-Version: 1.0",
      "Content-Type: text/plain; charset=utf-8",
      "",
      "Hello through the relay",
      "",
    ].join("\r\n");
    const response = await relay("/messages", { credential_id: credential.id, mail_from: `app@${domain.name}`, rcpt_to: [to], raw: base64(raw) });
    expect(response.status).toBe(202);
    const accepted = await json<{ id: string; recipients: unknown; credits_charged: number; status: string }>(response);
    expect(accepted).toMatchObject({ id: expect.stringMatching(/^msg_/), credits_charged: 1, status: "queued" });

    const message = await json<{ source: string; subject: string }>(await call(`/api/v1/messages/${accepted.id}`, { key: account.api_key }));
    expect(message).toMatchObject({ source: "smtp", subject: "Relayed" });

    const [delivered] = await eventually(async () => {
      const found = await sinkMessagesTo(to);
      return found.length > 0 ? found : undefined;
    });
    const received = await sinkRaw(delivered?.id ?? "");
    expect(received).toMatch(/^DKIM-Signature: /);
    expect(received).toContain(`Message-ID: <relay-1@${domain.name}>`);
    expect(received).toContain("X-Custom-Trace: keep-me");
    expect(received).toContain("Hello through the relay");
  });

  it("keeps the display name of Reply-To, in the mail delivered and on the message record", async () => {
    const { account, credential } = await accountWithCredential();
    const domain = await verifiedDomain(account.api_key);
    const to = rcpt("reply");
    const raw = [`From: app@${domain.name}`, `To: ${to}`, "Subject: Replies", `Reply-To: "Support, Team" <help@${domain.name}>`, "", "Hi", ""];
    const response = await relay("/messages", {
      credential_id: credential.id,
      mail_from: `app@${domain.name}`,
      rcpt_to: [to],
      raw: base64(raw.join("\r\n")),
    });
    const accepted = await json<{ id: string }>(response);
    const [delivered] = await eventually(async () => ((await sinkMessagesTo(to)).length > 0 ? sinkMessagesTo(to) : undefined));
    expect((await PostalMime.parse(await sinkRaw(delivered!.id))).replyTo).toEqual([{ name: "Support, Team", address: `help@${domain.name}` }]);
    expect(await json(await call(`/api/v1/messages/${accepted.id}`, { key: account.api_key }))).toMatchObject({
      reply_to: `"Support, Team" <help@${domain.name}>`,
    });
  });

  it("holds a credential to the account's per-minute rate limit: 429 with Retry-After", async () => {
    const { account, credential } = await accountWithCredential();
    const domain = await verifiedDomain(account.api_key);
    const patched = await call(`/admin/v1/accounts/${account.id}`, { key: ADMIN_TOKEN, method: "PATCH", body: { rate_limit_per_minute: 2 } });
    expect(patched.status).toBe(200);
    const to = rcpt("limited");
    // three different messages: the same bytes again would be the first message's retry
    const payload = (n: number) => ({
      credential_id: credential.id,
      mail_from: `app@${domain.name}`,
      rcpt_to: [to],
      raw: base64(`From: app@${domain.name}\r\nTo: ${to}\r\nSubject: x${n}\r\n\r\nbody\r\n`),
    });
    expect((await relay("/messages", payload(1))).status).toBe(202);
    expect((await relay("/messages", payload(2))).status).toBe(202);
    const limited = await relay("/messages", payload(3));
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("Retry-After"))).toBeGreaterThan(0);
    expect(await json(limited)).toMatchObject({ code: "rate_limited" });
  });

  it("answers 402 when the account has no credits, 401 for a revoked credential, 422 for bad input", async () => {
    const { account, credential } = await accountWithCredential({ send_credits: 0 });
    const domain = await verifiedDomain(account.api_key);
    const to = rcpt("broke");
    const payload = {
      credential_id: credential.id,
      mail_from: `app@${domain.name}`,
      rcpt_to: [to],
      raw: base64(`From: app@${domain.name}\r\nTo: ${to}\r\nSubject: x\r\n\r\nbody\r\n`),
    };
    const broke = await relay("/messages", payload);
    expect(broke.status).toBe(402);
    expect(await json(broke)).toMatchObject({ code: "insufficient_credits" });

    expect((await relay("/messages", { ...payload, raw: "not base64!" })).status).toBe(422);
    expect((await relay("/messages", { ...payload, rcpt_to: [] })).status).toBe(422);
    // One recipient cap for every door: the API's 50, not the 1,000 this route once allowed.
    const crowd = await relay("/messages", { ...payload, rcpt_to: Array.from({ length: 51 }, (_, i) => `r${i}@example.net`) });
    expect(crowd.status).toBe(422);
    expect((await json<{ errors: Record<string, string[]> }>(crowd)).errors).toHaveProperty("rcpt_to");

    await call(`/api/v1/smtp-credentials/${credential.id}`, { key: account.api_key, method: "DELETE" });
    expect((await relay("/messages", payload)).status).toBe(401);
    const rows = await d1Of(account).prepare("SELECT COUNT(*) AS n FROM messages WHERE account_id = ?").bind(account.id).first<{ n: number }>();
    expect(rows?.n).toBe(0);
  });
});

describe("a submission sent again", () => {
  async function setup() {
    const { account, credential } = await accountWithCredential();
    const domain = await verifiedDomain(account.api_key);
    const to = rcpt("retried");
    const raw = [
      `From: app@${domain.name}`,
      `To: ${to}`,
      "Subject: sent once",
      `Message-ID: <${crypto.randomUUID()}@${domain.name}>`,
      `Date: ${new Date().toUTCString()}`,
      "",
      "body",
      "",
    ].join("\r\n");
    const payload = { credential_id: credential.id, mail_from: `app@${domain.name}`, rcpt_to: [to], raw: base64(raw) };
    const messagesOf = async () =>
      (await d1Of(account).prepare("SELECT id FROM messages WHERE account_id = ? ORDER BY id").bind(account.id).all<{ id: string }>()).results.map(
        (row) => row.id,
      );
    const charges = async () =>
      (
        await d1Of(account)
          .prepare("SELECT reference_id, amount FROM credit_ledger WHERE account_id = ? AND kind = 'charge'")
          .bind(account.id)
          .all<{ reference_id: string; amount: number }>()
      ).results;
    return { account, credential, domain, to, raw, payload, messagesOf, charges };
  }

  it("after the first answer was lost, answers with the first message: same id, replayed, one charge, one delivery", async () => {
    const { account, to, payload, messagesOf, charges } = await setup();
    const first = await relay("/messages", payload);
    expect(first.status).toBe(202);
    const accepted = await json<{ id: string }>(first);
    expect(accepted).toMatchObject({ credits_charged: 1, replayed: false });

    // the client's retry: the same bytes, signed afresh by the bridge
    const retried = await relay("/messages", payload);
    expect(retried.status).toBe(202);
    expect(await json(retried)).toEqual({ ...accepted, replayed: true });
    expect(await messagesOf()).toEqual([accepted.id]);
    expect(await charges()).toEqual([{ reference_id: accepted.id, amount: -1 }]);
    expect(await sendBalance(account.api_key)).toBe(99);
    const delivered = await eventually(async () => {
      const found = await sinkMessagesTo(to);
      return found.length > 0 ? found : undefined;
    });
    expect(delivered).toHaveLength(1);
  });

  it("a captured request replayed within the signature's window is the same submission: nothing new is stored", async () => {
    const { payload, messagesOf, charges } = await setup();
    const body = JSON.stringify(payload);
    const header = await signed("/messages", body);
    const send = () => call("/internal/relay/messages", { body, headers: { "X-Bridge-Signature": header } });
    const first = await json<{ id: string }>(await send());
    const replayed = await send();
    expect(replayed.status).toBe(202);
    expect(await json(replayed)).toMatchObject({ id: first.id, replayed: true });
    expect(await messagesOf()).toEqual([first.id]);
    expect(await charges()).toHaveLength(1);
  });

  it("two identical submissions at the same time store one message, charge once and leave one content object in R2", async () => {
    const { domain, to, payload, messagesOf, charges } = await setup();
    // over 64 KB, so the content goes to R2 and a losing duplicate must delete what it wrote
    const large = base64(
      [
        `From: app@${domain.name}`,
        `To: ${to}`,
        "Subject: large",
        `Message-ID: <${crypto.randomUUID()}@${domain.name}>`,
        "",
        "x".repeat(80_000),
        "",
      ].join("\r\n"),
    );
    // The content objects (`.json`), not the raw sources delivery keeps (`.eml`).
    const contentObjects = async () =>
      (await env.BLOBS.list({ prefix: "messages/" })).objects.map((object) => object.key).filter((key) => key.endsWith(".json"));
    const before = await contentObjects();
    const answers = await Promise.all([relay("/messages", { ...payload, raw: large }), relay("/messages", { ...payload, raw: large })]);
    expect(answers.map((answer) => answer.status)).toEqual([202, 202]);
    const [a, b] = await Promise.all(answers.map((answer) => json<{ id: string; replayed: boolean }>(answer)));
    expect(a!.id).toBe(b!.id);
    expect([a!.replayed, b!.replayed].sort()).toEqual([false, true]);
    expect(await messagesOf()).toEqual([a!.id]);
    expect(await charges()).toEqual([{ reference_id: a!.id, amount: -1 }]);
    expect((await contentObjects()).filter((key) => !before.includes(key))).toEqual([`messages/${a!.id}.json`]);
  });

  it("is a new message when anything differs: the bytes, the envelope or the credential", async () => {
    const { account, domain, raw, payload, messagesOf, charges } = await setup();
    const other = await json<{ id: string }>(await call("/api/v1/smtp-credentials", { key: account.api_key, body: { name: "second" } }));
    const variants = [
      payload,
      { ...payload, raw: base64(raw.replace("body", "body!")) },
      { ...payload, rcpt_to: [...payload.rcpt_to, rcpt("added")] },
      { ...payload, mail_from: `bounces@${domain.name}` },
      { ...payload, credential_id: other.id },
    ];
    const ids = [];
    for (const variant of variants) {
      const response = await relay("/messages", variant);
      expect(response.status).toBe(202);
      const answer = await json<{ id: string; replayed: boolean }>(response);
      expect(answer.replayed).toBe(false);
      ids.push(answer.id);
    }
    expect(new Set(ids).size).toBe(variants.length);
    expect(await messagesOf()).toHaveLength(variants.length);
    expect(await charges()).toHaveLength(variants.length);
  });
});

describe("test-mode SMTP credentials", () => {
  it("a credential created by a test key relays in test mode: accepted, simulated, never delivered, never charged", async () => {
    const account = await createAccount({ send_credits: 100 });
    const domain = await verifiedDomain(account.api_key);
    const testKey = await json<{ key: string }>(await call("/api/v1/api-keys", { key: account.api_key, body: { name: "sandbox", mode: "test" } }));
    const created = await call("/api/v1/smtp-credentials", { key: testKey.key, body: { name: "staging" } });
    expect(created.status).toBe(201);
    const credential = await json<{ id: string; username: string; password: string; mode: string }>(created);
    expect(credential.mode).toBe("test");

    const auth = await relay("/auth", { username: credential.username, password: credential.password });
    expect(await json(auth)).toMatchObject({ credential_id: credential.id, mode: "test" });

    const to = rcpt("sandboxed");
    const response = await relay("/messages", {
      credential_id: credential.id,
      mail_from: `app@${domain.name}`,
      rcpt_to: [to, "bounced@example.net"],
      raw: base64(`From: app@${domain.name}\r\nTo: ${to}\r\nSubject: sandbox\r\n\r\nbody\r\n`),
    });
    expect(response.status).toBe(202);
    const accepted = await json<{ id: string }>(response);
    expect(accepted).toMatchObject({ credits_charged: 0, test_mode: true, status: "queued" });

    const message = await eventually(async () => {
      const current = await messageOf(account.api_key, accepted.id);
      return ["queued", "sending"].includes(current.status) ? undefined : current;
    });
    expect(Object.fromEntries(message.recipients.map((recipient) => [recipient.email, recipient.status]))).toEqual({
      [to]: "delivered",
      "bounced@example.net": "bounced",
    });
    expect(await sinkMessagesTo(to)).toEqual([]);
    expect(await sendBalance(account.api_key)).toBe(100);
  });
});

describe("From, Sender and Bcc of relayed messages", () => {
  async function setup() {
    const { account, credential } = await accountWithCredential();
    const domain = await verifiedDomain(account.api_key);
    const send = (headers: string[], to = rcpt("header")) =>
      relay("/messages", {
        credential_id: credential.id,
        mail_from: `app@${domain.name}`,
        rcpt_to: [to],
        raw: base64([...headers, `To: ${to}`, "Subject: headers", "", "body", ""].join("\r\n")),
      });
    const stored = async () =>
      (await d1Of(account).prepare("SELECT COUNT(*) AS n FROM messages WHERE account_id = ?").bind(account.id).first<{ n: number }>())?.n;
    return { account, credential, domain, send, stored };
  }

  it("refuses two From header fields with 403 (550 5.7.1 at the bridge), even when both are on the verified domain", async () => {
    const { domain, send, stored } = await setup();
    for (const second of [`From: ceo@${domain.name}`, "from: ceo@bank.example", `FROM:\r\n ceo@bank.example`]) {
      const response = await send([`From: app@${domain.name}`, second]);
      expect(response.status).toBe(403);
      expect(await json(response)).toEqual({ code: "forbidden", message: "The message has 2 From header fields; exactly one is allowed" });
    }
    expect(await stored()).toBe(0);
  });

  it("refuses a From with several mailboxes unless every one is on a verified domain of the account", async () => {
    const { account, domain, send, stored } = await setup();
    // A group of one foreign address has no plain From address for the pipeline to check: each member is checked.
    for (const from of [
      `From: app@${domain.name}, ceo@bank.example`,
      `From: Team: app@${domain.name},\r\n "x" <ceo@bank.example>;`,
      "From: Support: ceo@bank.example;",
      "From: x:;, ceo@bank.example",
    ]) {
      const response = await send([from]);
      expect(response.status).toBe(403);
      expect(await json(response)).toMatchObject({ code: "domain_not_verified", message: expect.stringContaining("ceo@bank.example") });
    }
    expect(await stored()).toBe(0);

    const second = await verifiedDomain(account.api_key);
    expect((await send([`From: app@${domain.name}, Ann <ann@${second.name.toUpperCase()}>`])).status).toBe(202);
  });

  it("refuses a Sender on a domain that is not a verified domain of the account", async () => {
    const { domain, send, stored } = await setup();
    const other = await createAccount();
    const othersDomain = await verifiedDomain(other.api_key);
    for (const sender of ["Sender: relay@bank.example", `Sender: relay@${othersDomain.name}`]) {
      const response = await send([`From: app@${domain.name}`, sender]);
      expect(response.status).toBe(403);
      expect(await json(response)).toMatchObject({ code: "domain_not_verified" });
    }
    expect(await stored()).toBe(0);
    expect((await send([`From: app@${domain.name}`, `Sender: relay@${domain.name}`])).status).toBe(202);
  });

  it("removes Bcc fields, folded lines included, and delivers every other byte as received", async () => {
    const { credential, domain } = await setup();
    const to = rcpt("visible");
    const hidden = rcpt("hidden");
    const kept = (lines: string[]) => lines.join("\r\n");
    const head = [`From: app@${domain.name}`, `To: ${to}`];
    const middle = ["Subject: blind copy", `Message-ID: <bcc-1@${domain.name}>`, "Date: Mon, 2 Feb 2026 10:00:00 +0000"];
    const tail = ["X-Not-Bcc: bcc: stays", "MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8", "", "Bcc: in the body stays", ""];
    const raw = kept([...head, `Bcc: ${hidden},`, ` other@example.net`, ...middle, `bcc :\t${hidden}`, ...tail]);
    const response = await relay("/messages", {
      credential_id: credential.id,
      mail_from: `app@${domain.name}`,
      rcpt_to: [to, hidden],
      raw: base64(raw),
    });
    expect(response.status).toBe(202);

    for (const recipient of [to, hidden]) {
      const [delivered] = await eventually(async () => {
        const found = await sinkMessagesTo(recipient);
        return found.length > 0 ? found : undefined;
      });
      const received = await sinkRaw(delivered?.id ?? "");
      expect(received).toMatch(/^DKIM-Signature: /);
      expect(received.endsWith(kept([...head, ...middle, ...tail]))).toBe(true);
      expect(received).not.toContain(hidden);
    }
  });

  it("tracks opens and clicks only when the message opts in with X-Mailforge-Track, keeping its parts and headers", async () => {
    const { account, credential, domain } = await setup();
    const mime = (to: string, optIn: string[]) =>
      [
        `From: Acme <app@${domain.name}>`,
        `To: <${to}>`,
        "Subject: Relayed and tracked",
        `Message-ID: <tracked-${to}>`,
        "In-Reply-To: <earlier@example.org>",
        "X-Custom-Trace: keep-me",
        // A header only receivers may write: the rebuilt message leaves it out rather than fail to be tracked.
        "Authentication-Results: forged.example; dkim=pass",
        ...optIn,
        "MIME-Version: 1.0",
        'Content-Type: multipart/mixed; boundary="outer"',
        "",
        "--outer",
        'Content-Type: multipart/alternative; boundary="alt"',
        "",
        "--alt",
        "Content-Type: text/plain; charset=utf-8",
        "",
        "Read https://shop.example/plain",
        "--alt",
        "Content-Type: text/html; charset=utf-8",
        "Content-Transfer-Encoding: quoted-printable",
        "",
        '<html><body><p><a href=3D"https://shop.example/sale">Sale</a></p></body></html>',
        "--alt--",
        "--outer",
        'Content-Type: text/csv; name="prices.csv"',
        'Content-Disposition: attachment; filename="prices.csv"',
        "Content-Transfer-Encoding: base64",
        "",
        base64("sku,price\n1,9.90\n"),
        "--outer--",
        "",
      ].join("\r\n");
    const deliver = async (to: string, optIn: string[]) => {
      const response = await relay("/messages", {
        credential_id: credential.id,
        mail_from: `app@${domain.name}`,
        rcpt_to: [to],
        raw: base64(mime(to, optIn)),
      });
      expect(response.status).toBe(202);
      const [delivered] = await eventually(async () => {
        const found = await sinkMessagesTo(to);
        return found.length > 0 ? found : undefined;
      });
      return { id: (await json<{ id: string }>(response)).id, received: await sinkRaw(delivered?.id ?? "") };
    };

    const plain = await deliver(rcpt("untracked"), []);
    expect(plain.received).toContain('href=3D"https://shop.example/sale"');
    expect(plain.received).not.toContain("/t/o/");

    const to = rcpt("tracked");
    const tracked = await deliver(to, ["X-Mailforge-Track: opens, clicks"]);
    const parsed = await PostalMime.parse(tracked.received);
    expect(parsed.html).toMatch(/<a href="http:\/\/127\.0\.0\.1:8787\/t\/c\/[^"]+">Sale<\/a>/);
    expect(parsed.html).toMatch(/<img src="http:\/\/127\.0\.0\.1:8787\/t\/o\/[^"]+"/);
    expect(parsed.text?.trim()).toBe("Read https://shop.example/plain");
    expect(parsed.attachments.map((attachment) => attachment.filename)).toEqual(["prices.csv"]);
    expect(parsed.messageId).toBe(`<tracked-${to}>`);
    expect(parsed.inReplyTo).toBe("<earlier@example.org>");
    expect(parsed.headers.find((header) => header.key === "x-custom-trace")?.value).toBe("keep-me");
    expect(parsed.headers.some((header) => header.key === "x-mailforge-track")).toBe(false);
    expect(parsed.headers.some((header) => header.key === "authentication-results")).toBe(false);
    expect(tracked.received).toMatch(/^DKIM-Signature: /);

    // The redirect goes where the link went, and the click is the recipient's.
    const link = parsed.html!.match(/href="(http:\/\/127\.0\.0\.1:8787\/t\/c\/[^"]+)"/)![1]!;
    const reader = { "User-Agent": "Mozilla/5.0 (Macintosh) AppleWebKit/605.1.15 Version/17.0 Safari/605.1.15" };
    const click = await exports.default.fetch(new Request(link, { headers: reader, redirect: "manual" }));
    expect(click.status).toBe(302);
    expect(click.headers.get("Location")).toBe("https://shop.example/sale");
    const clicked = await eventually(async () => {
      const message = await messageOf(account.api_key, tracked.id);
      return message.recipients[0]!.clicks === 1 ? message : undefined;
    });
    expect(clicked.recipients[0]).toMatchObject({ email: to, clicks: 1, clicked_at: expect.any(String) });
  });
});
