import { describe, expect, it } from "vitest";
import { call, createAccount, createKey, json } from "../support/helpers";
import { verifyBalance } from "../support/verification";

const validate = (apikey: string | undefined, email: string | undefined, init: { headers?: Record<string, string> } = {}) => {
  const query = new URLSearchParams();
  if (apikey !== undefined) query.set("apikey", apikey);
  if (email !== undefined) query.set("email", email);
  return call(`/api/validate?${query}`, init);
};

const FIELDS = ["account", "checked_at", "did_you_mean", "domain", "email", "mx_record", "quality", "score", "status", "sub_status"];

describe("GET /api/validate: the standalone validation result", () => {
  it("answers exactly the spec's fields with their types, checked_at with an offset", async () => {
    const account = await createAccount({ verify_credits: 5 });
    const before = Date.now();
    const response = await validate(account.api_key, "jane@acme.verify-test");
    expect(response.status).toBe(200);
    const body = await json(response);
    expect(Object.keys(body).sort()).toEqual(FIELDS);
    expect(body).toEqual({
      email: "jane@acme.verify-test",
      status: "valid",
      checked_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d$/),
      account: "jane",
      domain: "acme.verify-test",
      quality: "safe",
      score: 0.9,
      mx_record: "mx1.acme.verify-test",
      did_you_mean: null,
      sub_status: [],
    });
    const checkedAt = Date.parse(String(body.checked_at));
    expect(checkedAt).toBeGreaterThanOrEqual(before - 1000);
    expect(checkedAt).toBeLessThanOrEqual(Date.now() + 1000);
    expect(await verifyBalance(account.api_key)).toBe(4);
    expect(response.headers.get("RateLimit-Limit")).toBe("5");
  });

  it("maps engine statuses onto valid / invalid / do_not_mail / unknown, with the detail in sub_status", async () => {
    const account = await createAccount({ verify_credits: 20 });
    const cases: [string, Record<string, unknown>][] = [
      ["jane@gmail.com", { status: "valid", quality: "safe", sub_status: ["free_provider"], mx_record: "gmail-smtp-in.l.google.com" }],
      ["jane@yaho.com", { status: "valid", did_you_mean: "jane@yahoo.com", sub_status: ["typo_suggested"] }],
      ["jane@nosuch.verify-test", { status: "invalid", quality: "bad", score: 0, mx_record: "", sub_status: ["invalid_domain"] }],
      ["jane@nullmx.verify-test", { status: "invalid", sub_status: ["null_mx"] }],
      ["jane@mailinator.com", { status: "do_not_mail", quality: "bad", sub_status: ["disposable"] }],
      ["admin@acme.verify-test", { status: "do_not_mail", quality: "risky", sub_status: ["role_based"] }],
      ["jane@servfail.verify-test", { status: "unknown", quality: "unknown", sub_status: ["dns_error", "servfail"] }],
      [
        "jane@@acme.verify-test",
        { status: "invalid", account: "jane@", domain: "acme.verify-test", sub_status: ["invalid_syntax", "invalid_local_part"] },
      ],
    ];
    for (const [email, expected] of cases) {
      const response = await validate(account.api_key, email);
      expect(response.status, email).toBe(200);
      expect(await json(response), email).toMatchObject({ email, ...expected });
      // 5 requests per second per key: stay under it.
      await new Promise((resolve) => setTimeout(resolve, 220));
    }
    // Seven charged; the bad syntax was free.
    expect(await verifyBalance(account.api_key)).toBe(13);
  });

  it("402 when the balance is 0; bad syntax is still answered, free", async () => {
    const account = await createAccount({ verify_credits: 0 });
    const refused = await validate(account.api_key, "jane@acme.verify-test");
    expect(refused.status).toBe(402);
    expect(await json(refused)).toMatchObject({ code: "insufficient_credits", message: expect.any(String) });
    const free = await validate(account.api_key, "no-at-sign");
    expect(free.status).toBe(200);
    expect(await json(free)).toMatchObject({ status: "invalid", sub_status: ["invalid_syntax", "missing_at"] });
  });

  it("a missing or empty email is a 422 with the field", async () => {
    const account = await createAccount();
    for (const email of [undefined, "", "  "]) {
      const response = await validate(account.api_key, email);
      expect(response.status).toBe(422);
      expect(await json(response)).toMatchObject({ code: "validation_failed", errors: { "query.email": expect.any(Array) } });
    }
  });
});

describe("the verification API key (?apikey=)", () => {
  it("missing or unknown key: 401 with a JSON message", async () => {
    const missing = await validate(undefined, "jane@acme.verify-test");
    expect(missing.status).toBe(401);
    expect(await json(missing)).toEqual({ code: "unauthorized", message: expect.stringContaining("apikey") });
    expect((await validate(`sk_live_${"0".repeat(32)}`, "jane@acme.verify-test")).status).toBe(401);
    expect((await validate("not-a-key", "jane@acme.verify-test")).status).toBe(401);
    // The main API's Bearer header is not how this API takes its key.
    const account = await createAccount();
    expect((await validate(undefined, "jane@acme.verify-test", { headers: { Authorization: `Bearer ${account.api_key}` } })).status).toBe(401);
  });

  it("a key without the verify scope: 403; with it, or full access: 200", async () => {
    const account = await createAccount({ verify_credits: 5 });
    const sendOnly = await createKey(account.api_key, { name: "send", scopes: ["send", "contacts"] });
    const forbidden = await validate(sendOnly.key, "jane@acme.verify-test");
    expect(forbidden.status).toBe(403);
    expect(await json(forbidden)).toMatchObject({ code: "scope_missing" });
    const verifyOnly = await createKey(account.api_key, { name: "verify", scopes: ["verify"] });
    expect((await validate(verifyOnly.key, "jane@acme.verify-test")).status).toBe(200);
    expect((await validate(account.api_key, "jane@acme.verify-test")).status).toBe(200);
    // A revoked key stops at once.
    await call(`/api/v1/api-keys/${verifyOnly.id}`, { key: account.api_key, method: "DELETE" });
    expect((await validate(verifyOnly.key, "jane@acme.verify-test")).status).toBe(401);
  });

  it("allows 5 requests per second per key, then 429 with Retry-After", async () => {
    const account = await createAccount({ verify_credits: 100, rate_limit_per_minute: 10_000 });
    const started = Date.now();
    const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => validate(account.api_key, `bad-${i}`)));
    // The bucket holds 5 and regains 5 a second: a burst passes 5, plus the whole tokens it regained while a loaded
    // machine was sending it; everything else is refused.
    const regained = Math.floor(((Date.now() - started) / 1000) * 5);
    const statuses = responses.map((response) => response.status);
    const allowed = statuses.filter((status) => status === 200).length;
    expect(allowed).toBeGreaterThanOrEqual(5);
    expect(allowed).toBeLessThanOrEqual(5 + regained);
    expect(statuses.filter((status) => status === 429)).toHaveLength(20 - allowed);
    const limited = responses.find((response) => response.status === 429)!;
    expect(limited.headers.get("Retry-After")).toBe("1");
    expect(limited.headers.get("RateLimit-Limit")).toBe("5");
    expect(await json(limited)).toMatchObject({ code: "rate_limited", message: expect.stringContaining("per second") });

    // Another key of the same account has its own bucket; the main API's per-minute bucket is separate too.
    const other = await createKey(account.api_key, { name: "second", scopes: ["verify"] });
    expect((await validate(other.key, "bad")).status).toBe(200);
    expect((await call("/api/v1/me", { key: account.api_key })).status).toBe(200);

    // The bucket refills at 5 per second.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await validate(account.api_key, "bad")).status).toBe(200);
  });

  it("enterprise plans get the account's per-minute limit spread over the minute", async () => {
    const account = await createAccount({ plan: "enterprise", rate_limit_per_minute: 600, verify_credits: 100 });
    const first = await validate(account.api_key, "bad");
    expect(first.headers.get("RateLimit-Limit")).toBe("10");
    // Refill is 10 per second, so a burst only shows the bucket's size approximately: at least 10 pass, not all 40.
    const responses = await Promise.all(Array.from({ length: 40 }, (_, i) => validate(account.api_key, `bad-${i}`)));
    const allowed = responses.filter((response) => response.status === 200).length;
    expect(allowed).toBeGreaterThanOrEqual(9);
    expect(allowed).toBeLessThan(40);
  });
});
