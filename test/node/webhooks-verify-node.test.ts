import { createHmac, timingSafeEqual } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { beforeAll, describe, expect, it } from "vitest";
import { verifyWebhook } from "../../sdk/src/verify-webhook.ts";

// What a receiver running Node does, checked against the Worker's own signing function: the README's plain
// `node:crypto` snippet, the SDK helper (WebCrypto) and the standardwebhooks package, all outside workerd.

type SigningModule = {
  generateWebhookSecret(): string;
  signWebhook(input: { secrets: string[]; eventId: string; timestamp: number; body: string }): Promise<Record<string, string>>;
};
// The Worker's source is typed for workerd and uses extensionless imports; load it untyped (as openapi.test.ts does).
const signingModulePath = "../../src/domain/webhooks/signing.ts";
let signing: SigningModule;

beforeAll(async () => {
  signing = (await import(signingModulePath)) as SigningModule;
});

// --- the README snippet, plus types ---------------------------------------------------------------------------
function verifyMailforgeSignature(secret: string, header: string, rawBody: string, toleranceSeconds = 300): boolean {
  const parts = header.split(",").map((part) => part.split("=") as [string, string]);
  const t = Number(parts.find(([key]) => key === "t")?.[1]);
  const expected = createHmac("sha256", secret).update(`${t}.${rawBody}`).digest();
  const fresh = Math.abs(Date.now() / 1000 - t) <= toleranceSeconds;
  return fresh && parts.some(([key, value]) => key === "v1" && /^[0-9a-f]{64}$/.test(value) && timingSafeEqual(Buffer.from(value, "hex"), expected));
}
// -------------------------------------------------------------------------------------------------------------

const body = '{"id":"evt_1","type":"relay.bounced","created_at":"2026-11-22T10:15:00.000Z","data":{"email":"jané@example.com"}}';

describe("verifying Mailforge webhooks in Node", () => {
  it("the README's node:crypto snippet accepts a genuine signature and rejects tampering, replays and wrong secrets", async () => {
    const secret = signing.generateWebhookSecret();
    const now = Math.floor(Date.now() / 1000);
    const headers = await signing.signWebhook({ secrets: [secret], eventId: "evt_1", timestamp: now, body });
    expect(verifyMailforgeSignature(secret, headers["X-Service-Signature"]!, body)).toBe(true);
    expect(verifyMailforgeSignature(secret, headers["X-Service-Signature"]!, body.replace("bounced", "delivered"))).toBe(false);
    expect(verifyMailforgeSignature(signing.generateWebhookSecret(), headers["X-Service-Signature"]!, body)).toBe(false);
    const old = await signing.signWebhook({ secrets: [secret], eventId: "evt_1", timestamp: now - 301, body });
    expect(verifyMailforgeSignature(secret, old["X-Service-Signature"]!, body)).toBe(false);
    expect(verifyMailforgeSignature(secret, "t=abc,v1=zz", body)).toBe(false);
  });

  it("the SDK helper runs on Node's WebCrypto", async () => {
    const secret = signing.generateWebhookSecret();
    const t = 1_795_000_000;
    const headers = await signing.signWebhook({ secrets: [secret], eventId: "evt_1", timestamp: t, body });
    expect(await verifyWebhook(secret, headers["X-Service-Signature"]!, body, t + 299)).toEqual({ ok: true, timestamp: t });
    expect(await verifyWebhook(secret, headers["X-Service-Signature"]!, body, t + 301)).toEqual({ ok: false, reason: "timestamp_out_of_tolerance" });
    expect(await verifyWebhook(secret, headers["X-Service-Signature"]!, `${body}\n`, t)).toEqual({ ok: false, reason: "signature_mismatch" });
  });

  it("standardwebhooks (Node) verifies the Standard Webhooks headers, during a rotation with either secret", async () => {
    const [current, previous] = [signing.generateWebhookSecret(), signing.generateWebhookSecret()];
    const headers = await signing.signWebhook({ secrets: [current, previous], eventId: "evt_1", timestamp: Math.floor(Date.now() / 1000), body });
    expect(new Webhook(current).verify(body, headers)).toEqual(JSON.parse(body));
    expect(new Webhook(previous).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(signing.generateWebhookSecret()).verify(body, headers)).toThrow();
  });
});
