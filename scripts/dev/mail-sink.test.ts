import { createHash } from "node:crypto";
import { connect } from "node:net";
import nodemailer, { type NodemailerError } from "nodemailer";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createMailSink, type MailSink, type MessageDetail, type MessageSummary, type SinkStats } from "./mail-sink.ts";

let sink: MailSink;
let smtpPort: number;
let inbox: string;

const attachmentContent = Buffer.from(Array.from({ length: 3000 }, (_, i) => i % 251));

function smtpTransport() {
  return nodemailer.createTransport({
    host: "127.0.0.1",
    port: smtpPort,
    secure: false,
    ignoreTLS: true,
    auth: { user: "demo-user", pass: "anything" },
  });
}

async function api<T>(path: string, init?: RequestInit): Promise<{ status: number; body: T }> {
  const res = await fetch(`${inbox}${path}`, init);
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

async function addRule(rule: object): Promise<void> {
  const res = await api("/api/rules", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(rule),
  });
  expect(res.status).toBe(201);
}

async function listMessages(query = ""): Promise<MessageSummary[]> {
  return (await api<{ data: MessageSummary[] }>(`/api/messages${query}`)).body.data;
}

async function sendFails(send: Promise<unknown>): Promise<NodemailerError> {
  const error = await send.then(
    () => undefined,
    (e: unknown) => e as NodemailerError,
  );
  expect(error, "the send should have been rejected").toBeDefined();
  return error as NodemailerError;
}

beforeAll(async () => {
  sink = createMailSink();
  const ports = await sink.listen({ smtpPort: 0, httpPort: 0 });
  smtpPort = ports.smtpPort;
  inbox = `http://127.0.0.1:${ports.httpPort}`;
});

afterAll(() => sink.close());

beforeEach(async () => {
  await Promise.all(["/api/messages", "/api/rules", "/api/stats"].map((path) => fetch(`${inbox}${path}`, { method: "DELETE" })));
});

describe("receiving", () => {
  it("keeps a multipart message byte for byte and lists its envelope and headers", async () => {
    const composed = await nodemailer.createTransport({ streamTransport: true, buffer: true }).sendMail({
      from: '"Acme" <hello@acme.test>',
      to: "Jane Doe <jane@example.com>",
      subject: "Your invoice",
      text: "See attached.",
      html: "<p>See attached.</p>",
      attachments: [{ filename: "invoice.bin", content: attachmentContent, contentType: "application/octet-stream" }],
    });
    const raw = composed.message as Buffer;

    await smtpTransport().sendMail({
      envelope: { from: "bounces@acme.test", to: ["jane@example.com", "audit@acme.test"] },
      raw,
    });

    const [listed] = await listMessages();
    expect(listed).toMatchObject({
      id: expect.any(String),
      mail_from: "bounces@acme.test",
      rcpt_to: ["jane@example.com", "audit@acme.test"],
      auth_user: "demo-user",
      subject: "Your invoice",
      from: { name: "Acme", address: "hello@acme.test" },
      to: [{ name: "Jane Doe", address: "jane@example.com" }],
      message_id: composed.messageId,
      size: raw.length,
    });
    expect(Date.parse(listed?.received_at ?? "")).not.toBeNaN();

    const rawRes = await fetch(`${inbox}/api/messages/${listed?.id}/raw`);
    expect(rawRes.headers.get("content-type")).toBe("message/rfc822");
    expect(Buffer.from(await rawRes.arrayBuffer()).equals(raw)).toBe(true);
    expect(sink.messages()[0]?.raw.equals(raw)).toBe(true);

    const detail = await api<MessageDetail>(`/api/messages/${listed?.id}`);
    expect(detail.status).toBe(200);
    expect(detail.body.attachments).toEqual([
      {
        filename: "invoice.bin",
        content_type: "application/octet-stream",
        size: attachmentContent.length,
        sha256: createHash("sha256").update(attachmentContent).digest("hex"),
      },
    ]);
    expect(detail.body.headers).toContainEqual({ key: "subject", value: "Your invoice" });
    expect(detail.body.text?.trim()).toBe("See attached.");
  });

  it("filters by envelope recipient and answers 404 for an unknown id", async () => {
    const transport = smtpTransport();
    await transport.sendMail({ from: "a@acme.test", to: "one@example.com", subject: "first", text: "1" });
    await transport.sendMail({ from: "a@acme.test", to: "two@example.com", bcc: "hidden@example.com", subject: "second", text: "2" });

    expect((await listMessages()).map((m) => m.subject)).toEqual(["first", "second"]);
    expect((await listMessages("?to=HIDDEN@example.com")).map((m) => m.subject)).toEqual(["second"]);

    const missing = await api<{ message: string; code: string }>("/api/messages/999");
    expect(missing).toEqual({ status: 404, body: { message: "message not found", code: "not_found" } });
    expect((await fetch(`${inbox}/api/messages/999/raw`)).status).toBe(404);

    expect((await api("/api/messages", { method: "DELETE" })).status).toBe(204);
    expect(await listMessages()).toEqual([]);
  });

  it("announces SIZE and refuses a message over the limit", async () => {
    const small = createMailSink({ maxMessageBytes: 1000 });
    const ports = await small.listen({ smtpPort: 0, httpPort: 0 });
    try {
      const transport = nodemailer.createTransport({ host: "127.0.0.1", port: ports.smtpPort, ignoreTLS: true });
      const error = await sendFails(transport.sendMail({ from: "a@acme.test", to: "b@example.com", text: "x".repeat(2000) }));
      expect(error.responseCode).toBe(552);
      expect(small.messages()).toEqual([]);

      const greeting = await smtpDialog(ports.smtpPort, ["EHLO client.test"]);
      expect(greeting).toMatch(/^250[- ]SIZE 1000\r$/m);
    } finally {
      await small.close();
    }
  });
});

/** Sends commands one at a time over a raw socket and returns everything the server said. */
function smtpDialog(port: number, commands: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let transcript = "";
    const pending = [...commands, "QUIT"];
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      transcript += chunk;
      // a complete reply ends with a line "NNN text"
      if (/^\d{3} .*\r\n$/m.test(chunk) && pending.length > 0) socket.write(`${pending.shift()}\r\n`);
    });
    socket.on("end", () => resolve(transcript));
    socket.on("error", reject);
  });
}

describe("clients that go away", () => {
  it("keeps serving after a client resets its connection inside a transaction (a test runtime shutting down)", async () => {
    const socket = connect(smtpPort, "127.0.0.1");
    socket.setEncoding("utf8");
    // Greeting, EHLO, MAIL FROM: the reset comes once a transaction has begun.
    await new Promise<void>((resolve, reject) => {
      const commands = ["EHLO client.test", "MAIL FROM:<a@acme.test>"];
      socket.on("data", (chunk: string) => {
        if (!/^\d{3} .*\r\n$/m.test(chunk)) return;
        const next = commands.shift();
        if (next) socket.write(`${next}\r\n`);
        else resolve();
      });
      socket.once("error", reject);
    });
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.resetAndDestroy();
    await closed;
    await smtpTransport().sendMail({ from: "a@acme.test", to: "after-reset@example.com", subject: "still here", text: "hi" });
    expect((await listMessages("?to=after-reset@example.com")).map((message) => message.subject)).toEqual(["still here"]);
  });
});

describe("programmed failures", () => {
  it("answers 451 to the first DATA for a recipient, then accepts the retry", async () => {
    await addRule({ match: "Retry@Example.com", phase: "data", responses: [{ code: 451, message: "4.3.0 Try again later" }] });
    const transport = smtpTransport();
    const message = { from: "a@acme.test", to: "retry@example.com", subject: "retry me", text: "hi" };

    const error = await sendFails(transport.sendMail(message));
    expect(error.responseCode).toBe(451);
    expect(error.response).toBe("451 4.3.0 Try again later");
    expect(await listMessages()).toEqual([]);

    const info = await transport.sendMail(message);
    expect(info.response).toMatch(/^250 Ok: queued as \d+$/);
    expect((await listMessages()).map((m) => m.subject)).toEqual(["retry me"]);
  });

  it("rejects a recipient at RCPT with 550 5.1.1 while other recipients are accepted", async () => {
    await addRule({ match: "nobody@example.com", phase: "rcpt", responses: [{ code: 550, message: "5.1.1 User unknown" }], times: 2 });
    const transport = smtpTransport();

    const error = await sendFails(transport.sendMail({ from: "a@acme.test", to: "nobody@example.com", text: "x" }));
    expect(error.responseCode).toBe(550);
    expect(error.response).toBe("550 5.1.1 User unknown");

    const info = await transport.sendMail({ from: "a@acme.test", to: ["nobody@example.com", "jane@example.com"], text: "x" });
    expect(info.rejected).toEqual(["nobody@example.com"]);
    expect(info.accepted).toEqual(["jane@example.com"]);
    expect((await listMessages()).map((m) => m.rcpt_to)).toEqual([["jane@example.com"]]);

    // both replies used up: the address is accepted again
    await transport.sendMail({ from: "a@acme.test", to: "nobody@example.com", text: "x" });
    const rules = await api<{ data: { remaining: number }[] }>("/api/rules");
    expect(rules.body.data).toMatchObject([{ remaining: 0 }]);
  });

  it("plays several replies in order and can refuse MAIL FROM", async () => {
    await addRule({
      match: "*",
      phase: "mail",
      responses: [
        { code: 421, message: "4.7.0 Too many connections" },
        { code: 554, message: "5.7.1 Sender blocked" },
      ],
    });
    const transport = smtpTransport();
    const message = { from: "a@acme.test", to: "b@example.com", text: "x" };
    expect((await sendFails(transport.sendMail(message))).response).toBe("421 4.7.0 Too many connections");
    expect((await sendFails(transport.sendMail(message))).response).toBe("554 5.7.1 Sender blocked");
    await transport.sendMail(message);
    expect(await listMessages()).toHaveLength(1);
  });

  it("refuses a rule that is not valid", async () => {
    const res = await api<{ code: string; errors: Record<string, string[]> }>("/api/rules", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ match: "*", phase: "helo", responses: [{ code: 250, message: "ok" }] }),
    });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe("validation_error");
    expect(Object.keys(res.body.errors).sort()).toEqual(["phase", "responses.0.code"]);
  });
});

describe("holding messages (a stalled provider)", () => {
  it("keeps messages unstored and unanswered at their final dot until released, then stores and answers each", async () => {
    expect((await api("/api/hold", { method: "PUT" })).status).toBe(204);
    const transport = smtpTransport();
    let answered = 0;
    const sends = [1, 2].map((n) =>
      transport.sendMail({ from: "a@example.org", to: `held${n}@example.org`, subject: `held ${n}`, text: "x" }).then((info) => {
        answered++;
        return info;
      }),
    );
    await expect.poll(async () => (await api<{ waiting: number }>("/api/hold")).body.waiting, { interval: 20 }).toBe(2);
    expect(answered).toBe(0);
    expect(await listMessages()).toEqual([]);

    expect((await api("/api/hold", { method: "DELETE" })).status).toBe(204);
    const infos = await Promise.all(sends);
    for (const info of infos) expect(info.response).toMatch(/^250 Ok: queued as \d+$/);
    expect((await listMessages()).map((m) => m.subject).sort()).toEqual(["held 1", "held 2"]);
    expect((await api("/api/hold", { method: "POST" })).status).toBe(405);
  });

  it("holds only the messages to one recipient with ?to=, and lets the others through", async () => {
    expect((await api("/api/hold?to=Slow@example.org", { method: "PUT" })).status).toBe(204);
    const transport = smtpTransport();
    const held = transport.sendMail({ from: "a@example.org", to: "slow@example.org", subject: "held", text: "x" });
    await expect.poll(async () => (await api<{ waiting: number }>("/api/hold")).body.waiting, { interval: 20 }).toBe(1);
    const passed = await transport.sendMail({ from: "a@example.org", to: "fast@example.org", subject: "passed", text: "x" });
    expect(passed.response).toMatch(/^250 /);
    expect((await listMessages()).map((m) => m.subject)).toEqual(["passed"]);

    expect((await api("/api/hold", { method: "DELETE" })).status).toBe(204);
    expect((await held).response).toMatch(/^250 /);
    expect((await listMessages()).map((m) => m.subject).sort()).toEqual(["held", "passed"]);
  });
});

describe("connection stats", () => {
  it("counts one connection for three messages over a pooled transport, and the RSET after a refusal", async () => {
    const pool = nodemailer.createTransport({
      pool: true,
      maxConnections: 1,
      host: "127.0.0.1",
      port: smtpPort,
      ignoreTLS: true,
      auth: { user: "pooled", pass: "x" },
    });
    try {
      await Promise.all([1, 2, 3].map((n) => pool.sendMail({ from: "a@acme.test", to: `r${n}@example.com`, subject: `m${n}`, text: "x" })));
      expect((await api<SinkStats>("/api/stats")).body).toEqual({ connections: 1, messages: 3, rsets: 0 });
      const messages = await listMessages();
      expect(new Set(messages.map((m) => m.session_id)).size).toBe(1);
      expect(messages.map((m) => m.auth_user)).toEqual(["pooled", "pooled", "pooled"]);

      // a refused message makes the pool reset the session and carry on over the same connection
      await addRule({ match: "*", phase: "data", responses: [{ code: 554, message: "5.6.0 Rejected" }] });
      await sendFails(pool.sendMail({ from: "a@acme.test", to: "r4@example.com", text: "x" }));
      await pool.sendMail({ from: "a@acme.test", to: "r5@example.com", text: "x" });
      expect((await api<SinkStats>("/api/stats")).body).toEqual({ connections: 1, messages: 4, rsets: 1 });
    } finally {
      pool.close();
    }
  });
});
