import { spawn } from "node:child_process";
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import {
  BRIDGE_SIGNATURE_REFUSED,
  RELAY_BASE_PATH,
  relayEndpoints,
  verifyBridgeSignature,
  type AuthResponse,
  type ErrorResponse,
  type MessageResponse,
  type SenderResponse,
} from "@mailforge/bridge-contract";
import type { z } from "zod";
import { loadConfig, type BridgeConfig } from "../src/config.ts";
import { createMemoryLogger } from "../src/log.ts";
import { createServer, type BridgePorts, type BridgeServer } from "../src/server.ts";

// Test doubles at the bridge's outer edge: a fake Worker that is a real HTTP server holding requests to the contract
// the real Worker holds them to (its signature check and request schemas, packages/bridge-contract), a bridge
// started on port 0 against it, and a raw SMTP dialog for replies that off-the-shelf clients hide.

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

export class FakeWorker {
  readonly messages: StoredRelayMessage[] = [];
  readonly requests: { path: string; signatureValid: boolean }[] = [];
  /** TCP connections the bridge opened to this Worker (a keep-alive pool reuses them). */
  connections = 0;
  readonly verifiedDomains = new Set([VERIFIED_DOMAIN]);
  /** Replies used, one each, for the next POST /messages instead of accepting. */
  readonly messageReplies: CannedReply[] = [];
  /** Delay before answering POST /messages (to keep a session inside DATA). */
  messageDelayMs = 0;
  /** The recipient cap stated in the AUTH answer (the real Worker's is sendLimits.recipients). */
  maxRecipients = 50;
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
    server.on("connection", () => {
      this.connections += 1;
    });
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

  private findActive(credentialId: string): FakeCredential | undefined {
    return [...this.credentials.values()].find((c) => c.credentialId === credentialId && !c.revoked);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const body = Buffer.concat(chunks).toString("utf8");
    const path = req.url ?? "";
    const signatureValid = await verifyBridgeSignature(BRIDGE_SECRET, req.headers["x-bridge-signature"] as string | undefined, {
      method: req.method ?? "",
      path: new URL(path, "http://worker").pathname,
      body,
    });
    this.requests.push({ path, signatureValid });
    const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "Content-Type": "application/json", ...headers });
      res.end(JSON.stringify(payload));
    };
    const refuse = (status: number, error: z.input<typeof ErrorResponse>, headers?: Record<string, string>) => send(status, error, headers);
    if (!signatureValid) return refuse(401, { code: BRIDGE_SIGNATURE_REFUSED, message: "bad bridge signature" });
    const route = (Object.keys(relayEndpoints) as (keyof typeof relayEndpoints)[]).find(
      (key) => `${RELAY_BASE_PATH}${relayEndpoints[key].path}` === path,
    );
    if (!route) return refuse(404, { code: "not_found", message: `no route ${path}` });
    const json: unknown = JSON.parse(body);
    const invalid = (error: z.ZodError) =>
      refuse(422, { code: "validation_failed", message: "The request is invalid", errors: { body: [error.message] } });

    if (route === "auth") {
      const input = relayEndpoints.auth.request.safeParse(json);
      if (!input.success) return invalid(input.error);
      const credential = this.credentials.get(input.data.username);
      if (!credential || credential.revoked || credential.password !== input.data.password) {
        return refuse(401, { code: "unauthorized", message: "Invalid SMTP credentials" });
      }
      const identity: z.input<typeof AuthResponse> = {
        credential_id: credential.credentialId,
        account_id: credential.accountId,
        mode: "live",
        max_recipients: this.maxRecipients,
      };
      return send(relayEndpoints.auth.status, identity);
    }
    if (route === "sender") {
      const input = relayEndpoints.sender.request.safeParse(json);
      if (!input.success) return invalid(input.error);
      const credential = this.findActive(input.data.credential_id);
      if (!credential) return refuse(401, { code: "unauthorized", message: "credential revoked" });
      const domain = input.data.mail_from.split("@").pop()?.toLowerCase() ?? "";
      if (!this.verifiedDomains.has(domain)) {
        return refuse(403, {
          code: "domain_not_verified",
          message: `The domain ${domain} is not a verified sending domain of this account; add and verify it first (Domains in the dashboard, or POST /api/v1/domains then POST /api/v1/domains/{id}/verify)`,
        });
      }
      const sender: z.input<typeof SenderResponse> = {
        credential_id: credential.credentialId,
        account_id: credential.accountId,
        domain: { id: "dom_fake", name: domain },
      };
      return send(relayEndpoints.sender.status, sender);
    }
    const input = relayEndpoints.messages.request.safeParse(json);
    if (!input.success) return invalid(input.error);
    const message = input.data;
    if (this.messageDelayMs) await new Promise((resolve) => setTimeout(resolve, this.messageDelayMs));
    if (!this.findActive(message.credential_id)) return refuse(401, { code: "unauthorized", message: "credential revoked" });
    const canned = this.messageReplies.shift();
    if (canned) return send(canned.status, canned.body, canned.headers);
    this.messages.push({
      credential_id: message.credential_id,
      mail_from: message.mail_from,
      rcpt_to: message.rcpt_to,
      raw: Buffer.from(message.raw, "base64"),
    });
    const accepted: z.input<typeof MessageResponse> = {
      id: `msg_fake${this.nextId++}`,
      recipients: message.rcpt_to.map((email) => ({ email, status: "queued" })),
      credits_charged: message.rcpt_to.length,
      status: "queued",
      test_mode: false,
      replayed: false,
    };
    send(relayEndpoints.messages.status, accepted);
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
    // The product's default: the fake Worker reads a several-MiB body in time that grows with a busy machine's load
    // (8 s seen beside the Workers suite), and the test of the timeout itself sets its own.
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
  private readonly socket: Socket;

  private constructor(socket: Socket) {
    this.socket = socket;
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
