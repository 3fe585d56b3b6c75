// One SMTP session over `cloudflare:sockets`: connecting (implicit TLS, STARTTLS or plain), greeting, EHLO, AUTH,
// reading replies with time-outs and writing commands. What a transaction does with it is in smtp.ts.

import { connect } from "cloudflare:sockets";
import { bytesToBase64 } from "../../lib/crypto";
import type { SmtpReply, SmtpStage } from "./types";

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

export type ResolvedOptions = Required<Omit<SmtpTransportOptions, "user" | "pass">> & Pick<SmtpTransportOptions, "user" | "pass">;

const encoder = new TextEncoder();
const MAX_REPLY_BYTES = 64 * 1024;
// Envelope addresses go into command lines: anything that could end the line or the <...> is refused.
export const ENVELOPE_ADDRESS = /^[^\s<>]+@[^\s<>]+$/;

/** The connection is unusable: closed, reset, timed out or out of protocol sync. */
export class SmtpConnectionError extends Error {
  override name = "SmtpConnectionError";
}

/** A reply that ends the attempt at `stage`, e.g. 554 to the greeting or 535 to AUTH. */
export class SmtpReplyError extends Error {
  override name = "SmtpReplyError";
  constructor(
    readonly stage: SmtpStage,
    readonly reply: SmtpReply,
  ) {
    super(reply.response);
  }
}

export function parseEnhanced(text: string): string | undefined {
  return /^([245]\.\d{1,3}\.\d{1,3})(?:\s|$)/.exec(text)?.[1];
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
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
export class SmtpConnection {
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

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function base64Utf8(text: string): string {
  return bytesToBase64(encoder.encode(text));
}
