import {
  AuthResponse,
  BRIDGE_SIGNATURE_HEADER,
  BRIDGE_SIGNATURE_REFUSED,
  ErrorResponse,
  MessageResponse,
  RELAY_BASE_PATH,
  relayEndpoints,
  SenderResponse,
  signBridgeRequest,
  verifyBridgeSignature,
} from "@mailforge/bridge-contract";
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { sendLimits } from "../../src/domain/sending/rules";
import { call, createAccount, json } from "../support/helpers";
import { verifiedDomain } from "../support/sending";

// The Worker's half of the Worker↔bridge contract, in workerd: the signature the bridge makes in Node (the same
// known answer as smtp-bridge/test/contract.test.ts) verifies here, a body signed part by part as the bridge streams
// it is accepted by the real routes, and every answer the routes give is one the bridge's schemas read.

const BRIDGE_SECRET = "test-bridge-secret";
const encoder = new TextEncoder();

const fixtureSecret = "bridge-contract-fixture-secret";
const t = 1767225600;
const fixtureBody =
  '{"credential_id":"smtp_fixture","mail_from":"app@example.com","rcpt_to":["zoë@example.net"],"raw":"RnJvbTogYXBwQGV4YW1wbGUuY29tDQoNCmjDqQ0K"}';
const fixtureHeader = `t=${t},v2=210f4859b89e457b45b0ba67c038130fbbc08f3bf02ff6850660ef960a378314`;
const fixtureRequest = { method: "POST", path: `${RELAY_BASE_PATH}${relayEndpoints.messages.path}`, body: fixtureBody };

/** The body as the bridge's client sends it: JSON around `raw`, the base64 in pieces; signed over the pieces. */
async function signedInParts(path: string, pieces: string[]): Promise<Response> {
  const parts = pieces.map((piece) => encoder.encode(piece));
  const header = await signBridgeRequest(BRIDGE_SECRET, { method: "POST", path: `${RELAY_BASE_PATH}${path}`, body: parts });
  return call(`${RELAY_BASE_PATH}${path}`, { body: pieces.join(""), headers: { [BRIDGE_SIGNATURE_HEADER]: header } });
}

const signedWhole = async (path: string, payload: unknown) => signedInParts(path, [JSON.stringify(payload)]);

function base64(text: string): string {
  let binary = "";
  for (const byte of encoder.encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}

describe("the bridge signature in workerd", () => {
  it("signs in parts to the same known answer as Node, and verifies it", async () => {
    const bytes = encoder.encode(fixtureBody);
    const parts = [bytes.subarray(0, 7), bytes.subarray(7, 90), bytes.subarray(90)];
    expect(await signBridgeRequest(fixtureSecret, { ...fixtureRequest, body: parts }, t)).toBe(fixtureHeader);
    expect(await signBridgeRequest(fixtureSecret, fixtureRequest, t)).toBe(fixtureHeader);
    expect(await verifyBridgeSignature(fixtureSecret, fixtureHeader, fixtureRequest, t)).toBe(true);
    expect(await verifyBridgeSignature(fixtureSecret, fixtureHeader, { ...fixtureRequest, body: bytes }, t + 300)).toBe(true);
    expect(await verifyBridgeSignature(fixtureSecret, fixtureHeader, fixtureRequest, t + 301)).toBe(false);
    expect(await verifyBridgeSignature(fixtureSecret, fixtureHeader, { ...fixtureRequest, body: fixtureBody.replace("zoë", "zoe") }, t)).toBe(false);
    expect(await verifyBridgeSignature(fixtureSecret, fixtureHeader, { ...fixtureRequest, path: `${RELAY_BASE_PATH}/sender` }, t)).toBe(false);
  });
});

describe("the relay routes answer what the bridge reads", () => {
  it("AUTH, MAIL FROM and a message signed in parts: each answer parses with the contract's response schema", async () => {
    const account = await createAccount({ send_credits: 100 });
    const created = await call("/api/v1/smtp-credentials", { key: account.api_key, body: { name: "contract" } });
    expect(created.status).toBe(201);
    const credential = await json<{ id: string; username: string; password: string }>(created);
    const domain = await verifiedDomain(account.api_key);

    const auth = await signedWhole(relayEndpoints.auth.path, { username: credential.username, password: credential.password });
    expect(auth.status).toBe(relayEndpoints.auth.status);
    // the one recipient cap: the pipeline's, stated to the bridge rather than copied into it
    expect(AuthResponse.parse(await auth.json())).toEqual({
      credential_id: credential.id,
      account_id: account.id,
      mode: "live",
      max_recipients: sendLimits.recipients,
    });

    const sender = await signedWhole(relayEndpoints.sender.path, { credential_id: credential.id, mail_from: `app@${domain.name}` });
    expect(sender.status).toBe(relayEndpoints.sender.status);
    expect(SenderResponse.parse(await sender.json())).toMatchObject({ domain: { name: domain.name } });

    const to = `contract-${crypto.randomUUID().slice(0, 8)}@example.net`;
    const raw = base64(`From: app@${domain.name}\r\nTo: ${to}\r\nSubject: contract\r\n\r\n${"line of the body\r\n".repeat(200)}`);
    const envelope = JSON.stringify({ credential_id: credential.id, mail_from: `app@${domain.name}`, rcpt_to: [to] });
    const message = await signedInParts(relayEndpoints.messages.path, [
      `${envelope.slice(0, -1)},"raw":"`,
      raw.slice(0, 1000),
      raw.slice(1000, 2001),
      raw.slice(2001),
      '"}',
    ]);
    expect(message.status).toBe(relayEndpoints.messages.status);
    expect(MessageResponse.parse(await message.json())).toMatchObject({
      recipients: [{ email: to, status: "queued" }],
      credits_charged: 1,
      status: "queued",
      test_mode: false,
    });
  });

  it("refuses a request without a fresh signature before reading its body", async () => {
    // A body that never ends: reading it would hang, so a 401 proves the Worker did not read it.
    const endless = () => new ReadableStream<Uint8Array>({ pull: () => new Promise<void>(() => undefined) });
    for (const header of [undefined, `t=${Math.floor(Date.now() / 1000) - 3600},v2=${"0".repeat(64)}`]) {
      const response = await exports.default.fetch(
        new Request(`http://localhost${RELAY_BASE_PATH}${relayEndpoints.messages.path}`, {
          method: "POST",
          headers: { "Content-Type": "application/json", ...(header ? { [BRIDGE_SIGNATURE_HEADER]: header } : {}) },
          body: endless(),
          duplex: "half",
        } as RequestInit),
      );
      expect(response.status).toBe(401);
    }
  });

  it("refusals (bad signature, invalid body, too many recipients) parse with the contract's error schema", async () => {
    const unsigned = await call(`${RELAY_BASE_PATH}${relayEndpoints.auth.path}`, { body: JSON.stringify({ username: "u", password: "p" }) });
    expect(unsigned.status).toBe(401);
    expect(ErrorResponse.parse(await unsigned.json())).toMatchObject({ code: BRIDGE_SIGNATURE_REFUSED });

    const invalid = await signedWhole(relayEndpoints.sender.path, { credential_id: "smtp_x", mail_from: "not an address" });
    expect(invalid.status).toBe(422);
    expect(ErrorResponse.parse(await invalid.json()).errors).toHaveProperty("mail_from");

    const account = await createAccount({ send_credits: 100 });
    const created = await json<{ id: string }>(await call("/api/v1/smtp-credentials", { key: account.api_key, body: { name: "contract" } }));
    const domain = await verifiedDomain(account.api_key);
    const crowd = await signedWhole(relayEndpoints.messages.path, {
      credential_id: created.id,
      mail_from: `app@${domain.name}`,
      rcpt_to: Array.from({ length: sendLimits.recipients + 1 }, (_, i) => `r${i}@example.net`),
      raw: base64(`From: app@${domain.name}\r\nSubject: x\r\n\r\nbody\r\n`),
    });
    expect(crowd.status).toBe(422);
    expect(ErrorResponse.parse(await crowd.json()).errors).toHaveProperty("rcpt_to");
  });
});
