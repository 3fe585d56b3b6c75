import { describe, expect, it } from "vitest";
import { env } from "cloudflare:workers";
import { audienceOf, campaignAccount } from "../support/campaigns";
import { ADMIN_TOKEN, call, createAccount, json } from "../support/helpers";

describe("errors and request ids", () => {
  it("an unknown route is a JSON 404 with a request id", async () => {
    const response = await call("/nowhere");
    expect(response.status).toBe(404);
    expect(response.headers.get("X-Request-Id")).toMatch(/^req_[0-9A-Za-z]{20}$/);
    expect(await json(response)).toEqual({ code: "not_found", message: "No route for GET /nowhere" });

    // Under /api/v1 the key is checked first, as for every keyed route.
    expect((await call("/api/v1/nowhere")).status).toBe(401);
    const account = await createAccount();
    const keyed = await call("/api/v1/nowhere", { key: account.api_key });
    expect(keyed.status).toBe(404);
    expect(keyed.headers.get("X-Request-Id")).toMatch(/^req_/);
  });

  it("each response gets its own request id", async () => {
    const [a, b] = await Promise.all([call("/nowhere"), call("/nowhere")]);
    expect(a.headers.get("X-Request-Id")).not.toBe(b.headers.get("X-Request-Id"));
  });

  it("never adopts a caller's X-Request-Id: request ids are ledger references", async () => {
    const response = await call("/nowhere", { headers: { "X-Request-Id": "req_AAAAAAAAAAAAAAAAAAAA" } });
    expect(response.headers.get("X-Request-Id")).toMatch(/^req_[0-9A-Za-z]{20}$/);
    expect(response.headers.get("X-Request-Id")).not.toBe("req_AAAAAAAAAAAAAAAAAAAA");
  });

  it("malformed JSON is a 422 that says so, never a 500", async () => {
    const response = await call("/admin/v1/accounts", { key: ADMIN_TOKEN, body: '{"name": "Acme",' });
    expect(response.status).toBe(422);
    expect(response.headers.get("X-Request-Id")).toMatch(/^req_/);
    expect(await json(response)).toMatchObject({ code: "validation_failed", message: "The request body is not valid JSON" });
  });

  it("a JSON body of the wrong type or with the wrong content type is a 422", async () => {
    const array = await call("/admin/v1/accounts", { key: ADMIN_TOKEN, body: "[1,2]" });
    expect(array.status).toBe(422);
    const form = await call("/admin/v1/accounts", {
      key: ADMIN_TOKEN,
      body: "name=Acme",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    expect(form.status).toBe(422);
  });

  it("validation errors are keyed by field path", async () => {
    const response = await call("/admin/v1/accounts", { key: ADMIN_TOKEN, body: { name: 42, send_credits: -1, plan: "gold" } });
    expect(response.status).toBe(422);
    const body = await json<{ errors: Record<string, string[]> }>(response);
    expect(Object.keys(body.errors).sort()).toEqual(["name", "plan", "send_credits"]);
  });

  it("a body larger than the route allows is 413", async () => {
    const response = await call("/admin/v1/accounts", { key: ADMIN_TOKEN, body: { name: "x".repeat(2 * 1024 * 1024) } });
    expect(response.status).toBe(413);
    expect(await json(response)).toMatchObject({ code: "payload_too_large" });
    expect(response.headers.get("X-Request-Id")).toMatch(/^req_/);
  });

  it("oversized and SQL-like values are validated, stored verbatim and never executed", async () => {
    const tooLong = await call("/admin/v1/accounts", { key: ADMIN_TOKEN, body: { name: "n".repeat(201) } });
    expect(tooLong.status).toBe(422);
    const name = "Robert'); DROP TABLE accounts;--";
    const account = await createAccount({ name });
    const me = await json(await call("/api/v1/me", { key: account.api_key }));
    expect(me.name).toBe(name);
  });
});

describe("rate limiting per key", () => {
  it("allows exactly the plan's per-minute limit under concurrency, then 429 with Retry-After", async () => {
    const account = await createAccount({ rate_limit_per_minute: 10 });
    const responses = await Promise.all(Array.from({ length: 15 }, () => call("/api/v1/me", { key: account.api_key })));
    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(10);
    expect(statuses.filter((status) => status === 429)).toHaveLength(5);

    const limited = responses.find((response) => response.status === 429)!;
    expect(Number(limited.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers.get("Retry-After"))).toBeLessThanOrEqual(6);
    expect(limited.headers.get("RateLimit-Limit")).toBe("10");
    expect(limited.headers.get("RateLimit-Remaining")).toBe("0");
    expect(await json(limited)).toMatchObject({ code: "rate_limited" });
  });

  it("puts RateLimit headers on every keyed response", async () => {
    const account = await createAccount({ rate_limit_per_minute: 100 });
    const first = await call("/api/v1/me", { key: account.api_key });
    expect(first.headers.get("RateLimit-Limit")).toBe("100");
    expect(first.headers.get("RateLimit-Remaining")).toBe("99");
    expect(Number(first.headers.get("RateLimit-Reset"))).toBeGreaterThanOrEqual(1);
    const notFoundKeyed = await call("/api/v1/api-keys/key_missing/rotate", { key: account.api_key, method: "POST" });
    expect(notFoundKeyed.status).toBe(404);
    expect(notFoundKeyed.headers.get("RateLimit-Remaining")).toBe("98");
  });

  it("keys are limited separately", async () => {
    const a = await createAccount({ rate_limit_per_minute: 1 });
    const b = await createAccount({ rate_limit_per_minute: 1 });
    expect((await call("/api/v1/me", { key: a.api_key })).status).toBe(200);
    expect((await call("/api/v1/me", { key: a.api_key })).status).toBe(429);
    expect((await call("/api/v1/me", { key: b.api_key })).status).toBe(200);
  });
});

describe("the rate limiter object", () => {
  it("refills the bucket over the window", async () => {
    const limiter = env.RATE_LIMITER.getByName("refill-test");
    const start = 1_000_000;
    expect((await limiter.consume(2, 60, 1, start)).allowed).toBe(true);
    expect((await limiter.consume(2, 60, 1, start)).allowed).toBe(true);
    const refused = await limiter.consume(2, 60, 1, start);
    expect(refused).toMatchObject({ allowed: false, retryAfterSeconds: 30 });
    expect((await limiter.consume(2, 60, 1, start + 30_000)).allowed).toBe(true);
  });

  it("holds a daily quota exactly and releases it", async () => {
    const quota = env.RATE_LIMITER.getByName("daily-test");
    const resetAt = Date.now() + 3_600_000;
    const results = await Promise.all(Array.from({ length: 8 }, () => quota.reserveQuota("2026-11-22", 1, 5, resetAt)));
    expect(results.filter((result) => result.allowed)).toHaveLength(5);
    expect(results.find((result) => !result.allowed)?.retryAfterSeconds).toBeGreaterThan(3500);
    expect(await quota.releaseQuota("2026-11-22", 2)).toBe(3);
    expect((await quota.reserveQuota("2026-11-22", 2, 5, resetAt)).allowed).toBe(true);
    expect((await quota.reserveQuota("2026-11-23", 5, 5, resetAt)).allowed).toBe(true);
  });
});

describe("an empty JSON body", () => {
  it("reads as {}: a route whose body is optional accepts it, one with required fields names them", async () => {
    const { key, sender } = await campaignAccount();
    const { list } = await audienceOf(key, 2);
    const draft = async () =>
      json<{ id: string }>(
        await call("/api/v1/campaigns", { key, body: { name: "news", sender_id: sender, subject: "Hi", text: "Hello", lists: [list] } }),
      );
    // As `curl -X POST -H 'Content-Type: application/json'` sends it: no body at all.
    const bodyless = await call(`/api/v1/campaigns/${(await draft()).id}/send`, {
      key,
      method: "POST",
      headers: { "Content-Type": "application/json" },
    });
    expect(bodyless.status).toBe(202);
    expect(await json(bodyless)).toMatchObject({ status: "sending", recipients: 2 });
    // As `curl -d ''` and most HTTP clients send it: a body of zero bytes.
    const zeroBytes = await call(`/api/v1/campaigns/${(await draft()).id}/send`, { key, body: "" });
    expect(zeroBytes.status).toBe(202);

    const send = await call("/api/v1/send", { key, method: "POST", headers: { "Content-Type": "application/json" } });
    expect(send.status).toBe(422);
    expect(await json(send)).toMatchObject({ code: "validation_failed", errors: { from: expect.any(Array) } });
  });
});
