import { sharedDb } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { apiKeyCacheTtlMs, authenticateApiKey } from "../../src/domain/accounts/api-keys";
import { credentialCacheTtlMs, findActiveCredential } from "../../src/domain/smtp/credentials";
import { ADMIN_TOKEN, call, createAccount, createKey, d1Of, json } from "../support/helpers";
import { verifiedDomain } from "../support/sending";

// POST /send and the relay's /messages authenticate from a per-isolate cache for a few seconds (no D1 round trip).
// What must still hold: a revocation made elsewhere stops the key within the TTL, one made here stops it at once, and
// an operator's change to the account applies at once here.

const noWaitUntil = () => undefined;
const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

async function sender() {
  const account = await createAccount({ send_credits: 100 });
  const domain = await verifiedDomain(account.api_key);
  return { account, from: `hello@${domain.name}` };
}

/** What another isolate's revocation looks like from here: the row changes, this isolate is not told. */
const revokeInD1 = (table: "api_keys" | "smtp_credentials", id: string) =>
  env.DB.prepare(`UPDATE ${table} SET revoked_at = ? WHERE id = ?`).bind(new Date().toISOString(), id).run();

describe("the API key cache", () => {
  it("a key revoked in another isolate keeps working here for at most the TTL, then is refused", async () => {
    const account = await createAccount();
    const key = await createKey(account.api_key, { name: "cached" });
    const t0 = Date.now();
    expect(await authenticateApiKey(sharedDb(env), key.key, noWaitUntil, { cached: true, now: t0 })).toMatchObject({ apiKey: { id: key.id } });
    await revokeInD1("api_keys", key.id);
    expect(await authenticateApiKey(sharedDb(env), key.key, noWaitUntil, { cached: true, now: t0 + apiKeyCacheTtlMs - 1 })).toMatchObject({
      apiKey: { id: key.id },
    });
    expect(await authenticateApiKey(sharedDb(env), key.key, noWaitUntil, { cached: true, now: t0 + apiKeyCacheTtlMs })).toBeUndefined();
    // Routes other than POST /send never use the cache.
    expect(await authenticateApiKey(sharedDb(env), key.key, noWaitUntil, { now: t0 })).toBeUndefined();
  });

  it("never caches a refusal: a key unknown a moment ago is not remembered as unknown", async () => {
    const account = await createAccount();
    const bogus = `sk_live_${"A".repeat(32)}`;
    expect(await authenticateApiKey(sharedDb(env), bogus, noWaitUntil, { cached: true })).toBeUndefined();
    expect(await authenticateApiKey(sharedDb(env), account.api_key, noWaitUntil, { cached: true })).toMatchObject({ account: { id: account.id } });
  });

  it("POST /send with a key revoked or rotated through the API is refused at once with 401, and stores nothing", async () => {
    const { account, from } = await sender();
    const revoked = await createKey(account.api_key, { name: "revoked" });
    const rotated = await createKey(account.api_key, { name: "rotated" });
    for (const key of [revoked, rotated]) {
      const sent = await call("/api/v1/send", { key: key.key, body: { from, to: [rcpt("before")], subject: "x", text: "x" } });
      expect(sent.status).toBe(202);
    }
    expect((await call(`/api/v1/api-keys/${revoked.id}`, { key: account.api_key, method: "DELETE" })).status).toBe(200);
    expect((await call(`/api/v1/api-keys/${rotated.id}/rotate`, { key: account.api_key, method: "POST" })).status).toBe(200);
    for (const key of [revoked, rotated]) {
      const refused = await call("/api/v1/send", { key: key.key, body: { from, to: [rcpt("after")], subject: "x", text: "x" } });
      expect(refused.status).toBe(401);
    }
    const rows = await d1Of(account).prepare("SELECT COUNT(*) AS n FROM messages WHERE account_id = ?").bind(account.id).first<{ n: number }>();
    expect(rows?.n).toBe(2);
  });

  it("an operator's change to the account applies to POST /send at once: removing email_api answers 403", async () => {
    const { account, from } = await sender();
    const body = { from, to: [rcpt("feature")], subject: "x", text: "x" };
    expect((await call("/api/v1/send", { key: account.api_key, body })).status).toBe(202);
    const patched = await call(`/admin/v1/accounts/${account.id}`, { key: ADMIN_TOKEN, method: "PATCH", body: { features: ["smtp_relay"] } });
    expect(patched.status).toBe(200);
    const refused = await call("/api/v1/send", { key: account.api_key, body });
    expect(refused.status).toBe(403);
    expect(await json(refused)).toMatchObject({ code: "feature_disabled" });
  });

  it("a cached account's stale balance does not decide: the charge is checked in D1 and the 402 shows the balance now", async () => {
    const account = await createAccount({ send_credits: 1 });
    const domain = await verifiedDomain(account.api_key);
    const body = (label: string) => ({ from: `hello@${domain.name}`, to: [rcpt(label)], subject: "x", text: "x" });
    expect((await call("/api/v1/send", { key: account.api_key, body: body("one") })).status).toBe(202);
    const refused = await call("/api/v1/send", { key: account.api_key, body: body("two") });
    expect(refused.status).toBe(402);
    expect(await json(refused)).toMatchObject({ code: "insufficient_credits", message: expect.stringContaining("needs 1, 0 available") });
  });
});

describe("the SMTP credential cache", () => {
  it("a credential revoked in another isolate keeps relaying here for at most the TTL, then is refused", async () => {
    const account = await createAccount();
    const created = await call("/api/v1/smtp-credentials", { key: account.api_key, body: { name: "cached" } });
    const credential = await json<{ id: string }>(created);
    const t0 = Date.now();
    expect(await findActiveCredential(sharedDb(env), credential.id, { cached: true, now: t0 })).toMatchObject({ credential: { id: credential.id } });
    await revokeInD1("smtp_credentials", credential.id);
    expect(await findActiveCredential(sharedDb(env), credential.id, { cached: true, now: t0 + credentialCacheTtlMs - 1 })).toBeDefined();
    expect(await findActiveCredential(sharedDb(env), credential.id, { cached: true, now: t0 + credentialCacheTtlMs })).toBeUndefined();
  });
});

describe("the daily limit's head start", () => {
  it("gives back the share of suppressed recipients and of refused sends, so the limit counts only what was accepted", async () => {
    const { account, from } = await sender();
    await call(`/admin/v1/accounts/${account.id}`, { key: ADMIN_TOKEN, method: "PATCH", body: { daily_send_limit: 2 } });
    const suppressed = rcpt("suppressed");
    expect((await call("/api/v1/suppressions", { key: account.api_key, body: { email: suppressed } })).status).toBe(201);
    const send = (to: string[], sentFrom = from) =>
      call("/api/v1/send", { key: account.api_key, body: { from: sentFrom, to, subject: "x", text: "x" } });
    // Asked ahead for 2, kept 1.
    expect(await json(await send([suppressed, rcpt("a")]))).toMatchObject({ credits_charged: 1 });
    // Asked ahead for 1, refused for the domain: given back.
    expect((await send([rcpt("b")], "hello@not-verified.example")).status).toBe(403);
    expect((await send([rcpt("c")])).status).toBe(202);
    const limited = await send([rcpt("d")]);
    expect(limited.status).toBe(429);
    expect(await json(limited)).toMatchObject({ code: "daily_limit_reached", message: expect.stringContaining("2 of 2") });
  });

  it("a message that fits is accepted even when the head start for all its recipients did not fit", async () => {
    const { account, from } = await sender();
    await call(`/admin/v1/accounts/${account.id}`, { key: ADMIN_TOKEN, method: "PATCH", body: { daily_send_limit: 1 } });
    const suppressed = rcpt("suppressed");
    expect((await call("/api/v1/suppressions", { key: account.api_key, body: { email: suppressed } })).status).toBe(201);
    const sent = await call("/api/v1/send", { key: account.api_key, body: { from, to: [suppressed, rcpt("fits")], subject: "x", text: "x" } });
    expect(sent.status).toBe(202);
    expect(await json(sent)).toMatchObject({ credits_charged: 1 });
  });
});
