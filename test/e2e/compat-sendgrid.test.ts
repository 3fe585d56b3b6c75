import sgMail from "@sendgrid/mail";
import PostalMime from "postal-mime";
import { describe, expect, inject, it } from "vitest";
import { eventually } from "./stack.ts";

// @sendgrid/mail, unchanged, against /compat/sendgrid of the running stack. It cannot run inside workerd (axios
// over Node's http, and its attachment helper loads fs and path), so it runs here, as a project's Node code would.
const stack = inject("e2eStack");

async function api<T = Record<string, unknown>>(path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const response = await fetch(`${stack.workerUrl}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: `Bearer ${stack.apiKey}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as T };
}

// The instance has the @sendgrid/client it sends with as `client`, which its type declarations leave out.
const mailer = sgMail as typeof sgMail & { client: { setDefaultRequest(key: "baseUrl", value: string): void } };

/** The client's default instance, as a project uses it, with `key` (the tests of this file run one at a time). */
function clientFor(key: string) {
  // The `SG.` prefix only keeps the client from warning that the key does not look like SendGrid's.
  mailer.setApiKey(`SG.${key}`);
  mailer.client.setDefaultRequest("baseUrl", `${stack.workerUrl}/compat/sendgrid/`);
  return mailer;
}

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

async function verifiedDomain(): Promise<string> {
  const name = `sg-${Date.now().toString(36)}.example`;
  const domain = await api<{ id: string; records: { type: string; name: string; value: string }[] }>("/api/v1/domains", { name });
  expect(domain.status).toBe(201);
  for (const record of domain.body.records.filter((candidate) => candidate.type === "TXT")) {
    await fetch(`${stack.dohAdminUrl}/zone/${record.name}`, { method: "PUT", body: JSON.stringify({ TXT: [record.value] }) });
  }
  expect((await api<{ status: string }>(`/api/v1/domains/${domain.body.id}/verify`, {})).body.status).toBe("verified");
  return name;
}

async function delivered(address: string) {
  const message = await eventually(async () => {
    const list = (await (await fetch(`${stack.sinkUrl}/api/messages?to=${encodeURIComponent(address)}`)).json()) as { data: { id: string }[] };
    return list.data[0];
  });
  return PostalMime.parse(await (await fetch(`${stack.sinkUrl}/api/messages/${message.id}/raw`)).text());
}

type ResponseError = { code: number; response: { body: { errors: { field: string | null; message: string; help: null }[] } } };

describe("@sendgrid/mail against /compat/sendgrid", () => {
  it("sends: 202 with x-message-id, one message per personalization, each delivered with its own recipients and template data", async () => {
    const domain = await verifiedDomain();
    const mail = clientFor(stack.apiKey);
    const to = rcpt("to");
    const [response] = await mail.send({
      to,
      from: { email: `hello@${domain}`, name: "Acme" },
      subject: "Receipt",
      text: "Thanks!",
      html: "<p>Thanks!</p>",
      categories: ["receipt"],
      customArgs: { order: "1042" },
      headers: { "X-Order": "1042" },
      attachments: [{ content: Buffer.from("total: 42 EUR").toString("base64"), filename: "receipt.txt", type: "text/plain" }],
    });
    expect(response.statusCode).toBe(202);
    const id = String(response.headers["x-message-id"]);
    const parsed = await delivered(to);
    expect(parsed.from).toEqual({ name: "Acme", address: `hello@${domain}` });
    expect(parsed.headers.find((header) => header.key === "x-order")?.value).toBe("1042");
    expect(parsed.attachments.map((file) => file.filename)).toEqual(["receipt.txt"]);
    expect((await api(`/api/v1/messages/${id}`)).body).toMatchObject({ tags: ["receipt"], metadata: { order: "1042" }, stream: "transactional" });

    // Named after the SendGrid template it replaces: the client sends dynamic_template_data only for ids starting `d-`.
    const templateName = `d-${crypto.randomUUID().replace(/-/g, "")}`;
    expect((await api("/api/v1/templates", { name: templateName, subject: "Hi {{name}}", text: "Hello {{name}}" })).status).toBe(201);
    const [a, b, copy, hidden] = [rcpt("a"), rcpt("b"), rcpt("copy"), rcpt("hidden")];
    const [both] = await mail.send({
      from: `hello@${domain}`,
      templateId: templateName,
      personalizations: [
        { to: a, cc: copy, dynamicTemplateData: { name: "Ann" } },
        { to: b, bcc: hidden, dynamicTemplateData: { name: "Bob" } },
      ],
    });
    expect(both.statusCode).toBe(202);
    const ids = String(both.headers["x-mailforge-message-ids"]).split(",");
    expect(ids).toHaveLength(2);
    expect(ids[0]).toBe(both.headers["x-message-id"]);
    const first = await delivered(copy);
    expect([first.subject, first.text?.trim(), first.to?.[0]?.address, first.cc?.[0]?.address]).toEqual(["Hi Ann", "Hello Ann", a, copy]);
    const second = await delivered(hidden);
    expect([second.subject, second.to?.[0]?.address, second.cc, second.bcc]).toEqual(["Hi Bob", b, undefined, undefined]);
  });

  it("answers errors in SendGrid's shape: 400 naming the field, 401 for a bad key, 403 for an unverified sender", async () => {
    const domain = await verifiedDomain();
    const mail = clientFor(stack.apiKey);
    const from = `hello@${domain}`;
    const refused = (promise: Promise<unknown>) => promise.then(() => undefined).catch((error: ResponseError) => error);
    expect(await refused(mail.send({ to: "not-an-address", from, subject: "x", text: "x" }))).toMatchObject({
      code: 400,
      response: { body: { errors: [{ field: "personalizations.0.to.0.email", help: null }] } },
    });
    expect(await refused(mail.send({ to: rcpt("x"), from, subject: "x", text: "x", batchId: "b1" }))).toMatchObject({
      code: 400,
      response: { body: { errors: [{ field: "batch_id" }] } },
    });
    expect(await refused(clientFor("sk_live_nope").send({ to: rcpt("x"), from, subject: "x", text: "x" }))).toMatchObject({ code: 401 });
    clientFor(stack.apiKey);
    expect(await refused(mail.send({ to: rcpt("x"), from: "a@unverified.example", subject: "x", text: "x" }))).toMatchObject({ code: 403 });
  });
});
