import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { config } from "../../src/config";
import { SmtpTransport, smtpTransportFromConfig } from "../../src/domain/transport/smtp";
import { encodeDataPayload } from "../../src/domain/transport/smtp-connection";
import type { SendFailure, SendOutcome, SendSuccess } from "../../src/domain/transport/types";

// Runs against the real dev mail sink started by the global setup. The sink is shared with other test files,
// so every test uses its own recipient addresses and failure rules match those addresses, never "*".

type SinkMessage = {
  id: string;
  session_id: string;
  connected_at: string;
  mail_from: string;
  rcpt_to: string[];
  subject: string | null;
  auth_user: string | null;
};
type SinkStats = { connections: number; messages: number; rsets: number };

const sink = env.TEST_SINK_HTTP_URL;
let counter = 0;
const unique = (label: string) => `${label}-${Date.now().toString(36)}-${counter++}@example.test`;

async function sinkMessagesTo(address: string): Promise<SinkMessage[]> {
  const response = await fetch(`${sink}/api/messages?to=${encodeURIComponent(address)}`);
  return ((await response.json()) as { data: SinkMessage[] }).data;
}

async function sinkRaw(id: string): Promise<Uint8Array> {
  return new Uint8Array(await (await fetch(`${sink}/api/messages/${id}/raw`)).arrayBuffer());
}

async function sinkStats(): Promise<SinkStats> {
  return (await fetch(`${sink}/api/stats`)).json();
}

async function addRule(rule: { match: string; phase: "mail" | "rcpt" | "data"; responses: { code: number; message: string }[] }) {
  const response = await fetch(`${sink}/api/rules`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(rule) });
  expect(response.status).toBe(201);
}

function message(subject: string, body = "Hello.\r\n"): string {
  return `From: sender@acme.test\r\nTo: someone@example.test\r\nSubject: ${subject}\r\nMessage-ID: <${crypto.randomUUID()}@acme.test>\r\n\r\n${body}`;
}

function expectSuccess(outcome: SendOutcome): asserts outcome is SendSuccess {
  expect(outcome, JSON.stringify(outcome)).toMatchObject({ ok: true, code: 250 });
}

function expectFailure(outcome: SendOutcome): asserts outcome is SendFailure {
  expect(outcome.ok, JSON.stringify(outcome)).toBe(false);
}

const transports: SmtpTransport[] = [];
function transport(overrides: Parameters<typeof smtpTransportFromConfig>[1] = {}): SmtpTransport {
  const created = smtpTransportFromConfig(config(env), { commandTimeoutMs: 5_000, ...overrides });
  transports.push(created);
  return created;
}

afterEach(async () => {
  await Promise.all(transports.splice(0).map((t) => t.close()));
});

describe("SMTP transport against the dev mail sink", () => {
  for (const pipelining of [true, false]) {
    it(`sends a batch over one connection with RSET between messages (pipelining ${pipelining ? "on" : "off"})`, async () => {
      const smtp = transport({ pipelining });
      const rcpt = unique("batch");
      const before = await sinkStats();
      const outcomes = await Promise.all([1, 2, 3].map((n) => smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message(`batch ${n}`))));
      for (const outcome of outcomes) {
        expectSuccess(outcome);
        expect(outcome.response).toMatch(/^250 Ok: queued as \d+$/);
        expect(outcome.perRecipient).toEqual([{ recipient: rcpt, ok: true, code: 250, response: expect.stringMatching(/^250/) }]);
      }
      const after = await sinkStats();

      const received = await sinkMessagesTo(rcpt);
      expect(received.map((m) => m.subject).sort()).toEqual(["batch 1", "batch 2", "batch 3"]);
      expect(new Set(received.map((m) => m.session_id)).size).toBe(1);
      expect(received[0]!.mail_from).toBe("bounces@acme.test");
      // Other suites may use the sink at the same time, so only lower bounds hold for the shared counters.
      expect(after.rsets - before.rsets).toBeGreaterThanOrEqual(2);
      expect(after.connections - before.connections).toBeGreaterThanOrEqual(1);
    });
  }

  it("delivers the raw bytes unchanged, including lines that start with a dot", async () => {
    const rcpt = unique("bytes");
    const raw = `${message("dots", ".leading dot\r\n..two dots\r\n.\r\nmiddle . line\r\n. space\r\nünïcödé 8-bit\r\n")}last line without dot\r\n`;
    const outcome = await transport().send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, raw);
    expectSuccess(outcome);
    const [stored] = await sinkMessagesTo(rcpt);
    expect(await sinkRaw(stored!.id)).toEqual(new TextEncoder().encode(raw));
  });

  it("normalises bare LF to CRLF and terminates a message without final line break", async () => {
    const rcpt = unique("lf");
    const outcome = await transport().send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, "Subject: lf\n\nline one\n.dot\nno newline");
    expectSuccess(outcome);
    const [stored] = await sinkMessagesTo(rcpt);
    expect(new TextDecoder().decode(await sinkRaw(stored!.id))).toBe("Subject: lf\r\n\r\nline one\r\n.dot\r\nno newline\r\n");
  });

  it("reports 451 at RCPT as a temporary failure and keeps the connection usable", async () => {
    const smtp = transport();
    const rcpt = unique("greylisted");
    await addRule({ match: rcpt, phase: "rcpt", responses: [{ code: 451, message: "4.3.0 Try again later" }] });
    const outcome = await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message("greylisted"));
    expectFailure(outcome);
    expect(outcome).toMatchObject({ kind: "temporary", stage: "rcpt", code: 451, enhanced: "4.3.0", connectionError: false });
    expect(outcome.response).toBe("451 4.3.0 Try again later");
    expect(outcome.perRecipient).toEqual([
      { recipient: rcpt, ok: false, kind: "temporary", code: 451, enhanced: "4.3.0", response: "451 4.3.0 Try again later" },
    ]);

    // The rule is used up: the retry on the same transport goes through.
    expectSuccess(await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message("greylisted, retried")));
    expect((await sinkMessagesTo(rcpt)).map((m) => m.subject)).toEqual(["greylisted, retried"]);
  });

  it("reports 550 5.1.1 as a permanent failure with the enhanced code", async () => {
    const rcpt = unique("unknown");
    await addRule({ match: rcpt, phase: "rcpt", responses: [{ code: 550, message: "5.1.1 <unknown>: Recipient address rejected" }] });
    const outcome = await transport().send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message("unknown user"));
    expectFailure(outcome);
    expect(outcome).toMatchObject({ kind: "permanent", stage: "rcpt", code: 550, enhanced: "5.1.1" });
    expect(await sinkMessagesTo(rcpt)).toEqual([]);
  });

  for (const pipelining of [true, false]) {
    const mode = `pipelining ${pipelining ? "on" : "off"}`;

    it(`delivers to the accepted recipients and reports the rejected ones when RCPT partly fails (${mode})`, async () => {
      const good = unique("good");
      const bad = unique("bad");
      const later = unique("later");
      await addRule({ match: bad, phase: "rcpt", responses: [{ code: 550, message: "5.1.1 No such user" }] });
      await addRule({ match: later, phase: "rcpt", responses: [{ code: 452, message: "4.2.2 Mailbox full" }] });
      const outcome = await transport({ pipelining }).send({ mailFrom: "bounces@acme.test", rcptTo: [good, bad, later] }, message("partial"));
      expectSuccess(outcome);
      expect(outcome.perRecipient).toEqual([
        { recipient: good, ok: true, code: 250, response: expect.stringMatching(/^250/) },
        { recipient: bad, ok: false, kind: "permanent", code: 550, enhanced: "5.1.1", response: "550 5.1.1 No such user" },
        { recipient: later, ok: false, kind: "temporary", code: 452, enhanced: "4.2.2", response: "452 4.2.2 Mailbox full" },
      ]);
      const [delivered] = await sinkMessagesTo(good);
      expect(delivered!.rcpt_to).toEqual([good]);
    });

    it(`reports every recipient rejected as a failure, temporary when any retry could succeed (${mode})`, async () => {
      const smtp = transport({ pipelining });
      const bad = unique("bad");
      const later = unique("later");
      await addRule({
        match: bad,
        phase: "rcpt",
        responses: [
          { code: 550, message: "5.1.1 No such user" },
          { code: 550, message: "5.1.1 No such user" },
        ],
      });
      await addRule({ match: later, phase: "rcpt", responses: [{ code: 450, message: "4.2.1 Try later" }] });
      const mixed = await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [bad, later] }, message("none accepted"));
      expectFailure(mixed);
      expect(mixed).toMatchObject({ kind: "temporary", stage: "rcpt", code: 550, enhanced: "5.1.1" });
      expect(mixed.perRecipient?.map((r) => [r.recipient, r.ok, r.code])).toEqual([
        [bad, false, 550],
        [later, false, 450],
      ]);
      const permanent = await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [bad] }, message("none accepted"));
      expect(permanent).toMatchObject({ ok: false, kind: "permanent", stage: "rcpt", code: 550 });
      // The session is still in sync after DATA was refused for lack of recipients.
      expectSuccess(await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [later] }, message("now accepted")));
    });
  }

  it("reports a rejected MAIL FROM and a rejected message after DATA", async () => {
    const smtp = transport();
    const sender = unique("sender");
    const rcpt = unique("data");
    await addRule({ match: sender, phase: "mail", responses: [{ code: 553, message: "5.7.1 Sender not allowed" }] });
    await addRule({ match: rcpt, phase: "data", responses: [{ code: 554, message: "5.6.0 Message rejected as spam" }] });

    const mail = await smtp.send({ mailFrom: sender, rcptTo: [unique("any")] }, message("bad sender"));
    expectFailure(mail);
    expect(mail).toMatchObject({ kind: "permanent", stage: "mail", code: 553, enhanced: "5.7.1" });

    const data = await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message("spam"));
    expectFailure(data);
    expect(data).toMatchObject({ kind: "permanent", stage: "message", code: 554, enhanced: "5.6.0" });

    expectSuccess(await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message("after failures")));
  });

  it("opens a new connection when the server closed the previous one with 421", async () => {
    const smtp = transport();
    const rcpt = unique("closing");
    await addRule({ match: rcpt, phase: "rcpt", responses: [{ code: 421, message: "4.4.2 Closing connection" }] });
    const first = await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message("closing"));
    expectFailure(first);
    expect(first).toMatchObject({ kind: "temporary", stage: "rcpt", code: 421 });

    const other = unique("closing-other");
    expectSuccess(await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message("after 421")));
    expectSuccess(await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [other] }, message("after 421, reused")));
    const [afterClose] = await sinkMessagesTo(rcpt);
    const [reused] = await sinkMessagesTo(other);
    expect(afterClose!.session_id).toBe(reused!.session_id);
  });

  // Sends queued together are pipelined: the next message's commands go out behind the previous final dot, so the
  // replies to one message's end of data and the next message's commands interleave on the wire.
  it("gives each of several queued messages its own final reply when one is refused after its data", async () => {
    const smtp = transport();
    const [first, refused, last] = [unique("queued-a"), unique("queued-b"), unique("queued-c")];
    await addRule({ match: refused, phase: "data", responses: [{ code: 554, message: "5.7.1 Message refused" }] });
    const outcomes = await Promise.all(
      [first, refused, last].map((rcpt) => smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message(`queued ${rcpt}`))),
    );
    expectSuccess(outcomes[0]!);
    expectFailure(outcomes[1]!);
    expect(outcomes[1]).toMatchObject({ kind: "permanent", stage: "message", code: 554 });
    expect(outcomes[1]!.perRecipient).toEqual([expect.objectContaining({ recipient: refused, ok: false, code: 554 })]);
    expectSuccess(outcomes[2]!);
    const [a] = await sinkMessagesTo(first);
    const [c] = await sinkMessagesTo(last);
    expect(await sinkMessagesTo(refused)).toEqual([]);
    expect(a!.session_id).toBe(c!.session_id);
  });

  it("retries the queued messages on a new connection when the server closes with 421 after a message's data", async () => {
    const smtp = transport();
    const [closing, second, third] = [unique("closing-data"), unique("after-close-b"), unique("after-close-c")];
    await addRule({ match: closing, phase: "data", responses: [{ code: 421, message: "4.3.2 Shutting down" }] });
    const outcomes = await Promise.all(
      [closing, second, third].map((rcpt) => smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message(`closing ${rcpt}`))),
    );
    expectFailure(outcomes[0]!);
    expect(outcomes[0]).toMatchObject({ kind: "temporary", stage: "message", code: 421 });
    expectSuccess(outcomes[1]!);
    expectSuccess(outcomes[2]!);
    expect(await sinkMessagesTo(closing)).toEqual([]);
    expect(await sinkMessagesTo(second)).toHaveLength(1);
    expect(await sinkMessagesTo(third)).toHaveLength(1);
  });

  it("connects when warmed up, before any send, then sends over that connection and keeps reusing it", async () => {
    const smtp = transport();
    const rcpt = unique("warm");
    smtp.warm();
    // Warming again while it opens changes nothing.
    smtp.warm();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const firstSendAt = Date.now();
    for (const n of [1, 2]) expectSuccess(await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message(`warm ${n}`)));
    const received = await sinkMessagesTo(rcpt);
    expect(received.map((m) => m.session_id)).toEqual([received[0]!.session_id, received[0]!.session_id]);
    // The sink accepted the connection before the first send was even asked for.
    expect(Date.parse(received[0]!.connected_at)).toBeLessThan(firstSendAt);
  });

  it("a warm-up that fails is the first send's connection failure, and the next send connects again", async () => {
    const smtp = new SmtpTransport({ host: "127.0.0.1", port: 1, secure: "off", connectTimeoutMs: 5_000 });
    smtp.warm();
    for (const n of [1, 2]) {
      const outcome = await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: ["x@example.test"] }, message(`nowhere ${n}`));
      expectFailure(outcome);
      expect(outcome).toMatchObject({ kind: "temporary", stage: "connect", code: 0, connectionError: true });
    }
    await smtp.close();
  });

  it("closing a warmed-up transport that sent nothing ends its session without a message", async () => {
    const smtp = transport();
    const rcpt = unique("warm-idle");
    smtp.warm();
    await smtp.close();
    expectSuccess(await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message("after close")));
    expect(await sinkMessagesTo(rcpt)).toHaveLength(1);
  });

  it("starts a new session after maxMessagesPerConnection messages", async () => {
    const smtp = transport({ maxMessagesPerConnection: 2 });
    const rcpt = unique("rotate");
    for (const n of [1, 2, 3]) expectSuccess(await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message(`rotate ${n}`)));
    const sessions = (await sinkMessagesTo(rcpt)).map((m) => m.session_id);
    expect(sessions[0]).toBe(sessions[1]);
    expect(sessions[2]).not.toBe(sessions[0]);
  });

  it("authenticates with AUTH PLAIN or LOGIN when credentials are configured", async () => {
    for (const mechanism of ["PLAIN", "LOGIN"] as const) {
      const rcpt = unique("auth");
      const user = `user-${mechanism.toLowerCase()}`;
      const smtp = transport({ user, pass: "secret", authMechanisms: [mechanism] });
      expectSuccess(await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: [rcpt] }, message("authenticated")));
      const [stored] = await sinkMessagesTo(rcpt);
      expect(stored!.auth_user).toBe(user);
    }
  });

  it("refuses to send in clear when STARTTLS is required but not offered", async () => {
    const outcome = await transport({ secure: "starttls" }).send({ mailFrom: "bounces@acme.test", rcptTo: [unique("tls")] }, message("x"));
    expectFailure(outcome);
    expect(outcome).toMatchObject({ kind: "temporary", stage: "starttls", connectionError: false });
    expect(outcome.response).toMatch(/does not offer STARTTLS/);
  });

  it("fails as a temporary connection failure when implicit TLS meets a plain server", async () => {
    const outcome = await transport({ secure: "tls", connectTimeoutMs: 3_000 }).send(
      { mailFrom: "bounces@acme.test", rcptTo: [unique("tls")] },
      message("x"),
    );
    expectFailure(outcome);
    expect(outcome).toMatchObject({ kind: "temporary", connectionError: true });
  });

  it("reports a refused connection as a temporary connection failure", async () => {
    const smtp = new SmtpTransport({ host: "127.0.0.1", port: 1, secure: "off", connectTimeoutMs: 5_000 });
    const outcome = await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: ["x@example.test"] }, message("nowhere"));
    expectFailure(outcome);
    expect(outcome).toMatchObject({ kind: "temporary", stage: "connect", code: 0, connectionError: true });
    await smtp.close();
  });

  it("times out on a server that does not speak SMTP", async () => {
    const httpPort = Number(new URL(sink).port);
    const smtp = new SmtpTransport({ host: "127.0.0.1", port: httpPort, secure: "off", commandTimeoutMs: 300 });
    const outcome = await smtp.send({ mailFrom: "bounces@acme.test", rcptTo: ["x@example.test"] }, message("silence"));
    expectFailure(outcome);
    expect(outcome).toMatchObject({ kind: "temporary", stage: "connect", connectionError: true });
    expect(outcome.response).toMatch(/timed out after 300 ms waiting for reply to greeting/);
    await smtp.close();
  });

  it("refuses envelope addresses that would inject SMTP commands", async () => {
    const smtp = transport();
    const injected = await smtp.send({ mailFrom: "a@b.test>\r\nRCPT TO:<evil@x.test", rcptTo: ["x@example.test"] }, message("x"));
    expect(injected).toMatchObject({ ok: false, kind: "permanent", stage: "mail" });
    const badRcpt = await smtp.send({ mailFrom: "", rcptTo: ["ok@example.test", "x@y.test> NOTIFY=NEVER"] }, message("x"));
    expect(badRcpt).toMatchObject({ ok: false, kind: "permanent", stage: "rcpt" });
  });

  it("rejects an invalid SMTP_UPSTREAM_SECURE with a readable error", () => {
    expect(() => config({ ...env, SMTP_UPSTREAM_SECURE: "yes" })).toThrow(/SMTP_UPSTREAM_SECURE/);
  });

  it("refuses to build a transport without SMTP_UPSTREAM_HOST", () => {
    expect(() => smtpTransportFromConfig(config({ ...env, SMTP_UPSTREAM_HOST: "" }))).toThrow(/SMTP_UPSTREAM_HOST is not set/);
  });
});

describe("encodeDataPayload", () => {
  it("dot-stuffs, normalises line breaks and appends the terminator", () => {
    const decode = (raw: string) => new TextDecoder().decode(encodeDataPayload(raw).payload);
    expect(decode(".a\r\nb\n.\rc")).toBe("..a\r\nb\r\n..\r\nc\r\n.\r\n");
    expect(decode("")).toBe(".\r\n");
    expect(decode("x\r\n")).toBe("x\r\n.\r\n");
    expect(encodeDataPayload("ü").eightBit).toBe(true);
    expect(encodeDataPayload("u").eightBit).toBe(false);
  });
});
