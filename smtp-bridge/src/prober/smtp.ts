import { connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect, type TLSSocket } from "node:tls";

// A minimal SMTP client that stops before DATA: greeting, EHLO (HELO when refused), STARTTLS when offered, MAIL FROM,
// RCPT TO, RSET, QUIT. Written here rather than taken from nodemailer: its SMTPConnection has no public way to send
// an envelope without a message (`send()` always issues DATA, and with PIPELINING it writes DATA in the same packet
// as the RCPTs), while a probe must never send DATA, must read every RCPT reply with its enhanced status code, and
// must bound each reply by the caller's deadline (a tarpit that never greets).

export interface SmtpReply {
  code: number;
  /** The RFC 3463 enhanced status code (`5.1.1`), when the server gives one. */
  enhanced: string | null;
  /** The whole reply on one line, e.g. "550 5.1.1 No such user". */
  text: string;
}

export type ConnectionFailure = "timeout" | "connection_refused" | "connection_lost" | "service_unavailable" | "greeting_refused";

export class SmtpConnectionError extends Error {
  override name = "SmtpConnectionError";
  readonly failure: ConnectionFailure;
  readonly reply: SmtpReply | null;
  constructor(failure: ConnectionFailure, reply: SmtpReply | null = null) {
    super(reply ? `${failure}: ${reply.text}` : failure);
    this.failure = failure;
    this.reply = reply;
  }
}

export interface OpenOptions {
  address: string;
  port: number;
  /** For SNI only: certificates are not checked (a probe reads replies, it sends nothing that needs protecting). */
  hostName: string;
  heloName: string;
  /** Each reply waits at most this long, and never past `deadline` (epoch ms). */
  commandTimeoutMs: number;
  deadline: number;
}

const replyLine = /^(\d{3})([ -])(.*)$/;
const enhancedCode = /^([245]\.\d{1,3}\.\d{1,3})\b/;

export class SmtpProbeConnection {
  private socket: Socket | TLSSocket;
  private buffer = "";
  private lines: string[] = [];
  private waiting: { resolve: (reply: SmtpReply) => void; reject: (error: Error) => void; timer: NodeJS.Timeout } | undefined;
  private closed: SmtpConnectionError | undefined;
  private extensions = new Set<string>();
  private readonly options: OpenOptions;

  private constructor(socket: Socket, options: OpenOptions) {
    this.socket = socket;
    this.options = options;
    this.attach(socket);
  }

  /** Connects, reads the greeting, says EHLO and upgrades with STARTTLS when offered. */
  static async open(options: OpenOptions): Promise<SmtpProbeConnection> {
    const socket = netConnect({ host: options.address, port: options.port });
    const connection = new SmtpProbeConnection(socket, options);
    try {
      await connection.connected();
      const greeting = await connection.read();
      if (greeting.code === 421) throw new SmtpConnectionError("service_unavailable", greeting);
      if (greeting.code !== 220) throw new SmtpConnectionError("greeting_refused", greeting);
      await connection.hello();
      if (connection.extensions.has("STARTTLS")) {
        const ready = await connection.command("STARTTLS");
        if (ready.code === 220) {
          await connection.upgrade();
          await connection.hello();
        }
      }
      return connection;
    } catch (error) {
      connection.destroy();
      throw error;
    }
  }

  get secure(): boolean {
    return "encrypted" in this.socket;
  }

  /** Sends one command and reads its reply; a 421 ends the session (the server is closing it). */
  async command(line: string): Promise<SmtpReply> {
    if (this.closed) throw this.closed;
    this.socket.write(`${line}\r\n`);
    const reply = await this.read();
    if (reply.code === 421) {
      this.destroy();
      throw new SmtpConnectionError("service_unavailable", reply);
    }
    return reply;
  }

  /**
   * QUIT, politely but without waiting long for the answer, then close, and return once the socket is closed: the
   * caller's connection slot is free only when the server has seen this connection end. The close is awaited as long
   * as any command's reply (within the deadline): a busy server that takes over a second to close still has the
   * connection open, and a new one opened meanwhile would be one more than the host's limit.
   */
  async quit(): Promise<void> {
    const socket = this.socket;
    const closed = new Promise((resolve) => {
      if (socket.closed) resolve(undefined);
      else socket.once("close", resolve);
    });
    if (!this.closed) {
      socket.write("QUIT\r\n");
      await Promise.race([this.read().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
      socket.end();
      const wait = Math.max(1_000, Math.min(this.options.commandTimeoutMs, this.options.deadline - Date.now()));
      await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, wait).unref())]);
    }
    this.destroy();
  }

  destroy(): void {
    this.fail(new SmtpConnectionError("connection_lost"));
    this.socket.destroy();
  }

  private async hello(): Promise<void> {
    const ehlo = await this.command(`EHLO ${this.options.heloName}`);
    if (ehlo.code === 250) {
      this.extensions = new Set(this.lastReplyLines.slice(1).map((line) => line.split(" ")[0]!.toUpperCase()));
      return;
    }
    const helo = await this.command(`HELO ${this.options.heloName}`);
    if (helo.code !== 250) throw new SmtpConnectionError("greeting_refused", helo);
    this.extensions = new Set();
  }

  private connected(): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = this.timer(reject);
      this.socket.once("connect", () => {
        clearTimeout(timer);
        resolve();
      });
      this.socket.once("error", (error: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        reject(new SmtpConnectionError(error.code === "ECONNREFUSED" ? "connection_refused" : "connection_lost"));
      });
    });
  }

  private upgrade(): Promise<void> {
    const plain = this.socket;
    plain.removeAllListeners("data");
    return new Promise((resolve, reject) => {
      const timer = this.timer(reject);
      const secure = tlsConnect({ socket: plain, servername: this.options.hostName, rejectUnauthorized: false }, () => {
        clearTimeout(timer);
        resolve();
      });
      secure.once("error", () => {
        clearTimeout(timer);
        reject(new SmtpConnectionError("connection_lost"));
      });
      this.socket = secure;
      this.attach(secure);
    });
  }

  private timer(reject: (error: Error) => void): NodeJS.Timeout {
    const wait = Math.max(0, Math.min(this.options.commandTimeoutMs, this.options.deadline - Date.now()));
    return setTimeout(() => {
      reject(new SmtpConnectionError("timeout"));
      this.destroy();
    }, wait);
  }

  private lastReplyLines: string[] = [];

  private read(): Promise<SmtpReply> {
    if (this.closed) return Promise.reject(this.closed);
    return new Promise((resolve, reject) => {
      const timer = this.timer(reject);
      this.waiting = { resolve, reject, timer };
      this.deliver();
    });
  }

  private attach(socket: Socket | TLSSocket): void {
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      this.buffer += chunk;
      let end = this.buffer.indexOf("\n");
      while (end >= 0) {
        this.lines.push(this.buffer.slice(0, end).replace(/\r$/, ""));
        this.buffer = this.buffer.slice(end + 1);
        end = this.buffer.indexOf("\n");
      }
      this.deliver();
    });
    socket.on("error", () => this.fail(new SmtpConnectionError("connection_lost")));
    socket.on("close", () => this.fail(new SmtpConnectionError("connection_lost")));
  }

  /** Hands the next complete (possibly multi-line) reply to the reader waiting for it. */
  private deliver(): void {
    if (!this.waiting) return;
    const last = this.lines.findIndex((line) => replyLine.exec(line)?.[2] !== "-");
    if (last < 0) return;
    const lines = this.lines.splice(0, last + 1);
    const match = replyLine.exec(lines[last]!);
    const { resolve, reject, timer } = this.waiting;
    this.waiting = undefined;
    clearTimeout(timer);
    if (!match) {
      reject(new SmtpConnectionError("connection_lost"));
      return;
    }
    this.lastReplyLines = lines.map((line) => line.slice(4));
    const message = lines.map((line) => line.slice(4)).join(" ");
    resolve({ code: Number(match[1]), enhanced: enhancedCode.exec(match[3] ?? "")?.[1] ?? null, text: `${match[1]} ${message}`.trim() });
  }

  private fail(error: SmtpConnectionError): void {
    this.closed ??= error;
    if (this.waiting) {
      const { reject, timer } = this.waiting;
      this.waiting = undefined;
      clearTimeout(timer);
      reject(error);
    }
  }
}
