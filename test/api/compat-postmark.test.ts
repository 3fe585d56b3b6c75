import { exports } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { Errors, ServerClient } from "postmark";
import { describe, expect, it } from "vitest";
import { call, createAccount } from "../support/helpers";
import { eventually, sendBalance, sinkMessagesTo, sinkRaw, verifiedDomain } from "../support/sending";

// The postmark client, unchanged, against /compat/postmark. Its `fetch` option (meant for proxies) hands its requests
// to the Worker's own fetch handler; requestHost and useHttps are what a project changes to move.
const workerFetch = (input: string | URL | Request, init?: RequestInit) => exports.default.fetch(new Request(input, init));
const clientFor = (token: string) => new ServerClient(token, { useHttps: false, requestHost: "localhost/compat/postmark", fetch: workerFetch });

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

async function setup() {
  const account = await createAccount({ send_credits: 100 });
  const domain = await verifiedDomain(account.api_key);
  return { key: account.api_key, from: `Acme <hello@${domain.name}>`, client: clientFor(account.api_key) };
}

async function delivered(address: string) {
  const [message] = await eventually(async () => {
    const found = await sinkMessagesTo(address);
    return found.length > 0 ? found : undefined;
  });
  return { message: message!, raw: await sinkRaw(message!.id) };
}

describe("the postmark client against /compat/postmark", () => {
  it("sends with Cc, Tag, Metadata, Headers and an inline attachment; it arrives with them; the details read it back", async () => {
    const { key, from, client } = await setup();
    const [to, cc] = [rcpt("to"), rcpt("cc")];
    const sent = await client.sendEmail({
      From: from,
      To: `Ann <${to}>`,
      Cc: cc,
      Subject: "Receipt",
      HtmlBody: '<p>Thanks!</p><img src="cid:logo">',
      TextBody: "Thanks!",
      Tag: "receipt",
      Metadata: { order: "1042" },
      Headers: [{ Name: "X-Order", Value: "1042" }],
      Attachments: [{ Name: "logo.png", Content: btoa("png bytes"), ContentType: "image/png", ContentID: "cid:logo" }],
    });
    expect(sent).toMatchObject({ ErrorCode: 0, Message: "OK", To: `Ann <${to}>` });
    expect(await sendBalance(key)).toBe(98);

    const { raw } = await delivered(cc);
    const parsed = await PostalMime.parse(raw);
    expect(parsed.to).toEqual([{ name: "Ann", address: to }]);
    expect(parsed.cc).toEqual([{ name: "", address: cc }]);
    expect(parsed.headers.find((header) => header.key === "x-order")?.value).toBe("1042");
    expect(parsed.attachments).toMatchObject([{ filename: "logo.png", mimeType: "image/png", contentId: "<logo>" }]);

    const details = await eventually(async () => {
      const current = await client.getOutboundMessageDetails(sent.MessageID);
      return current.Status === "Sent" ? current : undefined;
    });
    expect(details).toMatchObject({
      MessageID: sent.MessageID,
      MessageStream: "outbound",
      Tag: "receipt",
      To: [{ Email: to, Name: "Ann" }],
      Cc: [{ Email: cc, Name: "" }],
      Subject: "Receipt",
      Metadata: { order: "1042" },
      Attachments: ["logo.png"],
    });
    const listed = (await client.getOutboundMessages({ count: 10, offset: 0 })).Messages.find((message) => message.MessageID === sent.MessageID);
    expect(listed?.Recipients.sort()).toEqual([to, cc].sort());
  });

  it("sends a batch, answering per message, and sends with a template by alias", async () => {
    const { key, from, client } = await setup();
    const [a, b] = [rcpt("a"), rcpt("b")];
    const results = await client.sendEmailBatch([
      { From: from, To: a, Subject: "A", TextBody: "a" },
      { From: from, To: "not-an-address", Subject: "Bad", TextBody: "x" },
      { From: from, To: b, Subject: "B", TextBody: "b", MessageStream: "broadcast" },
    ]);
    expect(results.map((result) => result.ErrorCode)).toEqual([0, 300, 0]);
    expect(results[1]!.Message).toContain("'To");
    expect((await delivered(b)).message.subject).toBe("B");
    expect(await sendBalance(key)).toBe(98);

    const template = await call("/api/v1/templates", {
      key,
      body: { name: "welcome", subject: "Welcome {{name}}", html: "<p>Hi {{name}}, you have {{count}} credits</p>" },
    });
    expect(template.status).toBe(201);
    const to = rcpt("templated");
    const sent = await client.sendEmailWithTemplate({ From: from, To: to, TemplateAlias: "welcome", TemplateModel: { name: "Ann", count: 3 } });
    expect(sent.ErrorCode).toBe(0);
    const { raw } = await delivered(to);
    const parsed = await PostalMime.parse(raw);
    expect(parsed.subject).toBe("Welcome Ann");
    expect(parsed.html).toContain("Hi Ann, you have 3 credits");
    expect((await client.getTemplates()).Templates).toMatchObject([{ Name: "welcome", Alias: "welcome", Active: true }]);

    await expect(client.sendEmailWithTemplate({ From: from, To: to, TemplateAlias: "missing", TemplateModel: {} })).rejects.toMatchObject({
      code: 1101,
      statusCode: 422,
    });
  });

  it("throws the client's own errors: InvalidAPIKeyError for a bad token, ApiInputError with a code for an unverified sender", async () => {
    const { from, client } = await setup();
    const badToken = clientFor("not-a-token");
    const unauthorized = await badToken.sendEmail({ From: from, To: rcpt("x"), Subject: "x", TextBody: "x" }).catch((error: unknown) => error);
    expect(unauthorized).toBeInstanceOf(Errors.InvalidAPIKeyError);
    expect(unauthorized).toMatchObject({ statusCode: 401, code: 10 });

    const unverified = await client
      .sendEmail({ From: "a@unverified.example", To: rcpt("x"), Subject: "x", TextBody: "x" })
      .catch((error: unknown) => error);
    expect(unverified).toBeInstanceOf(Errors.ApiInputError);
    expect(unverified).toMatchObject({ statusCode: 422, code: 400 });

    const invalid = await client.sendEmail({ From: from, To: "nobody", Subject: "x", TextBody: "x" }).catch((error: unknown) => error);
    expect(invalid).toBeInstanceOf(Errors.InvalidEmailRequestError);
    const stream = await client
      .sendEmail({ From: from, To: rcpt("x"), Subject: "x", TextBody: "x", MessageStream: "marketing" })
      .catch((e: unknown) => e);
    expect(stream).toMatchObject({ statusCode: 422, code: 1235 });
    const missing = await client.getOutboundMessageDetails("msg_nothing").catch((error: unknown) => error);
    expect(missing).toMatchObject({ statusCode: 422, code: 701 });
    expect((await client.getBounces()).Bounces).toEqual([]);
  });
});

describe("the OpenAPI document", () => {
  it("lists the compatibility routes under their own tags, with Postmark's token header as a security scheme", async () => {
    const document = await (await call("/api/v1/openapi.json")).json<{
      paths: Record<string, Record<string, { tags: string[]; security: Record<string, string[]>[] }>>;
      components: { securitySchemes: Record<string, { in?: string; name?: string }> };
    }>();
    const tagOf = (path: string, method: string) => document.paths[path]?.[method]?.tags;
    expect(tagOf("/compat/resend/emails", "post")).toEqual(["Resend compatibility"]);
    expect(tagOf("/compat/resend/emails/{id}/cancel", "post")).toEqual(["Resend compatibility"]);
    expect(tagOf("/compat/postmark/email/withTemplate", "post")).toEqual(["Postmark compatibility"]);
    expect(tagOf("/compat/sendgrid/v3/mail/send", "post")).toEqual(["SendGrid compatibility"]);
    expect(document.paths["/compat/postmark/email"]?.post?.security).toEqual([{ postmarkServerToken: [] }]);
    expect(document.components.securitySchemes.postmarkServerToken).toMatchObject({ in: "header", name: "X-Postmark-Server-Token" });
  });
});
