import { createHash, createHmac, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import {
  BRIDGE_SIGNATURE_HEADER,
  RELAY_BASE_PATH,
  RELAY_MESSAGES_MAX_BODY_BYTES,
  maxRawMessageBytes,
  relayEndpoints,
  signBridgeRequest,
  verifyBridgeSignature,
  type AuthResponse,
  type MessageResponse,
  type SenderResponse,
} from "@mailforge/bridge-contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { z } from "zod";
import { ConfigError, loadConfig } from "../src/config.ts";
import { ByteBudget, SpooledMessage } from "../src/spool.ts";
import { createWorkerClient } from "../src/worker-client.ts";

// The bridge's half of the Worker↔bridge contract, in Node: what its real client puts on the wire is what the
// Worker's schemas and signature check (the same module, packages/bridge-contract) accept. test/smtp/bridge-contract
// .test.ts checks the Worker's half in workerd against the same known-answer signature.

const secret = "bridge-contract-fixture-secret";
const t = 1767225600;
const fixtureBody =
  '{"credential_id":"smtp_fixture","mail_from":"app@example.com","rcpt_to":["zoë@example.net"],"raw":"RnJvbTogYXBwQGV4YW1wbGUuY29tDQoNCmjDqQ0K"}';
const fixtureHeader = `t=${t},v2=210f4859b89e457b45b0ba67c038130fbbc08f3bf02ff6850660ef960a378314`;
const messagesPath = `${RELAY_BASE_PATH}${relayEndpoints.messages.path}`;
const fixtureRequest = { method: "POST", path: messagesPath, body: fixtureBody };

describe("the request signature", () => {
  it("is plain HMAC-SHA256 of '<t>.<METHOD>.<path>.<body SHA-256>', the same whether the body is signed whole or in parts", async () => {
    const bodyDigest = createHash("sha256").update(fixtureBody).digest("hex");
    expect(`t=${t},v2=${createHmac("sha256", secret).update(`${t}.POST.${messagesPath}.${bodyDigest}`).digest("hex")}`).toBe(fixtureHeader);
    const bytes = Buffer.from(fixtureBody);
    // cut inside the two bytes of "ë" too: parts are bytes, not characters
    const insideCharacter = bytes.indexOf(Buffer.from("ë")) + 1;
    const parts = [bytes.subarray(0, 7), bytes.subarray(7, insideCharacter), bytes.subarray(insideCharacter)];
    async function* streamed() {
      for (const part of parts) yield part;
    }
    for (const body of [fixtureBody, bytes, parts, streamed()]) {
      expect(await signBridgeRequest(secret, { method: "POST", path: messagesPath, body }, t)).toBe(fixtureHeader);
    }
  });

  it("verifies for 300 s either way; an altered body, another secret or a malformed header does not", async () => {
    expect(await verifyBridgeSignature(secret, fixtureHeader, fixtureRequest, t)).toBe(true);
    expect(await verifyBridgeSignature(secret, fixtureHeader, { ...fixtureRequest, body: Buffer.from(fixtureBody) }, t + 300)).toBe(true);
    expect(await verifyBridgeSignature(secret, fixtureHeader, fixtureRequest, t - 300)).toBe(true);
    expect(await verifyBridgeSignature(secret, fixtureHeader, fixtureRequest, t + 301)).toBe(false);
    expect(await verifyBridgeSignature(secret, fixtureHeader, fixtureRequest, t - 301)).toBe(false);
    expect(await verifyBridgeSignature(secret, fixtureHeader, { ...fixtureRequest, body: `${fixtureBody} ` }, t)).toBe(false);
    expect(await verifyBridgeSignature("another-secret-value", fixtureHeader, fixtureRequest, t)).toBe(false);
    expect(await verifyBridgeSignature(secret, fixtureHeader.replace("v2=2", "v2=3"), fixtureRequest, t)).toBe(false);
    expect(await verifyBridgeSignature(secret, undefined, fixtureRequest, t)).toBe(false);
    expect(await verifyBridgeSignature(secret, "t=abc,v2=00", fixtureRequest, t)).toBe(false);
  });

  it("binds the method and the path: the same body and time signed for one route do not verify for another", async () => {
    for (const other of [
      { ...fixtureRequest, path: `${RELAY_BASE_PATH}${relayEndpoints.sender.path}` },
      { ...fixtureRequest, path: `${RELAY_BASE_PATH}${relayEndpoints.auth.path}` },
      { ...fixtureRequest, path: `/other${messagesPath}` },
      { ...fixtureRequest, method: "PUT" },
    ]) {
      expect(await verifyBridgeSignature(secret, fixtureHeader, other, t)).toBe(false);
    }
    // the old scheme's header (v1, over `<t>.<body>`) is not taken for the new one
    const v1 = `t=${t},v1=${createHmac("sha256", secret).update(`${t}.${fixtureBody}`).digest("hex")}`;
    expect(await verifyBridgeSignature(secret, v1, fixtureRequest, t)).toBe(false);
  });
});

interface Received {
  path: string;
  signature: string | undefined;
  contentLength: number;
  body: Buffer;
}

/** An HTTP server that keeps each request as received and answers it as the Worker does. */
async function recordingWorker(): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const auth: z.input<typeof AuthResponse> = { credential_id: "smtp_1", account_id: "acc_1", mode: "test", max_recipients: 50 };
  const sender: z.input<typeof SenderResponse> = { credential_id: "smtp_1", account_id: "acc_1", domain: { id: "dom_1", name: "example.com" } };
  const accepted: z.input<typeof MessageResponse> = {
    id: "msg_1",
    recipients: [{ email: "zoë@example.net", status: "queued" }],
    credits_charged: 1,
    status: "queued",
    test_mode: true,
    replayed: false,
  };
  const answers: Record<string, [number, unknown]> = {
    [`${RELAY_BASE_PATH}${relayEndpoints.auth.path}`]: [relayEndpoints.auth.status, auth],
    [`${RELAY_BASE_PATH}${relayEndpoints.sender.path}`]: [relayEndpoints.sender.status, sender],
    [`${RELAY_BASE_PATH}${relayEndpoints.messages.path}`]: [relayEndpoints.messages.status, accepted],
  };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const path = req.url ?? "";
    received.push({
      path,
      signature: req.headers[BRIDGE_SIGNATURE_HEADER.toLowerCase()] as string | undefined,
      contentLength: Number(req.headers["content-length"]),
      body: Buffer.concat(chunks),
    });
    const [status, body] = answers[path] ?? [404, { code: "not_found", message: "no route" }];
    res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, server };
}

async function spooled(bytes: Buffer): Promise<SpooledMessage> {
  const message = await SpooledMessage.create(tmpdir(), new ByteBudget(bytes.length));
  expect(await message.append(bytes)).toBe(true);
  await message.flush();
  return message;
}

describe("the bridge's client and the Worker's schemas", () => {
  let worker: Awaited<ReturnType<typeof recordingWorker>>;
  beforeAll(async () => {
    worker = await recordingWorker();
  });
  afterAll(() => new Promise<void>((resolve) => worker.server.close(() => resolve())));

  it("sends AUTH, MAIL FROM and DATA requests the Worker's schemas accept, each signed over the bytes as received", async () => {
    const client = createWorkerClient({ workerUrl: worker.url, bridgeSecret: secret, timeoutMs: 5_000 });
    // several spool reads long and not a multiple of 3, so the streamed base64 carries bytes between chunks
    const raw = Buffer.concat([Buffer.from("From: app@example.com\r\nTo: zoë@example.net\r\n\r\n"), randomBytes(700_001)]);
    const message = await spooled(raw);
    try {
      expect(await client.authenticate("smtp_user", "pässword")).toEqual({
        ok: true,
        value: { credentialId: "smtp_1", accountId: "acc_1", maxRecipients: 50 },
      });
      expect(await client.checkSender("smtp_1", "app@example.com")).toEqual({ ok: true, value: undefined });
      expect(await client.submitMessage({ credentialId: "smtp_1", mailFrom: "app@example.com", rcptTo: ["zoë@example.net"], raw: message })).toEqual({
        ok: true,
        value: { id: "msg_1", creditsCharged: 1, replayed: false },
      });
    } finally {
      await message.close();
    }

    const [auth, sender, submitted] = worker.received;
    for (const request of worker.received) {
      expect(await verifyBridgeSignature(secret, request.signature, { method: "POST", path: request.path, body: request.body })).toBe(true);
      expect(request.contentLength).toBe(request.body.length);
    }
    expect(auth?.path).toBe("/internal/relay/auth");
    expect(relayEndpoints.auth.request.parse(JSON.parse(auth!.body.toString()))).toEqual({ username: "smtp_user", password: "pässword" });
    expect(sender?.path).toBe("/internal/relay/sender");
    expect(relayEndpoints.sender.request.parse(JSON.parse(sender!.body.toString()))).toEqual({
      credential_id: "smtp_1",
      mail_from: "app@example.com",
    });
    expect(submitted?.path).toBe("/internal/relay/messages");
    const parsed = relayEndpoints.messages.request.parse(JSON.parse(submitted!.body.toString()));
    expect(parsed).toMatchObject({ credential_id: "smtp_1", mail_from: "app@example.com", rcpt_to: ["zoë@example.net"] });
    expect(Buffer.from(parsed.raw, "base64").equals(raw)).toBe(true);
  });

  it("a 2xx answer off the contract is not taken as success (the client keeps the message and retries)", async () => {
    const off = createServer((_req, res) =>
      res.writeHead(202, { "Content-Type": "application/json" }).end(JSON.stringify({ id: "msg_1", recipients: 1 })),
    );
    await new Promise<void>((resolve) => off.listen(0, "127.0.0.1", resolve));
    const client = createWorkerClient({
      workerUrl: `http://127.0.0.1:${(off.address() as AddressInfo).port}`,
      bridgeSecret: secret,
      timeoutMs: 5_000,
    });
    const message = await spooled(Buffer.from("From: app@example.com\r\n\r\nhi\r\n"));
    try {
      await expect(
        client.submitMessage({ credentialId: "smtp_1", mailFrom: "app@example.com", rcptTo: ["a@example.net"], raw: message }),
      ).rejects.toThrow(/unexpected body/);
    } finally {
      await message.close();
      await new Promise<void>((resolve) => off.close(() => resolve()));
    }
  });

  it("the largest MAX_MESSAGE_BYTES allowed still fits the Worker's body limit with 50 of the longest recipients", async () => {
    expect(loadConfig({ WORKER_URL: worker.url, BRIDGE_SECRET: secret, MAX_MESSAGE_BYTES: String(maxRawMessageBytes) }).maxMessageBytes).toBe(
      maxRawMessageBytes,
    );
    // 30 MiB once passed here, and its request (40 MiB of base64 plus the JSON around it) was over the Worker's limit
    expect(() => loadConfig({ WORKER_URL: worker.url, BRIDGE_SECRET: secret, MAX_MESSAGE_BYTES: String(30 * 1024 * 1024) })).toThrow(ConfigError);

    const client = createWorkerClient({ workerUrl: worker.url, bridgeSecret: secret, timeoutMs: 30_000 });
    const message = await spooled(Buffer.alloc(maxRawMessageBytes, "a"));
    const longest = (i: number) => `${"l".repeat(60)}${String(i).padStart(4, "0")}@${"d".repeat(240)}.example`;
    try {
      const rcptTo = Array.from({ length: 50 }, (_, i) => longest(i));
      const result = await client.submitMessage({ credentialId: "x".repeat(64), mailFrom: longest(99), rcptTo, raw: message });
      expect(result.ok).toBe(true);
    } finally {
      await message.close();
    }
    const request = worker.received.at(-1)!;
    expect(request.contentLength).toBeLessThanOrEqual(RELAY_MESSAGES_MAX_BODY_BYTES);
    expect(await verifyBridgeSignature(secret, request.signature, { method: "POST", path: request.path, body: request.body })).toBe(true);
  });
});
