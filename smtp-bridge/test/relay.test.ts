import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { execFileSync } from "node:child_process";
import MailComposer from "nodemailer/lib/mail-composer";
import nodemailer from "nodemailer";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.ts";
import { createMemoryLogger } from "../src/log.ts";
import { createServer } from "../src/server.ts";
import { BRIDGE_SECRET, FakeWorker, SmtpDialog, VERIFIED_DOMAIN, plainAuth, runProcess, startBridge, type StartedBridge } from "./helpers.ts";

// The bridge between real SMTP clients (nodemailer, Python's smtplib, swaks) and a fake Worker that is a real
// HTTP server checking the request signature. Each case names what a client would see.

const USER = "smtp_testuser";
const PASSWORD = "correct-horse-battery-staple-0123456789";
const FROM = `app@${VERIFIED_DOMAIN}`;
const tlsOff = { rejectUnauthorized: false };

type SmtpError = Error & { responseCode?: number; response?: string; command?: string };

function transport(port: number, options: { secure?: boolean; pool?: boolean; user?: string; pass?: string } = {}) {
  return nodemailer.createTransport({
    host: "127.0.0.1",
    port,
    secure: options.secure ?? false,
    requireTLS: !options.secure,
    tls: tlsOff,
    auth: { user: options.user ?? USER, pass: options.pass ?? PASSWORD },
    pool: options.pool ?? false,
    maxConnections: 1,
  });
}

async function sendError(promise: Promise<unknown>): Promise<SmtpError> {
  try {
    await promise;
  } catch (error) {
    return error as SmtpError;
  }
  throw new Error("expected the send to fail");
}

const simpleMail = (overrides: Record<string, unknown> = {}) => ({
  from: FROM,
  to: "ann@example.org",
  subject: "Hello",
  text: "Hi Ann",
  ...overrides,
});

function which(program: string): string {
  try {
    return execFileSync("which", [program]).toString().trim();
  } catch {
    return "";
  }
}

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

let worker: FakeWorker;
let started: StartedBridge;

beforeAll(async () => {
  worker = new FakeWorker();
  worker.addCredential(USER, PASSWORD);
  await worker.start();
  started = await startBridge(worker);
});

afterAll(async () => {
  await started.bridge.close({ timeoutMs: 1000 });
  await worker.stop();
});

afterEach(() => {
  // every request the bridge made carried a valid signature
  expect(worker.requests.filter((request) => !request.signatureValid)).toEqual([]);
});

describe("accepting mail", () => {
  it("nodemailer over STARTTLS: 250 2.0.0 with the Worker's message id, after the Worker's 202", async () => {
    const before = worker.messages.length;
    const info = await transport(started.ports.smtp).sendMail(simpleMail());
    expect(info.response).toMatch(/^250 2\.0\.0 Ok: queued as msg_fake\d+$/);
    expect(worker.messages).toHaveLength(before + 1);
    expect(worker.messages.at(-1)).toMatchObject({ credential_id: `smtp_${USER}`, mail_from: FROM, rcpt_to: ["ann@example.org"] });
    const log = started.logs.filter((entry) => entry.event === "smtp.transaction").at(-1);
    expect(log).toMatchObject({ outcome: "queued", credential_id: `smtp_${USER}`, recipients: 1, message_id: expect.stringMatching(/^msg_fake/) });
    expect(log?.bytes).toBeGreaterThan(100);
    expect(typeof log?.ms).toBe("number");
  });

  it("nodemailer over implicit TLS (the 465 listener)", async () => {
    const info = await transport(started.ports.smtps, { secure: true }).sendMail(simpleMail({ to: ["a@example.org", "b@example.org"] }));
    expect(info.response).toMatch(/^250 2\.0\.0 Ok: queued as msg_fake/);
    expect(worker.messages.at(-1)?.rcpt_to).toEqual(["a@example.org", "b@example.org"]);
  });

  it("the listeners present a certificate with the configured name, TLS 1.2 or newer", async () => {
    const socket = tlsConnect({ port: started.ports.smtps, host: "127.0.0.1", rejectUnauthorized: false });
    await new Promise((resolve) => socket.once("secureConnect", resolve));
    expect(socket.getPeerCertificate().subject.CN).toBe("relay.test");
    expect(["TLSv1.2", "TLSv1.3"]).toContain(socket.getProtocol());
    socket.destroy();
  });

  // python3 is on the project's machines; elsewhere this one client is skipped rather than failing the suite
  it.skipIf(!which("python3"))("Python smtplib: starttls(), login(), mail/rcpt/data on the alternate port", async () => {
    const script = `
import json, smtplib, ssl, sys
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
s = smtplib.SMTP("127.0.0.1", int(sys.argv[1]), timeout=10)
s.ehlo(); s.starttls(context=ctx); s.ehlo()
out = {"size": s.esmtp_features.get("size"), "auth": s.esmtp_features.get("auth")}
try:
    s.login(sys.argv[2], sys.argv[3])
    out["login"] = "ok"
except smtplib.SMTPAuthenticationError as e:
    out["login"] = [e.smtp_code, e.smtp_error.decode()]
    print(json.dumps(out)); sys.exit(0)
out["mail"] = list(s.mail(sys.argv[4])); out["mail"][1] = out["mail"][1].decode()
out["rcpt"] = list(s.rcpt("bob@example.org")); out["rcpt"][1] = out["rcpt"][1].decode()
code, resp = s.data(sys.stdin.buffer.read())
out["data"] = [code, resp.decode()]
s.quit()
print(json.dumps(out))
`;
    const message = Buffer.from(`From: <${FROM}>\r\nTo: <bob@example.org>\r\nSubject: from python\r\n\r\nHello from smtplib\r\n`);
    const ok = await runProcess("python3", ["-c", script, String(started.ports.alt), USER, PASSWORD, FROM], message);
    expect(ok.stderr).toBe("");
    const result = JSON.parse(ok.stdout) as Record<string, unknown>;
    expect(result).toMatchObject({ size: String(started.config.maxMessageBytes), login: "ok" });
    expect(String(result.auth).trim()).toBe("PLAIN LOGIN");
    expect(result.mail).toEqual([250, expect.any(String)]);
    expect(result.data).toEqual([250, expect.stringMatching(/^2\.0\.0 Ok: queued as msg_fake/)]);
    expect(worker.messages.at(-1)?.raw.equals(message)).toBe(true);

    const denied = await runProcess("python3", ["-c", script, String(started.ports.alt), USER, "wrong-password", FROM], message);
    expect(JSON.parse(denied.stdout)).toMatchObject({ login: [535, expect.stringMatching(/^5\.7\.8 /)] });
  });

  const swaks = which("swaks");
  // swaks is Debian's `swaks` package (apt-get install -y swaks); without it this case has nothing to run.
  it.skipIf(!swaks)("swaks: AUTH PLAIN after STARTTLS, and AUTH LOGIN over implicit TLS", async () => {
    const common = [
      "--server",
      "127.0.0.1",
      "--auth-user",
      USER,
      "--auth-password",
      PASSWORD,
      "--from",
      FROM,
      "--to",
      "carol@example.org",
      "--timeout",
      "10",
    ];
    const starttls = await runProcess(swaks, [...common, "--port", String(started.ports.smtp), "--tls", "--auth", "PLAIN"]);
    expect(starttls.code).toBe(0);
    expect(starttls.stdout).toMatch(/<~\s+250 2\.0\.0 Ok: queued as msg_fake/);
    const implicit = await runProcess(swaks, [...common, "--port", String(started.ports.smtps), "--tls-on-connect", "--auth", "LOGIN"]);
    expect(implicit.code).toBe(0);
    expect(implicit.stdout).toMatch(/<~\s+250 2\.0\.0 Ok: queued as msg_fake/);
  });

  it("forwards a multipart message with attachment and inline CID image byte for byte", async () => {
    const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "base64");
    const raw = await new MailComposer({
      from: `"Acme Billing" <${FROM}>`,
      to: "ann@example.org",
      replyTo: "support@verified.test",
      subject: "Invoice 42 — ünïcödé",
      messageId: "<invoice-42@verified.test>",
      headers: { "X-Campaign": "spring", "X-Mailer-Trace": "abc.def" },
      // CRLF line ends, as on the wire: SMTP clients turn bare LFs into CRLF before the bridge sees them
      text: "Your invoice is attached.\r\n.\r\n..a line that starts with dots\r\n",
      html: '<p>Logo: <img src="cid:logo@verified.test"></p>',
      attachments: [
        { filename: "invoice.pdf", content: Buffer.from("%PDF-1.4 fake invoice\n".repeat(200)), contentType: "application/pdf" },
        { filename: "logo.png", content: png, contentType: "image/png", cid: "logo@verified.test" },
      ],
    })
      .compile()
      .build();
    expect(raw.toString()).toContain("multipart/mixed");
    expect(raw.toString()).toContain("multipart/related");

    const info = await transport(started.ports.smtp).sendMail({ envelope: { from: FROM, to: ["ann@example.org"] }, raw });
    expect(info.response).toMatch(/^250 2\.0\.0/);
    const received = worker.messages.at(-1)?.raw ?? Buffer.alloc(0);
    expect(sha256(received)).toBe(sha256(raw));
    expect(received.toString()).toContain("Message-ID: <invoice-42@verified.test>");
    expect(received.toString()).toContain("X-Campaign: spring");
  });
});

describe("authentication", () => {
  it("a wrong password gets 535 5.7.8 and nothing of the password reaches the logs", async () => {
    const error = await sendError(transport(started.ports.smtp, { pass: "not-the-password" }).sendMail(simpleMail()));
    expect(error.responseCode).toBe(535);
    expect(error.response).toMatch(/^535 5\.7\.8 /);
    const lines = JSON.stringify(started.logs);
    expect(lines).toContain('"outcome":"rejected"');
    expect(lines).not.toContain("not-the-password");
    expect(lines).not.toContain(PASSWORD);
  });

  it("AUTH before STARTTLS is refused with 538 and not advertised", async () => {
    const { dialog, greeting } = await SmtpDialog.open(started.ports.smtp);
    expect(greeting).toMatch(/^220 relay\.test ESMTP/);
    const ehlo = await dialog.send("EHLO client.test");
    expect(ehlo).toContain("STARTTLS");
    expect(ehlo).not.toContain("AUTH");
    expect(await dialog.send(`AUTH PLAIN ${plainAuth(USER, PASSWORD)}`)).toMatch(/^538 5\.7\.0 /);
    expect(await dialog.send(`MAIL FROM:<${FROM}>`)).toMatch(/^530 5\.7\.0 /);
    dialog.close();
  });

  it("with ALLOW_INSECURE_AUTH_ON_LOOPBACK a loopback client may AUTH without TLS", async () => {
    const local = await startBridge(worker, { ALLOW_INSECURE_AUTH_ON_LOOPBACK: "true" });
    try {
      const { dialog } = await SmtpDialog.open(local.ports.smtp);
      expect(await dialog.send("EHLO client.test")).toContain("AUTH PLAIN LOGIN");
      expect(await dialog.send(`AUTH PLAIN ${plainAuth(USER, PASSWORD)}`)).toMatch(/^235 /);
      expect(await dialog.send(`MAIL FROM:<${FROM}>`)).toMatch(/^250 /);
      expect(await dialog.send("RCPT TO:<not an address>")).toMatch(/^501 /);
      expect(await dialog.send("RCPT TO:<dan@localhost>")).toMatch(/^553 5\.1\.3 Invalid recipient address/);
      expect(await dialog.send("RCPT TO:<dan@example.org>")).toMatch(/^250 /);
      expect(await dialog.send("DATA")).toMatch(/^354 /);
      expect(await dialog.send("Subject: no from header\r\n\r\nbody\r\n.")).toMatch(/^554 5\.6\.0 Message could not be parsed: no From header/);
      dialog.close();
    } finally {
      await local.bridge.close({ timeoutMs: 500 });
    }
  });

  it("one signed Worker call per relayed message on a reused session, over one kept-alive connection; each message stored once", async () => {
    const local = await startBridge(worker);
    const pooled = transport(local.ports.smtp, { pool: true });
    try {
      const [requestsBefore, messagesBefore, connectionsBefore] = [worker.requests.length, worker.messages.length, worker.connections];
      for (let i = 0; i < 20; i++) {
        expect((await pooled.sendMail(simpleMail({ subject: `pooled ${i}` }))).response).toMatch(/^250 2\.0\.0 /);
      }
      const paths = worker.requests.slice(requestsBefore).map((request) => request.path.slice(request.path.lastIndexOf("/") + 1));
      // the session's AUTH and its first MAIL FROM check, then nothing but the messages themselves
      expect(paths.filter((path) => path === "auth")).toHaveLength(1);
      expect(paths.filter((path) => path === "sender")).toHaveLength(1);
      expect(paths.filter((path) => path === "messages")).toHaveLength(20);
      expect(worker.connections - connectionsBefore).toBe(1);
      const stored = worker.messages.slice(messagesBefore).map((message) => message.raw.toString("utf8").match(/^Subject: (.*)$/m)?.[1]);
      expect(stored).toEqual(Array.from({ length: 20 }, (_, i) => `pooled ${i}`));
    } finally {
      pooled.close();
      await local.bridge.close({ timeoutMs: 500 });
    }
  });

  it("a revoked credential is refused at the next AUTH once the cache (AUTH_CACHE_TTL_MS) has expired", async () => {
    worker.addCredential("smtp_doomed", "doomed-password-0123456789abcdef0123");
    const local = await startBridge(worker, { AUTH_CACHE_TTL_MS: "200" });
    try {
      const send = () => transport(local.ports.smtp, { user: "smtp_doomed", pass: "doomed-password-0123456789abcdef0123" }).sendMail(simpleMail());
      expect((await send()).response).toMatch(/^250 /);
      worker.revoke("smtp_doomed");
      await new Promise((resolve) => setTimeout(resolve, 250));
      const error = await sendError(send());
      expect(error.response).toMatch(/^535 5\.7\.8 /);
    } finally {
      await local.bridge.close({ timeoutMs: 500 });
    }
  });
});

describe("refusing mail with the right reply", () => {
  it("an unverified MAIL FROM domain gets 550 5.7.1 at MAIL FROM, before any DATA", async () => {
    const before = worker.requests.filter((request) => request.path.endsWith("/messages")).length;
    const error = await sendError(transport(started.ports.smtp).sendMail(simpleMail({ from: "app@unverified.test" })));
    expect(error.command).toBe("MAIL FROM");
    expect(error.response).toMatch(/^550 5\.7\.1 The domain unverified\.test is not a verified sending domain/);
    expect(worker.requests.filter((request) => request.path.endsWith("/messages")).length).toBe(before);
  });

  it("a message over MAX_MESSAGE_BYTES gets 552 5.3.4, and SIZE is announced", async () => {
    const local = await startBridge(worker, { MAX_MESSAGE_BYTES: "4096", ALLOW_INSECURE_AUTH_ON_LOOPBACK: "true" });
    try {
      // a client that ignores SIZE: refused after DATA
      const { dialog } = await SmtpDialog.open(local.ports.smtp);
      expect(await dialog.send("EHLO client.test")).toContain("SIZE 4096");
      expect(await dialog.send(`AUTH PLAIN ${plainAuth(USER, PASSWORD)}`)).toMatch(/^235 /);
      expect(await dialog.send(`MAIL FROM:<${FROM}>`)).toMatch(/^250 /);
      expect(await dialog.send("RCPT TO:<ann@example.org>")).toMatch(/^250 /);
      expect(await dialog.send("DATA")).toMatch(/^354 /);
      expect(await dialog.send(`${`From: ${FROM}\r\nSubject: big\r\n\r\n${"y".repeat(76)}\r\n`.repeat(100)}.`)).toMatch(
        /^552 5\.3\.4 Message too big/,
      );
      dialog.close();
      // nodemailer passes SIZE= with MAIL FROM or sends it whole: 552 5.3.4 either way
      const before = worker.messages.length;
      const error = await sendError(transport(local.ports.smtp).sendMail(simpleMail({ text: "x".repeat(10_000) })));
      expect(error.responseCode).toBe(552);
      expect(error.response).toMatch(/^552 5\.3\.4 /);
      expect(worker.messages.length).toBe(before);
    } finally {
      await local.bridge.close({ timeoutMs: 500 });
    }
  });

  it.each([
    [
      "no credits (402)",
      { status: 402, body: { code: "insufficient_credits", message: "Not enough sending credits: 1 needed, 0 available" } },
      /^452 4\.3\.1 Insufficient credits: Not enough sending credits/,
    ],
    [
      "the daily limit (429)",
      { status: 429, body: { code: "daily_limit_reached", message: "Daily sending limit of 100 reached" }, headers: { "Retry-After": "3600" } },
      /^451 4\.7\.0 Daily sending limit of 100 reached \(retry after 3600 s\)$/,
    ],
    [
      "a disabled feature (403)",
      { status: 403, body: { code: "feature_disabled", message: "Your plan does not include: smtp_relay" } },
      /^550 5\.7\.1 Your plan does not include/,
    ],
    [
      "a too large message (413)",
      { status: 413, body: { code: "payload_too_large", message: "Message too large" } },
      /^552 5\.3\.4 Message too large$/,
    ],
    [
      "an invalid recipient (422)",
      { status: 422, body: { code: "validation_failed", message: "The request is invalid", errors: { "to.0": ["Invalid email address"] } } },
      /^550 5\.1\.3 The request is invalid \(to\.0: Invalid email address\)$/,
    ],
    [
      "an invalid message (422)",
      { status: 422, body: { code: "validation_failed", message: "The message has no Subject", errors: { subject: ["Required"] } } },
      /^550 5\.6\.0 The message has no Subject/,
    ],
    ["a Worker error (500)", { status: 500, body: { code: "internal_error", message: "boom" } }, /^451 4\.3\.0 /],
    [
      "an account the operator is moving (503)",
      { status: 503, body: { code: "account_moving", message: "The operator is moving this account's data" } },
      /^451 4\.3\.0 /,
    ],
  ])("the Worker refusing for %s maps to the SMTP reply", async (_name, reply, expected) => {
    worker.messageReplies.push(reply);
    const error = await sendError(transport(started.ports.smtp).sendMail(simpleMail()));
    expect(error.response).toMatch(expected);
    const log = started.logs.filter((entry) => entry.event === "smtp.transaction").at(-1);
    expect(log).toMatchObject({
      phase: "data",
      outcome: reply.status === 402 || reply.status === 429 || reply.status >= 500 ? "deferred" : "rejected",
    });
  });

  it("more than 50 recipients: the 51st gets 452 4.5.3", async () => {
    const to = Array.from({ length: 51 }, (_, i) => `r${i}@example.org`);
    const info = await transport(started.ports.smtp).sendMail(simpleMail({ to }));
    expect(info.accepted).toHaveLength(50);
    expect(info.rejectedErrors?.[0]?.response).toMatch(/^452 4\.5\.3 /);
    expect(worker.messages.at(-1)?.rcpt_to).toHaveLength(50);
  });

  it("the recipient cap is the one the Worker states at AUTH; a repeated address does not count twice", async () => {
    worker.maxRecipients = 3;
    const local = await startBridge(worker, { ALLOW_INSECURE_AUTH_ON_LOOPBACK: "true" });
    try {
      const { dialog } = await SmtpDialog.open(local.ports.smtp);
      await dialog.send("EHLO client.test");
      expect(await dialog.send(`AUTH PLAIN ${plainAuth(USER, PASSWORD)}`)).toMatch(/^235 /);
      expect(await dialog.send(`MAIL FROM:<${FROM}>`)).toMatch(/^250 /);
      for (const rcpt of ["a@example.org", "b@example.org", "c@example.org"]) expect(await dialog.send(`RCPT TO:<${rcpt}>`)).toMatch(/^250 /);
      expect(await dialog.send("RCPT TO:<d@example.org>")).toMatch(/^452 4\.5\.3 Too many recipients: at most 3 per message/);
      expect(await dialog.send("RCPT TO:<B@example.org>")).toMatch(/^250 /);
      expect(await dialog.send("DATA")).toMatch(/^354 /);
      expect(await dialog.send(`From: ${FROM}\r\nSubject: three\r\n\r\nbody\r\n.`)).toMatch(/^250 2\.0\.0 Ok: queued as msg_fake/);
      expect(worker.messages.at(-1)?.rcpt_to).toEqual(["a@example.org", "B@example.org", "c@example.org"]);
      dialog.close();
    } finally {
      worker.maxRecipients = 50;
      await local.bridge.close({ timeoutMs: 500 });
    }
  });

  it("caps concurrent connections per IP with 421 4.7.0", async () => {
    const local = await startBridge(worker, { MAX_CONNECTIONS_PER_IP: "2" });
    try {
      const first = await SmtpDialog.open(local.ports.smtp);
      const second = await SmtpDialog.open(local.ports.alt);
      const third = await SmtpDialog.open(local.ports.smtp);
      expect(first.greeting).toMatch(/^220 /);
      expect(second.greeting).toMatch(/^220 /);
      expect(third.greeting).toMatch(/^421 4\.7\.0 Too many connections from your address/);
      first.dialog.close();
      await new Promise((resolve) => setTimeout(resolve, 100));
      const fourth = await SmtpDialog.open(local.ports.smtp);
      expect(fourth.greeting).toMatch(/^220 /);
      for (const open of [second, third, fourth]) open.dialog.close();
    } finally {
      await local.bridge.close({ timeoutMs: 500 });
    }
  });
});

describe("when the Worker is away", () => {
  it("answers 451 4.3.0 mid-session, and the client's retry later is stored exactly once", async () => {
    const local = await startBridge(worker);
    const pooled = transport(local.ports.smtp, { pool: true });
    try {
      expect((await pooled.sendMail(simpleMail())).response).toMatch(/^250 /);
      const port = Number(new URL(worker.url).port);
      await worker.stop();
      const mail = simpleMail({ messageId: "<retry-once@verified.test>", subject: "retried" });
      const error = await sendError(pooled.sendMail(mail));
      expect(error.response).toMatch(/^451 4\.3\.0 /);
      expect(local.logs.filter((entry) => entry.event === "smtp.transaction").at(-1)).toMatchObject({ outcome: "deferred" });

      await worker.start(port);
      expect((await pooled.sendMail(mail)).response).toMatch(/^250 2\.0\.0 /);
      const stored = worker.messages.filter((message) => message.raw.toString().includes("<retry-once@verified.test>"));
      expect(stored).toHaveLength(1);
    } finally {
      pooled.close();
      await local.bridge.close({ timeoutMs: 500 });
    }
  });

  it("a Worker that refuses the bridge's own signature (BRIDGE_SECRET, clock or version) is a temporary failure, never 535", async () => {
    const local = await startBridge(worker, { BRIDGE_SECRET: "not-the-worker-bridge-secret" });
    try {
      const error = await sendError(transport(local.ports.smtp).sendMail(simpleMail()));
      expect(error.response).toMatch(/^454 4\.7\.0 /);
      expect(local.logs.filter((entry) => entry.event === "smtp.auth").at(-1)).toMatchObject({
        outcome: "deferred",
        error: expect.stringContaining("refused the bridge's signature"),
      });
    } finally {
      await local.bridge.close({ timeoutMs: 500 });
      // the refused requests were this case's point; the suite's check is for every other case
      worker.requests.splice(0, worker.requests.length, ...worker.requests.filter((request) => request.signatureValid));
    }
  });

  it("answers 451 4.3.0 when the Worker does not answer within WORKER_TIMEOUT_MS", async () => {
    const local = await startBridge(worker, { WORKER_TIMEOUT_MS: "200" });
    worker.messageDelayMs = 600;
    try {
      const error = await sendError(transport(local.ports.smtp).sendMail(simpleMail()));
      expect(error.response).toMatch(/^451 4\.3\.0 /);
      expect(local.logs.filter((entry) => entry.event === "smtp.transaction").at(-1)).toMatchObject({
        outcome: "deferred",
        error: expect.stringContaining("unreachable"),
      });
    } finally {
      worker.messageDelayMs = 0;
      await local.bridge.close({ timeoutMs: 500 });
    }
  });
});

describe("graceful shutdown", () => {
  beforeEach(() => {
    worker.messageDelayMs = 0;
  });

  it("finishes the message in DATA, says 421 to idle sessions, refuses new connections, then resolves", async () => {
    const local = await startBridge(worker);
    const idle = await SmtpDialog.open(local.ports.smtp);
    expect(await idle.dialog.send("EHLO idle.test")).toMatch(/^250/);
    const messageCalls = () => worker.requests.filter((request) => request.path.endsWith("/messages")).length;
    const callsBefore = messageCalls();
    worker.messageDelayMs = 400;
    const busy = transport(local.ports.smtps, { secure: true }).sendMail(simpleMail({ subject: "in flight" }));
    // wait until the busy session is inside DATA, waiting for the (slow) Worker
    const deadline = Date.now() + 5000;
    while (messageCalls() === callsBefore && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(messageCalls()).toBe(callsBefore + 1);

    const closed = local.bridge.close({ timeoutMs: 5000 });
    expect(await idle.dialog.next()).toMatch(/^421 4\.3\.2 Service shutting down/);
    const info = await busy;
    expect(info.response).toMatch(/^250 2\.0\.0 Ok: queued as/);
    await closed;
    expect(local.bridge.sessionCount).toBe(0);
    await expect(transport(local.ports.smtp).verify()).rejects.toMatchObject({ code: expect.stringMatching(/ECONNREFUSED|ESOCKET|ECONNECTION/) });
  });
});

describe("bytes in flight (MAX_BYTES_IN_FLIGHT)", () => {
  // `bytes` bytes whose body has every byte value in lines of 998 (CR and LF only as the line ends, as SMTP needs):
  // a step that treated the message as text would change it
  const binaryMessage = (bytes: number, subject: string) => {
    const head = Buffer.from(`From: <${FROM}>\r\nTo: <ann@example.org>\r\nSubject: ${subject}\r\nContent-Type: application/octet-stream\r\n\r\n`);
    const body = Buffer.alloc(bytes - head.length);
    for (let i = 0; i < body.length; i++) {
      const column = i % 1000;
      body[i] = column === 998 ? 0x0d : column === 999 ? 0x0a : i % 256 === 0x0a || i % 256 === 0x0d ? 0x41 : i % 256;
    }
    body.set([0x41, 0x0d, 0x0a], body.length - 3);
    return Buffer.concat([head, body]);
  };
  const messageCalls = () => worker.requests.filter((request) => request.path.endsWith("/messages")).length;
  const spoolDirs: string[] = [];
  const spoolDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "bridge-spool-test-"));
    spoolDirs.push(dir);
    return dir;
  };

  afterEach(() => {
    worker.messageDelayMs = 0;
  });

  afterAll(() => {
    for (const dir of spoolDirs) rmSync(dir, { recursive: true, force: true });
  });

  it("a message that would go past the cap gets 451 4.3.1 and is not kept; messages under it relay byte for byte", async () => {
    const dir = spoolDir();
    const local = await startBridge(worker, { MAX_MESSAGE_BYTES: "100000", MAX_BYTES_IN_FLIGHT: "150000", SPOOL_DIR: dir });
    try {
      const first = binaryMessage(90_000, "first");
      const second = binaryMessage(90_000, "second");
      worker.messageDelayMs = 800;
      const callsBefore = messageCalls();
      const inFlight = transport(local.ports.smtp).sendMail({ envelope: { from: FROM, to: ["ann@example.org"] }, raw: first });
      // the first message's bytes are held until the (slow) Worker answers
      const deadline = Date.now() + 5000;
      while (messageCalls() === callsBefore && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(messageCalls()).toBe(callsBefore + 1);
      // spool files are unlinked as soon as they are open: nothing is left behind, even by a crash
      expect(readdirSync(dir)).toEqual([]);

      const stored = worker.messages.length;
      const error = await sendError(transport(local.ports.smtp).sendMail({ envelope: { from: FROM, to: ["ann@example.org"] }, raw: second }));
      expect(error.responseCode).toBe(451);
      expect(error.response).toMatch(/^451 4\.3\.1 Insufficient system storage/);
      expect(local.logs.filter((entry) => entry.event === "smtp.transaction").at(-1)).toMatchObject({
        outcome: "deferred",
        error: expect.stringContaining("MAX_BYTES_IN_FLIGHT"),
      });

      expect((await inFlight).response).toMatch(/^250 2\.0\.0 /);
      expect(worker.messages).toHaveLength(stored + 1);
      expect(sha256(worker.messages.at(-1)?.raw ?? Buffer.alloc(0))).toBe(sha256(first));

      // the first message's bytes were given back: the client's retry of the second is taken
      worker.messageDelayMs = 0;
      const retried = await transport(local.ports.smtp).sendMail({ envelope: { from: FROM, to: ["ann@example.org"] }, raw: second });
      expect(retried.response).toMatch(/^250 2\.0\.0 /);
      expect(sha256(worker.messages.at(-1)?.raw ?? Buffer.alloc(0))).toBe(sha256(second));
    } finally {
      await local.bridge.close({ timeoutMs: 500 });
    }
  });

  it("a message of several MiB, of any bytes and a length not divisible by 3, reaches the Worker byte for byte", async () => {
    const raw = binaryMessage(3 * 1024 * 1024 + 1, "large");
    expect(raw.length % 3).not.toBe(0);
    const info = await transport(started.ports.smtp).sendMail({ envelope: { from: FROM, to: ["ann@example.org"] }, raw });
    expect(info.response).toMatch(/^250 2\.0\.0 /);
    const received = worker.messages.at(-1)?.raw ?? Buffer.alloc(0);
    expect(received.length).toBe(raw.length);
    expect(sha256(received)).toBe(sha256(raw));
  });

  it("the bytes of a client that hangs up in the middle of DATA are given back", async () => {
    const local = await startBridge(worker, {
      MAX_MESSAGE_BYTES: "100000",
      MAX_BYTES_IN_FLIGHT: "150000",
      ALLOW_INSECURE_AUTH_ON_LOOPBACK: "true",
      SPOOL_DIR: spoolDir(),
    });
    try {
      const { dialog } = await SmtpDialog.open(local.ports.smtp);
      await dialog.send("EHLO client.test");
      expect(await dialog.send(`AUTH PLAIN ${plainAuth(USER, PASSWORD)}`)).toMatch(/^235 /);
      expect(await dialog.send(`MAIL FROM:<${FROM}>`)).toMatch(/^250 /);
      expect(await dialog.send("RCPT TO:<ann@example.org>")).toMatch(/^250 /);
      expect(await dialog.send("DATA")).toMatch(/^354 /);
      dialog.write(`From: ${FROM}\r\nSubject: cut\r\n\r\n${`${"z".repeat(98)}\r\n`.repeat(900)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      dialog.close();
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(local.logs.filter((entry) => entry.event === "smtp.transaction").at(-1)).toMatchObject({ outcome: "aborted" });

      const raw = binaryMessage(90_000, "after the hang-up");
      expect((await transport(local.ports.smtp).sendMail({ envelope: { from: FROM, to: ["ann@example.org"] }, raw })).response).toMatch(
        /^250 2\.0\.0 /,
      );
    } finally {
      await local.bridge.close({ timeoutMs: 500 });
    }
  });

  it("a SPOOL_DIR that cannot hold files stops the bridge at start, naming the variable", async () => {
    const config = loadConfig({
      WORKER_URL: worker.url,
      BRIDGE_SECRET,
      SMTP_PORT: "0",
      SMTP_ALT_PORT: "0",
      SMTPS_PORT: "0",
      SPOOL_DIR: join(tmpdir(), "no-such-dir-for-the-bridge", "spool"),
    });
    const bridge = createServer(config, { logger: createMemoryLogger() });
    await expect(bridge.listen()).rejects.toMatchObject({ code: "ENOENT", message: expect.stringMatching(/^SPOOL_DIR .* cannot hold messages/) });
  });
});
