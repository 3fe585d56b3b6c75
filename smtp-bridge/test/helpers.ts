import { spawn } from "node:child_process";
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { loadConfig, type BridgeConfig } from "../src/config.ts";
import { createMemoryLogger } from "../src/log.ts";
import { createServer, type BridgePorts, type BridgeServer } from "../src/server.ts";

// Test doubles at the bridge's outer edge: a fake Worker that is a real HTTP server checking the signature the
// way the Worker does, a bridge started on port 0 against it, and a raw SMTP dialog for replies that
// off-the-shelf clients hide.

export const BRIDGE_SECRET = "bridge-test-secret-0123456789";
export const VERIFIED_DOMAIN = "verified.test";

export interface StoredRelayMessage {
  credential_id: string;
  mail_from: string;
  rcpt_to: string[];
  raw: Buffer;
}

export interface CannedReply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

interface FakeCredential {
  password: string;
  credentialId: string;
  accountId: string;
  revoked: boolean;
}

/** Verifies `X-Bridge-Signature` exactly as the Worker's relay middleware does (300 s tolerance, constant time). */
export function verifySignature(secret: string, header: string | undefined, body: string, nowSeconds = Math.floor(Date.now() / 1000)): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? "");
  if (!match) return false;
  const t = Number(match[1]);
  if (Math.abs(nowSeconds - t) > 300) return false;
  const expected = createHmac("sha256", secret).update(`${t}.${body}`).digest();
  return timingSafeEqual(expected, Buffer.from(match[2] ?? "", "hex"));
}

export class FakeWorker {
  readonly messages: StoredRelayMessage[] = [];
  readonly requests: { path: string; signatureValid: boolean }[] = [];
  readonly verifiedDomains = new Set([VERIFIED_DOMAIN]);
  /** Replies used, one each, for the next POST /messages instead of accepting. */
  readonly messageReplies: CannedReply[] = [];
  /** Delay before answering POST /messages (to keep a session inside DATA). */
  messageDelayMs = 0;
  private readonly credentials = new Map<string, FakeCredential>();
  private server: Server | undefined;
  private port = 0;
  private nextId = 1;

  addCredential(username: string, password: string, credentialId = `smtp_${username}`, accountId = "acc_test"): void {
    this.credentials.set(username, { password, credentialId, accountId, revoked: false });
  }

  revoke(username: string): void {
    const credential = this.credentials.get(username);
    if (credential) credential.revoked = true;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(port = this.port): Promise<void> {
    const server = createHttpServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Stops answering: the listener closes and kept-alive connections are cut, as when the Worker is down. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private findActive(credentialId: unknown): FakeCredential | undefined {
    return [...this.credentials.values()].find((c) => c.credentialId === credentialId && !c.revoked);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const body = Buffer.concat(chunks).toString("utf8");
    const path = req.url ?? "";
    const signatureValid = verifySignature(BRIDGE_SECRET, req.headers["x-bridge-signature"] as string | undefined, body);
    this.requests.push({ path, signatureValid });
    const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "Content-Type": "application/json", ...headers });
      res.end(JSON.stringify(payload));
    };
    if (!signatureValid) return send(401, { code: "unauthorized", message: "bad bridge signature" });
    const input = JSON.parse(body) as Record<string, unknown>;

    if (path === "/internal/relay/auth") {
      const credential = this.credentials.get(String(input.username));
      if (!credential || credential.revoked || credential.password !== input.password) {
        return send(401, { code: "unauthorized", message: "Invalid SMTP credentials" });
      }
      return send(200, { credential_id: credential.credentialId, account_id: credential.accountId });
    }
    if (path === "/internal/relay/sender") {
      if (!this.findActive(input.credential_id)) return send(401, { code: "unauthorized", message: "credential revoked" });
      const domain = String(input.mail_from).split("@").pop()?.toLowerCase() ?? "";
      if (!this.verifiedDomains.has(domain)) {
        return send(403, { code: "domain_not_verified", message: `The domain ${domain} is not a verified sending domain of this account` });
      }
      return send(200, { ok: true });
    }
    if (path === "/internal/relay/messages") {
      if (this.messageDelayMs) await new Promise((resolve) => setTimeout(resolve, this.messageDelayMs));
      if (!this.findActive(input.credential_id)) return send(401, { code: "unauthorized", message: "credential revoked" });
      const canned = this.messageReplies.shift();
      if (canned) return send(canned.status, canned.body, canned.headers);
      const rcptTo = input.rcpt_to as string[];
      this.messages.push({
        credential_id: String(input.credential_id),
        mail_from: String(input.mail_from),
        rcpt_to: rcptTo,
        raw: Buffer.from(String(input.raw), "base64"),
      });
      const id = `msg_fake${this.nextId++}`;
      return send(202, { id, recipients: rcptTo.length, credits_charged: rcptTo.length, status: "queued" });
    }
    send(404, { code: "not_found", message: `no route ${path}` });
  }
}

export interface StartedBridge {
  bridge: BridgeServer;
  ports: BridgePorts;
  config: BridgeConfig;
  logs: ReturnType<typeof createMemoryLogger>["entries"];
}

export async function startBridge(worker: FakeWorker, env: Record<string, string> = {}): Promise<StartedBridge> {
  const config = loadConfig({
    SMTP_HOST: "127.0.0.1",
    SMTP_PORT: "0",
    SMTP_ALT_PORT: "0",
    SMTPS_PORT: "0",
    SMTP_HOSTNAME: "relay.test",
    WORKER_URL: worker.url,
    BRIDGE_SECRET,
    WORKER_TIMEOUT_MS: "3000",
    ...env,
  });
  const logger = createMemoryLogger();
  const bridge = createServer(config, { logger });
  const ports = await bridge.listen();
  return { bridge, ports, config, logs: logger.entries };
}

/** A plain-TCP SMTP conversation: the greeting, then one full reply (all lines) per command. */
export class SmtpDialog {
  private buffer = "";
  private waiting: ((reply: string) => void) | undefined;
  private closed = false;

  private constructor(private readonly socket: Socket) {
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      this.buffer += chunk;
      this.flush();
    });
    socket.on("close", () => {
      this.closed = true;
      this.waiting?.("(connection closed)");
    });
    socket.on("error", () => undefined);
  }

  static async open(port: number): Promise<{ dialog: SmtpDialog; greeting: string }> {
    const socket = connect(port, "127.0.0.1");
    const dialog = new SmtpDialog(socket);
    return { dialog, greeting: await dialog.next() };
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private flush(): void {
    // a reply is complete at its last line: three digits and a space (RFC 5321 4.2.1)
    const end = /(^|\r\n)(\d{3}) [^\r\n]*\r\n/.exec(this.buffer);
    if (!end || !this.waiting) return;
    const cut = end.index + end[0].length;
    const reply = this.buffer.slice(0, cut).trimEnd();
    this.buffer = this.buffer.slice(cut);
    const resolve = this.waiting;
    this.waiting = undefined;
    resolve(reply);
  }

  next(): Promise<string> {
    return new Promise((resolve) => {
      if (this.closed && !this.buffer) return resolve("(connection closed)");
      this.waiting = resolve;
      this.flush();
    });
  }

  /** Bytes without waiting for a reply (part of a message, say). */
  write(data: string): void {
    this.socket.write(data);
  }

  async send(line: string): Promise<string> {
    this.socket.write(`${line}\r\n`);
    return this.next();
  }

  close(): void {
    this.socket.destroy();
  }
}

export const plainAuth = (username: string, password: string) => Buffer.from(`\0${username}\0${password}`).toString("base64");

export interface ProcessResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runProcess(command: string, args: string[], input?: Buffer): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}
