// SMTP client over `cloudflare:sockets`, for handing signed messages to a smarthost (SES, Postmark, Mailgun,
// an own Postfix). Written here because no npm SMTP client runs on `cloudflare:sockets` and does what a queue
// consumer needs: nodemailer needs Node's net/tls; worker-mailer (the one Workers client) builds its own MIME
// instead of sending our DKIM-signed bytes, fails the whole message on the first rejected RCPT, opens a new
// session per mailer without RSET-based reuse and reports errors as strings without SMTP codes.
//
// One SmtpTransport holds one connection and reuses it for every message of a queue batch: RSET before each
// further transaction, a fresh connection when the server has closed the idle one. Commands are pipelined
// (RFC 2920) when the server offers it, so a message costs one round trip plus DATA.

import { connect } from "cloudflare:sockets";
import { z } from "zod";
import { bytesToBase64 } from "../../lib/crypto";
import type { Envelope, FailureKind, RecipientOutcome, SendFailure, SendOutcome, SmtpReply, SmtpStage, Transport } from "./types";

export type SmtpSecurity = "tls" | "starttls" | "off";

export interface SmtpTransportOptions {
  host: string;
  port: number;
  /** `tls`: implicit TLS (465); `starttls`: plain then upgraded, and refused if the server does not offer it; `off`: plain. */
  secure: SmtpSecurity;
  user?: string;
  pass?: string;
  /** SASL mechanisms to try, in order of preference, among those the server offers (default PLAIN, then LOGIN). */
  authMechanisms?: readonly ("PLAIN" | "LOGIN")[];
  /** Name sent in EHLO/HELO: a hostname, or an address literal like `[192.0.2.1]`. */
  clientName?: string;
  connectTimeoutMs?: number;
  /** Per reply for greeting, EHLO, AUTH, RSET, MAIL, RCPT and DATA. */
  commandTimeoutMs?: number;
  /** For writing the message and waiting for the final reply after `.`. */
  dataTimeoutMs?: number;
  /** Use PIPELINING when the server offers it (default true). */
  pipelining?: boolean;
  /** Open a new connection after this many messages; servers cap transactions per session. */
  maxMessagesPerConnection?: number;
}

const DEFAULTS = {
  clientName: "localhost",
  connectTimeoutMs: 10_000,
  commandTimeoutMs: 30_000,
  dataTimeoutMs: 120_000,
  maxMessagesPerConnection: 100,
};

const encoder = new TextEncoder();
const MAX_REPLY_BYTES = 64 * 1024;
// Envelope addresses go into command lines: anything that could end the line or the <...> is refused.
const ENVELOPE_ADDRESS = /^[^\s<>]+@[^\s<>]+$/;

/** The connection is unusable: closed, reset, timed out or out of protocol sync. */
class SmtpConnectionError extends Error {
  override name = "SmtpConnectionError";
}

/** A reply that ends the attempt at `stage`, e.g. 554 to the greeting or 535 to AUTH. */
class SmtpReplyError extends Error {
  override name = "SmtpReplyError";
  constructor(
    readonly stage: SmtpStage,
    readonly reply: SmtpReply,
  ) {
    super(reply.response);
  }
}

function parseEnhanced(text: string): string | undefined {
  return /^([245]\.\d{1,3}\.\d{1,3})(?:\s|$)/.exec(text)?.[1];
}

function kindOf(code: number): FailureKind {
  return code >= 500 && code < 600 ? "permanent" : "temporary";
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SmtpConnectionError(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  // The loser of the race may still reject later (e.g. a read cut off by close()); that must not surface as an
  // unhandled rejection.
  promise.catch(() => undefined);
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The DATA payload: line breaks normalised to CRLF (a bare CR or LF becomes CRLF, as the DKIM signer assumes),
 * lines starting with `.` doubled (RFC 5321 §4.5.2), a final CRLF if missing, then `.\r\n`.
 */
export function encodeDataPayload(raw: string | Uint8Array): { payload: Uint8Array; eightBit: boolean } {
  const bytes = typeof raw === "string" ? encoder.encode(raw) : raw;
  let extra = 3;
  let lineStart = true;
  let eightBit = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (byte === 0x0d) {
      if (bytes[i + 1] === 0x0a) i++;
      else extra++;
      lineStart = true;
    } else if (byte === 0x0a) {
      extra++;
      lineStart = true;
    } else {
      if (lineStart && byte === 0x2e) extra++;
      if (byte > 0x7f) eightBit = true;
      lineStart = false;
    }
  }
  if (!lineStart) extra += 2;

  const payload = new Uint8Array(bytes.length + extra);
  let o = 0;
  lineStart = true;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (byte === 0x0d || byte === 0x0a) {
      if (byte === 0x0d && bytes[i + 1] === 0x0a) i++;
      payload[o++] = 0x0d;
      payload[o++] = 0x0a;
      lineStart = true;
      continue;
    }
    if (lineStart && byte === 0x2e) payload[o++] = 0x2e;
    payload[o++] = byte;
    lineStart = false;
  }
  if (!lineStart) {
    payload[o++] = 0x0d;
    payload[o++] = 0x0a;
  }
  payload[o++] = 0x2e;
  payload[o++] = 0x0d;
  payload[o++] = 0x0a;
  return { payload: payload.subarray(0, o), eightBit };
}

/** EHLO keywords (upper-cased) with their parameters, e.g. `AUTH` → `PLAIN LOGIN`, `SIZE` → `52428800`. */
function parseCapabilities(lines: string[]): Map<string, string> {
  const capabilities = new Map<string, string>();
  // The first line is the server's greeting name, not a capability.
  for (const line of lines.slice(1)) {
    const match = /^([A-Za-z0-9-]+)(?:[ =](.*))?$/.exec(line.trim());
    if (!match) continue;
    const keyword = match[1]!.toUpperCase();
    const params = (match[2] ?? "").trim();
    // Old servers send both `AUTH PLAIN` and `AUTH=PLAIN`: merge the mechanisms.
    const previous = capabilities.get(keyword);
    capabilities.set(keyword, previous ? `${previous} ${params}` : params);
  }
  return capabilities;
}

/** One SMTP session on one socket: line reading, replies with timeouts, writes. */
class SmtpConnection {
  private socket: Socket;
  private reader: ReadableStreamDefaultReader<Uint8Array>;
  private writer: WritableStreamDefaultWriter<Uint8Array>;
  private decoder = new TextDecoder();
  private buffer = "";
  private closed = false;
  capabilities = new Map<string, string>();
  transactions = 0;

  constructor(private readonly options: ResolvedOptions) {
    try {
      this.socket = connect(
        { hostname: options.host, port: options.port },
        { secureTransport: options.secure === "tls" ? "on" : options.secure, allowHalfOpen: false },
      );
    } catch (error) {
      // connect() throws synchronously for destinations Workers refuse outright (e.g. port 25).
      throw new SmtpConnectionError(`connection to ${options.host}:${options.port} refused: ${messageOf(error)}`);
    }
    this.watchClose(this.socket);
    this.reader = this.socket.readable.getReader();
    this.writer = this.socket.writable.getWriter();
  }

  get isOpen(): boolean {
    return !this.closed;
  }

  /** Connects and runs greeting, EHLO, STARTTLS and AUTH. Throws SmtpConnectionError or SmtpReplyError. */
  async open(): Promise<void> {
    const { connectTimeoutMs, commandTimeoutMs } = this.options;
    try {
      await withTimeout(this.socket.opened, connectTimeoutMs, `connection to ${this.options.host}:${this.options.port}`);
    } catch (error) {
      throw new SmtpConnectionError(`connection to ${this.options.host}:${this.options.port} failed: ${messageOf(error)}`);
    }
    const greeting = await this.readReply(commandTimeoutMs, "greeting");
    if (greeting.code !== 220) throw new SmtpReplyError("greeting", greeting);
    await this.hello();

    if (this.options.secure === "starttls") {
      if (!this.capabilities.has("STARTTLS")) {
        throw new SmtpReplyError("starttls", { code: 0, response: "server does not offer STARTTLS; refusing to send in clear" });
      }
      const reply = await this.command("STARTTLS", "starttls");
      if (reply.code !== 220) throw new SmtpReplyError("starttls", reply);
      if (this.buffer.length > 0) {
        // Bytes after the 220 would be read as if they came over TLS (CVE-2011-0411 style injection).
        throw new SmtpConnectionError("server sent data after accepting STARTTLS");
      }
      this.reader.releaseLock();
      this.writer.releaseLock();
      try {
        this.socket = this.socket.startTls({ expectedServerHostname: this.options.host });
      } catch (error) {
        throw new SmtpConnectionError(`TLS upgrade failed: ${messageOf(error)}`);
      }
      this.watchClose(this.socket);
      this.reader = this.socket.readable.getReader();
      this.writer = this.socket.writable.getWriter();
      // RFC 3207 §4.2: forget what was learnt before TLS and ask again.
      await this.hello();
    }

    if (this.options.user) await this.authenticate(this.options.user, this.options.pass ?? "");
  }

  private async hello(): Promise<void> {
    const reply = await this.command(`EHLO ${this.options.clientName}`, "ehlo");
    if (reply.code === 250) {
      this.capabilities = parseCapabilities(reply.lines);
      return;
    }
    if (reply.code === 421) throw new SmtpReplyError("ehlo", reply);
    const helo = await this.command(`HELO ${this.options.clientName}`, "ehlo");
    if (helo.code !== 250) throw new SmtpReplyError("ehlo", helo);
    this.capabilities = new Map();
  }

  private async authenticate(user: string, pass: string): Promise<void> {
    const offered = (this.capabilities.get("AUTH") ?? "").toUpperCase().split(/\s+/);
    const mechanism = this.options.authMechanisms.find((candidate) => offered.includes(candidate));
    let reply: SmtpReply;
    if (mechanism === "PLAIN") {
      reply = await this.command(`AUTH PLAIN ${base64Utf8(`\u0000${user}\u0000${pass}`)}`, "auth");
    } else if (mechanism === "LOGIN") {
      reply = await this.command("AUTH LOGIN", "auth");
      if (reply.code === 334) reply = await this.command(base64Utf8(user), "auth");
      if (reply.code === 334) reply = await this.command(base64Utf8(pass), "auth");
    } else {
      throw new SmtpReplyError("auth", {
        code: 0,
        response: this.capabilities.has("AUTH")
          ? `server offers AUTH ${this.capabilities.get("AUTH")}, none of ${this.options.authMechanisms.join(", ")}`
          : "credentials are configured but the server does not offer AUTH",
      });
    }
    if (reply.code !== 235) throw new SmtpReplyError("auth", reply);
  }

  async command(line: string, stage: SmtpStage): Promise<SmtpReply & { lines: string[] }> {
    await this.write(`${line}\r\n`, this.options.commandTimeoutMs);
    return this.readReply(this.options.commandTimeoutMs, stage);
  }

  async write(data: string | Uint8Array, timeoutMs: number): Promise<void> {
    if (this.closed) throw new SmtpConnectionError("connection is closed");
    try {
      await withTimeout(this.writer.write(typeof data === "string" ? encoder.encode(data) : data), timeoutMs, "write");
    } catch (error) {
      this.abort();
      throw error instanceof SmtpConnectionError ? error : new SmtpConnectionError(`write failed: ${messageOf(error)}`);
    }
  }

  /** Reads one (possibly multi-line) reply. A timeout or a malformed reply closes the connection. */
  async readReply(timeoutMs: number, what: string): Promise<SmtpReply & { lines: string[] }> {
    try {
      return await withTimeout(this.readReplyLines(), timeoutMs, `reply to ${what}`);
    } catch (error) {
      this.abort();
      throw error instanceof SmtpConnectionError ? error : new SmtpConnectionError(`read failed: ${messageOf(error)}`);
    }
  }

  private async readReplyLines(): Promise<SmtpReply & { lines: string[] }> {
    const lines: string[] = [];
    for (;;) {
      const line = await this.readLine();
      const match = /^(\d{3})([ -]|$)(.*)$/.exec(line);
      if (!match) throw new SmtpConnectionError(`malformed reply line: ${line.slice(0, 200)}`);
      lines.push(match[3]!);
      if (match[2] !== "-") {
        const code = Number(match[1]);
        const text = lines.join(" ").trim();
        const enhanced = parseEnhanced(lines[0] ?? "");
        return { code, response: text ? `${code} ${text}` : String(code), lines, ...(enhanced ? { enhanced } : {}) };
      }
    }
  }

  private async readLine(): Promise<string> {
    for (;;) {
      const newline = this.buffer.indexOf("\n");
      if (newline >= 0) {
        const line = this.buffer.slice(0, newline).replace(/\r$/, "");
        this.buffer = this.buffer.slice(newline + 1);
        return line;
      }
      if (this.buffer.length > MAX_REPLY_BYTES) throw new SmtpConnectionError("reply line too long");
      const { value, done } = await this.reader.read();
      if (done) throw new SmtpConnectionError("connection closed by server");
      this.buffer += this.decoder.decode(value, { stream: true });
    }
  }

  /** Polite end: QUIT, then close. Never throws. */
  async quit(): Promise<void> {
    if (this.closed) return;
    try {
      await this.write("QUIT\r\n", 5_000);
      await withTimeout(this.readReplyLines(), 5_000, "reply to QUIT");
    } catch {
      // The server may drop the connection without answering QUIT; the session is over either way.
    }
    this.abort();
  }

  abort(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.close().catch(() => undefined);
  }

  private watchClose(socket: Socket): void {
    socket.closed.then(
      () => {
        if (this.socket === socket) this.closed = true;
      },
      () => {
        if (this.socket === socket) this.closed = true;
      },
    );
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function base64Utf8(text: string): string {
  return bytesToBase64(encoder.encode(text));
}

/** A reply that ends the attempt. Replies during session setup are about our configuration or the server, not
 * the message: retrying later (or after fixing the credentials) can succeed, so they never count as a bounce. */
function replyFailure(
  stage: SmtpStage,
  reply: SmtpReply,
  extra: { kind?: FailureKind; perRecipient?: RecipientOutcome[] } = {},
): SendFailure {
  const sessionStage = stage === "greeting" || stage === "ehlo" || stage === "starttls" || stage === "auth" || stage === "rset";
  return {
    ok: false,
    // 421: the server is shutting the session down; 530: it wants AUTH (our configuration), not a bad message.
    kind: extra.kind ?? (sessionStage || reply.code === 421 || reply.code === 530 ? "temporary" : kindOf(reply.code)),
    stage,
    connectionError: false,
    ...stripReply(reply),
    ...(extra.perRecipient ? { perRecipient: extra.perRecipient } : {}),
  };
}

function connectionFailure(stage: SmtpStage, error: SmtpConnectionError): SendFailure {
  return { ok: false, kind: "temporary", stage, code: 0, response: error.message, connectionError: true };
}

/** A failure after RCPT: recipients the server had accepted share it; those it refused keep their own reply. */
function failAccepted(perRecipient: RecipientOutcome[], stage: SmtpStage, reply: SmtpReply, kind: FailureKind): RecipientOutcome[] {
  return perRecipient.map((outcome) => (outcome.ok ? { recipient: outcome.recipient, ok: false, kind, stage, ...stripReply(reply) } : outcome));
}

function stripReply(reply: SmtpReply): SmtpReply {
  return { code: reply.code, response: reply.response, ...(reply.enhanced ? { enhanced: reply.enhanced } : {}) };
}

/** A reused connection turned out dead before the transaction started: safe to retry on a new one. */
class StaleConnection extends Error {
  override name = "StaleConnection";
}

/** A connection failure inside a transaction, with the stage it happened in. */
class StageError extends Error {
  override name = "StageError";
  constructor(
    readonly stage: SmtpStage,
    readonly failure: SmtpConnectionError,
  ) {
    super(failure.message);
  }
}

type ResolvedOptions = Required<Omit<SmtpTransportOptions, "user" | "pass">> & Pick<SmtpTransportOptions, "user" | "pass">;

export class SmtpTransport implements Transport {
  private readonly options: ResolvedOptions;
  private connection: SmtpConnection | null = null;
  private tail: Promise<unknown> = Promise.resolve();

  constructor(options: SmtpTransportOptions) {
    this.options = {
      ...options,
      clientName: options.clientName ?? DEFAULTS.clientName,
      connectTimeoutMs: options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
      commandTimeoutMs: options.commandTimeoutMs ?? DEFAULTS.commandTimeoutMs,
      dataTimeoutMs: options.dataTimeoutMs ?? DEFAULTS.dataTimeoutMs,
      pipelining: options.pipelining ?? true,
      authMechanisms: options.authMechanisms ?? ["PLAIN", "LOGIN"],
      maxMessagesPerConnection: options.maxMessagesPerConnection ?? DEFAULTS.maxMessagesPerConnection,
    };
  }

  send(envelope: Envelope, raw: string | Uint8Array): Promise<SendOutcome> {
    return this.serialised(() => this.deliver(envelope, raw));
  }

  close(): Promise<void> {
    return this.serialised(async () => {
      const connection = this.connection;
      this.connection = null;
      await connection?.quit();
    });
  }

  /** One transaction at a time on the connection; overlapping callers queue up. */
  private serialised<T>(task: () => Promise<T>): Promise<T> {
    const run = this.tail.then(task, task);
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async deliver(envelope: Envelope, raw: string | Uint8Array): Promise<SendOutcome> {
    if (envelope.mailFrom !== "" && !ENVELOPE_ADDRESS.test(envelope.mailFrom)) {
      return replyFailure("mail", { code: 0, response: `invalid envelope sender ${JSON.stringify(envelope.mailFrom)}` }, { kind: "permanent" });
    }
    const invalid = envelope.rcptTo.find((rcpt) => !ENVELOPE_ADDRESS.test(rcpt));
    if (invalid !== undefined || envelope.rcptTo.length === 0) {
      const response = invalid !== undefined ? `invalid envelope recipient ${JSON.stringify(invalid)}` : "no recipients";
      return replyFailure("rcpt", { code: 0, response }, { kind: "permanent" });
    }
    const data = encodeDataPayload(raw);

    for (let attempt = 0; ; attempt++) {
      let connection: SmtpConnection;
      try {
        connection = await this.connected();
      } catch (error) {
        if (error instanceof SmtpReplyError) return replyFailure(error.stage, error.reply);
        if (error instanceof SmtpConnectionError) return connectionFailure("connect", error);
        throw error;
      }
      const reused = connection.transactions > 0;
      connection.transactions++;
      try {
        return await this.transaction(connection, reused, envelope, data);
      } catch (error) {
        this.drop(connection);
        if (error instanceof StaleConnection && attempt === 0) continue;
        if (error instanceof StaleConnection) return connectionFailure("rset", new SmtpConnectionError(error.message));
        if (error instanceof StageError) return connectionFailure(error.stage, error.failure);
        throw error;
      }
    }
  }

  private async connected(): Promise<SmtpConnection> {
    const current = this.connection;
    if (current && current.isOpen && current.transactions < this.options.maxMessagesPerConnection) return current;
    this.connection = null;
    if (current) await current.quit();
    const connection = new SmtpConnection(this.options);
    try {
      await connection.open();
    } catch (error) {
      connection.abort();
      throw error;
    }
    this.connection = connection;
    return connection;
  }

  private drop(connection: SmtpConnection): void {
    connection.abort();
    if (this.connection === connection) this.connection = null;
  }

  /**
   * MAIL, RCPT per recipient, DATA, message. Returns the outcome for any reply; throws StaleConnection when a
   * reused connection is found dead at RSET, StageError for any other connection failure.
   */
  private async transaction(
    connection: SmtpConnection,
    reused: boolean,
    envelope: Envelope,
    data: { payload: Uint8Array; eightBit: boolean },
  ): Promise<SendOutcome> {
    const { commandTimeoutMs, dataTimeoutMs } = this.options;
    const caps = connection.capabilities;
    const params: string[] = [];
    if (caps.has("SIZE")) params.push(`SIZE=${data.payload.length}`);
    if (data.eightBit && caps.has("8BITMIME")) params.push("BODY=8BITMIME");
    const addresses = [envelope.mailFrom, ...envelope.rcptTo];
    if (caps.has("SMTPUTF8") && addresses.some((address) => /[^\x00-\x7f]/.test(address))) params.push("SMTPUTF8");
    const mailCommand = `MAIL FROM:<${envelope.mailFrom}>${params.length > 0 ? ` ${params.join(" ")}` : ""}\r\n`;
    const rcptCommands = envelope.rcptTo.map((rcpt) => `RCPT TO:<${rcpt}>\r\n`);
    const pipelined = this.options.pipelining && caps.has("PIPELINING");

    let stage: SmtpStage = "rset";
    const step = async <T>(operation: () => Promise<T>): Promise<T> => {
      try {
        return await operation();
      } catch (error) {
        throw error instanceof SmtpConnectionError ? new StageError(stage, error) : error;
      }
    };
    const write = (text: string) => step(() => connection.write(text, commandTimeoutMs));
    const read = (what: string) => step(async () => stripReply(await connection.readReply(commandTimeoutMs, what)));
    /** 421: the server is closing the session; whatever this transaction had achieved is void. */
    const closing = (reply: SmtpReply, accepted?: RecipientOutcome[]) => {
      this.drop(connection);
      return replyFailure(stage, reply, { kind: "temporary", ...(accepted ? { perRecipient: failAccepted(accepted, stage, reply, "temporary") } : {}) });
    };

    if (pipelined) {
      await write((reused ? "RSET\r\n" : "") + mailCommand + rcptCommands.join("") + "DATA\r\n");
    }
    if (reused) {
      let rset: SmtpReply;
      try {
        if (!pipelined) await connection.write("RSET\r\n", commandTimeoutMs);
        rset = await connection.readReply(commandTimeoutMs, "RSET");
      } catch (error) {
        // The server closed the idle connection between messages: nothing of this message was accepted.
        if (error instanceof SmtpConnectionError) throw new StaleConnection(error.message);
        throw error;
      }
      if (rset.code === 421) throw new StaleConnection(rset.response);
      if (rset.code !== 250) {
        this.drop(connection);
        return replyFailure("rset", rset);
      }
    }

    stage = "mail";
    if (!pipelined) await write(mailCommand);
    const mail = await read("MAIL FROM");
    if (mail.code === 421) return closing(mail);
    const mailAccepted = mail.code === 250;

    stage = "rcpt";
    const perRecipient: RecipientOutcome[] = [];
    if (mailAccepted || pipelined) {
      for (const [i, rcpt] of envelope.rcptTo.entries()) {
        if (!pipelined) await write(rcptCommands[i]!);
        const reply = await read("RCPT TO");
        if (reply.code === 421) return closing(reply, perRecipient);
        perRecipient.push(
          reply.code === 250 || reply.code === 251
            ? { recipient: rcpt, ok: true, ...reply }
            : { recipient: rcpt, ok: false, kind: kindOf(reply.code), ...reply },
        );
      }
    }
    const anyAccepted = perRecipient.some((outcome) => outcome.ok);

    stage = "data";
    let dataReply: SmtpReply | undefined;
    if (pipelined) {
      dataReply = await read("DATA");
    } else if (mailAccepted && anyAccepted) {
      await write("DATA\r\n");
      dataReply = await read("DATA");
    }
    if (dataReply?.code === 421) return closing(dataReply, perRecipient);

    if (!mailAccepted || !anyAccepted) {
      // With PIPELINING the server has answered DATA already; a 354 without any valid recipient needs the
      // terminating dot to return to command state, and the server has nobody to deliver the empty message to.
      if (dataReply?.code === 354) {
        await write(".\r\n");
        await read("end of data");
      }
      if (!mailAccepted) return replyFailure("mail", mail);
      const allPermanent = perRecipient.every((outcome) => !outcome.ok && outcome.kind === "permanent");
      const first = perRecipient[0]!;
      return replyFailure("rcpt", first, { kind: allPermanent ? "permanent" : "temporary", perRecipient });
    }
    if (!dataReply || dataReply.code !== 354) {
      const refusal = dataReply ?? { code: 0, response: "DATA was not sent" };
      return replyFailure("data", refusal, { perRecipient: failAccepted(perRecipient, "data", refusal, kindOf(refusal.code)) });
    }

    stage = "message";
    await step(() => connection.write(data.payload, dataTimeoutMs));
    const final = await step(async () => stripReply(await connection.readReply(dataTimeoutMs, "end of data")));
    if (final.code === 421) return closing(final, perRecipient);
    // The reply to the final dot decides for every recipient accepted at RCPT: a 554 content rejection or a 451
    // after 250s to RCPT means nobody got the message.
    if (final.code !== 250) return replyFailure("message", final, { perRecipient: failAccepted(perRecipient, "message", final, kindOf(final.code)) });
    return { ok: true, ...final, perRecipient };
  }
}

const smtpEnvSchema = z.object({
  SMTP_UPSTREAM_HOST: z.string().min(1, "SMTP_UPSTREAM_HOST is not set"),
  SMTP_UPSTREAM_PORT: z.coerce.number().int().min(1).max(65535).optional(),
  SMTP_UPSTREAM_SECURE: z.enum(["tls", "starttls", "off"]),
  SMTP_UPSTREAM_USER: z.string().optional(),
  SMTP_UPSTREAM_PASS: z.string().optional(),
  SITE_URL: z.string().optional(),
});

export type SmtpEnv = Pick<Env, "SMTP_UPSTREAM_HOST" | "SMTP_UPSTREAM_SECURE"> &
  Partial<Pick<Env, "SMTP_UPSTREAM_PORT" | "SMTP_UPSTREAM_USER" | "SMTP_UPSTREAM_PASS" | "SITE_URL">>;

const DEFAULT_PORTS: Record<SmtpSecurity, number> = { tls: 465, starttls: 587, off: 25 };

/** EHLO name from SITE_URL's host: smarthosts log it and some reject a bare `localhost`. */
function clientNameFrom(siteUrl: string | undefined): string {
  if (!siteUrl) return DEFAULTS.clientName;
  try {
    const host = new URL(siteUrl).hostname;
    if (/^\d{1,3}(\.\d{1,3}){3}$/.test(host)) return `[${host}]`;
    if (host.startsWith("[")) return `[IPv6:${host.slice(1, -1)}]`;
    return host || DEFAULTS.clientName;
  } catch {
    return DEFAULTS.clientName;
  }
}

/** The transport configured by `SMTP_UPSTREAM_*`; throws a readable error when they are missing or invalid. */
export function smtpTransportFromEnv(env: SmtpEnv, overrides: Partial<SmtpTransportOptions> = {}): SmtpTransport {
  const parsed = smtpEnvSchema.safeParse({ ...env, SMTP_UPSTREAM_PORT: env.SMTP_UPSTREAM_PORT || undefined });
  if (!parsed.success) {
    throw new Error(`invalid SMTP upstream configuration: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  }
  const config = parsed.data;
  return new SmtpTransport({
    host: config.SMTP_UPSTREAM_HOST,
    port: config.SMTP_UPSTREAM_PORT ?? DEFAULT_PORTS[config.SMTP_UPSTREAM_SECURE],
    secure: config.SMTP_UPSTREAM_SECURE,
    clientName: clientNameFrom(config.SITE_URL),
    ...(config.SMTP_UPSTREAM_USER ? { user: config.SMTP_UPSTREAM_USER, pass: config.SMTP_UPSTREAM_PASS ?? "" } : {}),
    ...overrides,
  });
}
