import { exports } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { Resend } from "resend";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAccount } from "../support/helpers";
import { addReceiverRule, receiverPath, receiverUrl } from "../support/webhooks";
import { eventually, messageOf, sendBalance, sinkMessagesTo, sinkRaw, verifiedDomain } from "../support/sending";

// The resend client, unchanged, against /compat/resend. It calls the global fetch with its base URL, so requests
// to this test's host are handed to the Worker's own fetch handler; everything else goes out as before.
const host = "http://mailforge.compat.test";
const baseUrl = `${host}/compat/resend`;

beforeAll(() => {
  const outside = globalThis.fetch;
  vi.stubGlobal("fetch", (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    return request.url.startsWith(host)
      ? exports.default.fetch(new Request(request.url.replace(host, "http://localhost"), request))
      : outside(request);
  });
});
afterAll(() => {
  vi.unstubAllGlobals();
});

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

async function setup() {
  const account = await createAccount({ send_credits: 100 });
  const domain = await verifiedDomain(account.api_key);
  return { key: account.api_key, domain, from: `Acme <hello@${domain.name}>`, resend: new Resend(account.api_key, { baseUrl }) };
}

async function delivered(address: string) {
  const [message] = await eventually(async () => {
    const found = await sinkMessagesTo(address);
    return found.length > 0 ? found : undefined;
  });
  return { message: message!, raw: await sinkRaw(message!.id) };
}

const headerSection = (raw: string) => raw.slice(0, raw.indexOf("\r\n\r\n"));

describe("the resend client against /compat/resend", () => {
  it("sends with cc, bcc, reply_to, a header, a tag and an attachment; the mail arrives with them and without Bcc; emails.get reads it back", async () => {
    const { key, from, resend } = await setup();
    const [to, cc, bcc] = [rcpt("to"), rcpt("cc"), rcpt("bcc")];
    const sent = await resend.emails.send({
      from,
      to,
      cc: [cc],
      bcc,
      replyTo: "support@example.org",
      subject: "Your receipt",
      html: "<p>Thanks!</p>",
      text: "Thanks!",
      headers: { "X-Entity-Ref-ID": "order-1042" },
      tags: [{ name: "category", value: "receipt" }],
      attachments: [{ filename: "receipt.txt", content: Buffer.from("total: 42 EUR") }],
    });
    expect(sent.error).toBeNull();
    const id = sent.data!.id;
    expect(id).toMatch(/^msg_/);
    expect(await sendBalance(key)).toBe(97);

    for (const address of [to, cc, bcc]) {
      const { message, raw } = await delivered(address);
      expect(message.rcpt_to).toEqual([address]);
      const parsed = await PostalMime.parse(raw);
      expect(parsed.to).toEqual([{ name: "", address: to }]);
      expect(parsed.cc).toEqual([{ name: "", address: cc }]);
      expect(parsed.replyTo).toEqual([{ name: "", address: "support@example.org" }]);
      expect(parsed.headers.find((header) => header.key === "x-entity-ref-id")?.value).toBe("order-1042");
      expect(parsed.attachments.map((file) => [file.filename, new TextDecoder().decode(file.content as ArrayBuffer)])).toEqual([
        ["receipt.txt", "total: 42 EUR"],
      ]);
      expect(headerSection(raw)).not.toMatch(/^bcc:/im);
      expect(headerSection(raw)).not.toContain(bcc);
    }

    await eventually(async () => ((await messageOf(key, id)).status === "sent" ? true : undefined));
    const got = await resend.emails.get(id);
    expect(got.error).toBeNull();
    expect(got.data).toMatchObject({
      object: "email",
      id,
      to: [to],
      cc: [cc],
      bcc: [bcc],
      reply_to: ["support@example.org"],
      from,
      subject: "Your receipt",
      html: "<p>Thanks!</p>",
      last_event: "sent",
      tags: [{ name: "category", value: "receipt" }],
    });
  });

  it("answers the same id for the same idempotencyKey, and sends a batch of two", async () => {
    const { key, from, resend } = await setup();
    const email = { from, to: rcpt("idem"), subject: "Once", text: "Only once" };
    const first = await resend.emails.send(email, { idempotencyKey: "order-7" });
    const again = await resend.emails.send(email, { idempotencyKey: "order-7" });
    expect(again.data?.id).toBe(first.data?.id);
    const changed = await resend.emails.send({ ...email, subject: "Twice" }, { idempotencyKey: "order-7" });
    expect(changed.error).toMatchObject({ statusCode: 409, name: "invalid_idempotent_request" });
    expect(await sendBalance(key)).toBe(99);

    const [a, b] = [rcpt("batch-a"), rcpt("batch-b")];
    const batch = await resend.batch.send([
      { from, to: a, subject: "A", text: "a" },
      { from, to: b, subject: "B", html: "<b>b</b>" },
    ]);
    expect(batch.error).toBeNull();
    expect(batch.data?.data).toHaveLength(2);
    expect((await delivered(b)).message.subject).toBe("B");
    expect(await sendBalance(key)).toBe(97);
  });

  it("schedules, moves and cancels an email (refunded)", async () => {
    const { key, from, resend } = await setup();
    const inAnHour = new Date(Date.now() + 3_600_000).toISOString();
    const sent = await resend.emails.send({ from, to: rcpt("later"), subject: "Later", text: "later", scheduledAt: inAnHour });
    const id = sent.data!.id;
    expect((await resend.emails.get(id)).data).toMatchObject({ last_event: "scheduled", scheduled_at: inAnHour });
    const inTwoHours = new Date(Date.now() + 7_200_000).toISOString();
    expect((await resend.emails.update({ id, scheduledAt: inTwoHours })).data).toEqual({ object: "email", id });
    expect((await messageOf(key, id)).status).toBe("scheduled");
    expect((await resend.emails.cancel(id)).data).toEqual({ object: "email", id });
    expect((await resend.emails.get(id)).data?.last_event).toBe("canceled");
    expect(await sendBalance(key)).toBe(100);
    expect((await resend.emails.cancel(id)).error).toMatchObject({ statusCode: 422, name: "validation_error" });
  });

  it("fetches an attachment given by path when the email is accepted, and refuses one it cannot fetch", async () => {
    const { from, resend } = await setup();
    const path = receiverPath();
    await addReceiverRule({ path, status: 200, body: "invoice 7" });
    const to = rcpt("path");
    const sent = await resend.emails.send({ from, to, subject: "Invoice", text: "attached", attachments: [{ path: receiverUrl(path) }] });
    expect(sent.error).toBeNull();
    const parsed = await PostalMime.parse((await delivered(to)).raw);
    expect(parsed.attachments.map((file) => [file.filename, new TextDecoder().decode(file.content as ArrayBuffer)])).toEqual([
      [path.split("/").pop(), "invoice 7"],
    ]);
    const missing = receiverPath();
    await addReceiverRule({ path: missing, status: 404 });
    const refused = await resend.emails.send({ from, to, subject: "x", text: "x", attachments: [{ path: receiverUrl(missing), filename: "a.pdf" }] });
    expect(refused.error).toMatchObject({ statusCode: 422, name: "invalid_attachment" });
  });

  it("lists domains and manages API keys", async () => {
    const { domain, resend } = await setup();
    const list = await resend.domains.list();
    expect(list.data?.data).toEqual([expect.objectContaining({ id: domain.id, name: domain.name, status: "verified" })]);
    const one = await resend.domains.get(domain.id);
    expect(one.data?.records.map((record) => record.record)).toContain("DKIM");

    const created = await resend.apiKeys.create({ name: "sending", permission: "sending_access" });
    expect(created.data?.token).toMatch(/^sk_/);
    const restricted = new Resend(created.data!.token, { baseUrl });
    expect((await restricted.domains.list()).error).toMatchObject({ statusCode: 401, name: "restricted_api_key" });
    expect((await resend.apiKeys.remove(created.data!.id)).error).toBeNull();
    expect((await restricted.domains.list()).error).toMatchObject({ statusCode: 403, name: "invalid_api_key" });
  });

  it("answers bad requests and bad keys with Resend's named errors, never /api/v1's shape", async () => {
    const { from, resend } = await setup();
    const invalid = await resend.emails.send({ from, to: "not-an-address", subject: "x", text: "x" });
    expect(invalid.error).toMatchObject({ statusCode: 422, name: "validation_error" });
    expect(invalid.error?.message).toContain("`to`");
    const missing = await resend.emails.send({ from, to: rcpt("x"), text: "x" } as unknown as Parameters<Resend["emails"]["send"]>[0]);
    expect(missing.error).toMatchObject({ statusCode: 422, name: "missing_required_field", message: "Missing `subject` field." });
    const unverified = await resend.emails.send({ from: "a@unverified.example", to: rcpt("x"), subject: "x", text: "x" });
    expect(unverified.error).toMatchObject({ statusCode: 403, name: "validation_error" });
    const template = await resend.emails.send({ from, to: rcpt("x"), template: { id: "welcome" } } as Parameters<Resend["emails"]["send"]>[0]);
    expect(template.error?.message).toMatch(/not supported/);

    const badKey = new Resend("re_not_a_key", { baseUrl });
    expect((await badKey.emails.send({ from, to: rcpt("x"), subject: "x", text: "x" })).error).toMatchObject({
      statusCode: 403,
      name: "invalid_api_key",
    });
    const noKey = await exports.default.fetch(new Request("http://localhost/compat/resend/emails", { method: "POST", body: "{}" }));
    expect(await noKey.json()).toMatchObject({ statusCode: 401, name: "missing_api_key" });
    const notJson = await exports.default.fetch(
      new Request("http://localhost/compat/resend/emails", {
        method: "POST",
        body: "{",
        headers: { Authorization: `Bearer ${(await createAccount()).api_key}`, "Content-Type": "application/json" },
      }),
    );
    expect(notJson.status).toBe(422);
    expect(await notJson.json()).toMatchObject({ statusCode: 422, name: "validation_error" });
  });
});
