import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { generateWebhookSecret, maskWebhookSecret, signWebhook } from "../../src/domain/webhooks/signing";
import { verifyWebhook } from "../../sdk/src/verify-webhook";
import { specVerify, v1Digests } from "../support/webhooks";

const body = JSON.stringify({ id: "evt_1", type: "relay.delivered", created_at: "2026-11-22T10:15:00.000Z", data: { email: "jane@example.com" } });
const t = 1_795_000_000;

describe("webhook secrets", () => {
  it("are whsec_ + base64 of 24 random bytes, masked to their last 4 characters", () => {
    const secret = generateWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(atob(secret.slice(6))).toHaveLength(24);
    expect(generateWebhookSecret()).not.toBe(secret);
    expect(maskWebhookSecret(secret)).toBe(`whsec_…${secret.slice(-4)}`);
  });
});

describe("signWebhook", () => {
  it("produces an X-Service-Signature the spec's algorithm accepts, keyed with the whole secret string", async () => {
    const secret = generateWebhookSecret();
    const headers = await signWebhook({ secrets: [secret], eventId: "evt_1", timestamp: t, body });
    expect(headers["X-Service-Signature"]).toMatch(/^t=1795000000,v1=[0-9a-f]{64}$/);
    expect(await specVerify(secret, headers["X-Service-Signature"], body, t)).toBe(true);
    // The key is the string with its prefix, not the decoded bytes.
    expect(await specVerify(secret.slice(6), headers["X-Service-Signature"], body, t)).toBe(false);
  });

  it("produces Standard Webhooks headers that the standardwebhooks package verifies", async () => {
    const secret = generateWebhookSecret();
    const headers = await signWebhook({ secrets: [secret], eventId: "evt_1", timestamp: Math.floor(Date.now() / 1000), body });
    expect(headers["webhook-id"]).toBe("evt_1");
    expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(secret).verify(body.replace("jane", "john"), headers)).toThrow(/signature/i);
    expect(() => new Webhook(generateWebhookSecret()).verify(body, headers)).toThrow(/signature/i);
  });

  it("signs with every valid secret during a rotation, newest first, in both schemes", async () => {
    const [current, previous] = [generateWebhookSecret(), generateWebhookSecret()];
    const now = Math.floor(Date.now() / 1000);
    const headers = await signWebhook({ secrets: [current, previous], eventId: "evt_1", timestamp: now, body });
    const digests = v1Digests(headers["X-Service-Signature"]);
    expect(digests).toHaveLength(2);
    expect(await specVerify(current, `t=${now},v1=${digests[0]}`, body, now)).toBe(true);
    expect(await specVerify(previous, `t=${now},v1=${digests[1]}`, body, now)).toBe(true);
    expect(headers["webhook-signature"].split(" ")).toHaveLength(2);
    expect(new Webhook(current).verify(body, headers)).toBeTruthy();
    expect(new Webhook(previous).verify(body, headers)).toBeTruthy();
  });
});

describe("verifyWebhook (receiver helper)", () => {
  const signed = async (secret: string, timestamp = t, payload = body) =>
    (await signWebhook({ secrets: [secret], eventId: "evt_1", timestamp, body: payload }))["X-Service-Signature"];

  it("accepts a genuine request and returns its timestamp", async () => {
    const secret = generateWebhookSecret();
    expect(await verifyWebhook(secret, await signed(secret), body, t + 10)).toEqual({ ok: true, timestamp: t });
  });

  it("defaults `now` to the clock", async () => {
    const secret = generateWebhookSecret();
    const now = Math.floor(Date.now() / 1000);
    expect(await verifyWebhook(secret, await signed(secret, now), body)).toEqual({ ok: true, timestamp: now });
  });

  it("rejects a replay older than 300 s, and a timestamp more than 300 s ahead; accepts exactly 300 s", async () => {
    const secret = generateWebhookSecret();
    const header = await signed(secret);
    expect(await verifyWebhook(secret, header, body, t + 301)).toEqual({ ok: false, reason: "timestamp_out_of_tolerance" });
    expect(await verifyWebhook(secret, header, body, t - 301)).toEqual({ ok: false, reason: "timestamp_out_of_tolerance" });
    expect(await verifyWebhook(secret, header, body, t + 300)).toMatchObject({ ok: true });
    expect(await specVerify(secret, header, body, t + 301)).toBe(false);
  });

  it("rejects a tampered body, a wrong secret and a re-signed timestamp", async () => {
    const secret = generateWebhookSecret();
    const header = await signed(secret);
    expect(await verifyWebhook(secret, header, body.replace("delivered", "bounced"), t)).toEqual({ ok: false, reason: "signature_mismatch" });
    expect(await verifyWebhook(secret, header, `${body} `, t)).toEqual({ ok: false, reason: "signature_mismatch" });
    expect(await verifyWebhook(generateWebhookSecret(), header, body, t)).toEqual({ ok: false, reason: "signature_mismatch" });
    // Moving t forward to dodge the tolerance breaks the signature, because t is signed.
    expect(await verifyWebhook(secret, header.replace(`t=${t}`, `t=${t + 1000}`), body, t + 1000)).toEqual({
      ok: false,
      reason: "signature_mismatch",
    });
  });

  it("accepts any of several v1 values and ignores unknown schemes", async () => {
    const secret = generateWebhookSecret();
    const good = v1Digests(await signed(secret))[0];
    const header = `t=${t},v0=abc,v1=${"0".repeat(64)},v1=${good}`;
    expect(await verifyWebhook(secret, header, body, t)).toMatchObject({ ok: true });
  });

  it.each([
    ["an empty header", ""],
    ["no timestamp", `v1=${"a".repeat(64)}`],
    ["no signature", `t=${t}`],
    ["a non-numeric timestamp", `t=soon,v1=${"a".repeat(64)}`],
    ["a short digest", `t=${t},v1=abcd`],
  ])("rejects %s as malformed", async (_name, header) => {
    expect(await verifyWebhook(generateWebhookSecret(), header, body, t)).toEqual({ ok: false, reason: "malformed_header" });
  });
});
