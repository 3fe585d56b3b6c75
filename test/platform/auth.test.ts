import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, call, createAccount, createKey, d1OfAccount, json } from "../support/helpers";

describe("API keys authenticate requests", () => {
  it("GET /me returns the account, limits, balances and the key's scopes", async () => {
    const account = await createAccount({ name: "Acme", plan: "starter", send_credits: 1000, verify_credits: 50 });
    const response = await call("/api/v1/me", { key: account.api_key });
    expect(response.status).toBe(200);
    expect(response.headers.get("X-Request-Id")).toMatch(/^req_/);
    const me = await json(response);
    expect(me).toMatchObject({
      id: account.id,
      name: "Acme",
      plan: "starter",
      features: ["email_api", "smtp_relay"],
      limits: { daily_send_limit: 10_000, rate_limit_per_minute: 600 },
      balances: { send: { balance: 1000, reserved: 0, available: 1000 }, verify: { balance: 50, available: 50 } },
      api_key: { scopes: null, mode: "live", prefix: account.api_key.slice(0, 12) },
    });
  });

  it("refuses a missing key with 401 and says how to send one", async () => {
    const response = await call("/api/v1/me");
    expect(response.status).toBe(401);
    expect(response.headers.get("X-Request-Id")).toMatch(/^req_/);
    expect(await json(response)).toEqual({ code: "unauthorized", message: expect.stringContaining("Authorization: Bearer") });
  });

  it.each([
    ["the key without the Bearer scheme", (key: string) => ({ Authorization: key })],
    ["Basic auth", (key: string) => ({ Authorization: `Basic ${btoa(`${key}:`)}` })],
    ["lower-case bearer with two spaces", (key: string) => ({ Authorization: `bearer  ${key}` })],
    ["an X-API-Key header", (key: string) => ({ "X-API-Key": key })],
    ["a token with a trailing junk", (key: string) => ({ Authorization: `Bearer ${key}x` })],
  ])("refuses %s with 401", async (_name, headers) => {
    const account = await createAccount();
    const response = await call("/api/v1/me", { headers: headers(account.api_key) });
    expect(response.status).toBe(401);
    expect((await json(response)).code).toBe("unauthorized");
  });

  it("refuses a well-formed key that does not exist, and SQL-like input, with 401", async () => {
    for (const token of [`sk_live_${"A".repeat(32)}`, "sk_live_' OR '1'='1", "x".repeat(5000)]) {
      const response = await call("/api/v1/me", { headers: { Authorization: `Bearer ${token}` } });
      expect(response.status).toBe(401);
    }
  });

  it("a scoped key gets 403 on a route of another scope and 200 on its own", async () => {
    const account = await createAccount();
    const verifyOnly = await createKey(account.api_key, { name: "verify only", scopes: ["verify"] });
    const credits = await call("/api/v1/credits", { key: verifyOnly.key });
    expect(credits.status).toBe(403);
    expect(await json(credits)).toMatchObject({ code: "scope_missing", message: expect.stringContaining("reports") });
    expect((await call("/api/v1/me", { key: verifyOnly.key })).status).toBe(200);

    const reports = await createKey(account.api_key, { name: "reports", scopes: ["reports"] });
    const allowed = await call("/api/v1/credits", { key: reports.key });
    expect(allowed.status).toBe(200);
    expect(await json(allowed)).toEqual({ send: { balance: 100, reserved: 0, available: 100 }, verify: { balance: 100, available: 100 } });
  });

  it("managing keys needs a full-access key", async () => {
    const account = await createAccount();
    const scoped = await createKey(account.api_key, { name: "all scopes listed", scopes: ["send", "reports"] });
    const response = await call("/api/v1/api-keys", { key: scoped.key, body: { name: "escalate" } });
    expect(response.status).toBe(403);
    expect((await call("/api/v1/api-keys", { key: scoped.key })).status).toBe(403);
  });

  it("a key of another account cannot see or touch this account's keys (404)", async () => {
    const a = await createAccount({ name: "A" });
    const b = await createAccount({ name: "B" });
    const keyOfA = await createKey(a.api_key, { name: "a's" });
    expect((await call(`/api/v1/api-keys/${keyOfA.id}/rotate`, { key: b.api_key, method: "POST" })).status).toBe(404);
    expect((await call(`/api/v1/api-keys/${keyOfA.id}`, { key: b.api_key, method: "DELETE" })).status).toBe(404);
    const listed = await json<{ data: { id: string }[] }>(await call("/api/v1/api-keys", { key: b.api_key }));
    expect(listed.data.map((key) => key.id)).not.toContain(keyOfA.id);
    expect((await call("/api/v1/me", { key: keyOfA.key })).status).toBe(200);
  });
});

describe("API key lifecycle", () => {
  it("creates a key shown once, lists it without the secret, and records last use", async () => {
    const account = await createAccount();
    const created = await call("/api/v1/api-keys", { key: account.api_key, body: { name: "CI", scopes: ["send", "send"] } });
    expect(created.status).toBe(201);
    const key = await json(created);
    expect(key).toMatchObject({ name: "CI", scopes: ["send"], mode: "live", last_used_at: null });
    expect(key.key).toMatch(/^sk_live_[0-9A-Za-z]{32}$/);
    expect(key.prefix).toBe((key.key as string).slice(0, 12));

    expect((await call("/api/v1/me", { key: key.key as string })).status).toBe(200);
    const list = await json<{ data: Record<string, unknown>[] }>(await call("/api/v1/api-keys", { key: account.api_key }));
    const listed = list.data.find((entry) => entry.id === key.id);
    expect(listed).toBeDefined();
    expect(listed).not.toHaveProperty("key");
    expect(JSON.stringify(list)).not.toContain(key.key);
  });

  it("stores only a hash of the key", async () => {
    const { env } = await import("cloudflare:workers");
    const account = await createAccount();
    const rows = await env.DB.prepare("SELECT * FROM api_keys WHERE account_id = ?").bind(account.id).all();
    expect(JSON.stringify(rows.results)).not.toContain(account.api_key.slice(12));
    expect(rows.results[0]).toMatchObject({ key_hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
  });

  it("rotation issues a new secret and the old one stops working", async () => {
    const account = await createAccount();
    const original = await createKey(account.api_key, { name: "rotating", scopes: ["reports"] });
    const rotated = await call(`/api/v1/api-keys/${original.id}/rotate`, { key: account.api_key, method: "POST" });
    expect(rotated.status).toBe(200);
    const body = await json(rotated);
    expect(body).toMatchObject({ id: original.id, scopes: ["reports"] });
    expect(body.key).not.toBe(original.key);
    expect((await call("/api/v1/me", { key: original.key })).status).toBe(401);
    expect((await call("/api/v1/credits", { key: body.key as string })).status).toBe(200);
  });

  it("a revoked key gets 401 and disappears from the list", async () => {
    const account = await createAccount();
    const doomed = await createKey(account.api_key, { name: "doomed" });
    const revoked = await call(`/api/v1/api-keys/${doomed.id}`, { key: account.api_key, method: "DELETE" });
    expect(revoked.status).toBe(200);
    expect(await json(revoked)).toMatchObject({ id: doomed.id, revoked_at: expect.any(String) });
    expect((await call("/api/v1/me", { key: doomed.key })).status).toBe(401);
    expect((await call(`/api/v1/api-keys/${doomed.id}`, { key: account.api_key, method: "DELETE" })).status).toBe(404);
  });

  it("test-mode keys are marked sk_test_", async () => {
    const account = await createAccount();
    const key = await createKey(account.api_key, { name: "sandbox", mode: "test" });
    expect(key.key).toMatch(/^sk_test_/);
    expect(await json(await call("/api/v1/me", { key: key.key }))).toMatchObject({ api_key: { mode: "test" } });
  });

  it("a test key cannot create, rotate or revoke live keys: 403 live_key_required, and nothing changes", async () => {
    const { env } = await import("cloudflare:workers");
    const account = await createAccount();
    const testKey = await createKey(account.api_key, { name: "sandbox", mode: "test" });
    const liveKey = await createKey(account.api_key, { name: "production", scopes: ["reports"] });
    const liveKeys = () =>
      env.DB.prepare("SELECT id, key_hash FROM api_keys WHERE account_id = ? AND mode = 'live' ORDER BY id").bind(account.id).all();
    const before = (await liveKeys()).results;

    const escalate = await call("/api/v1/api-keys", { key: testKey.key, body: { name: "escalate", mode: "live" } });
    expect(escalate.status).toBe(403);
    expect(await json(escalate)).toEqual({ code: "live_key_required", message: expect.stringContaining("test key") });

    const rotate = await call(`/api/v1/api-keys/${liveKey.id}/rotate`, { key: testKey.key, method: "POST" });
    expect(rotate.status).toBe(403);
    const refused = await json(rotate);
    expect(refused).toMatchObject({ code: "live_key_required" });
    expect(JSON.stringify(refused)).not.toMatch(/sk_live_[0-9A-Za-z]{32}/);

    const revoke = await call(`/api/v1/api-keys/${liveKey.id}`, { key: testKey.key, method: "DELETE" });
    expect(revoke.status).toBe(403);
    expect(await json(revoke)).toMatchObject({ code: "live_key_required" });

    expect((await liveKeys()).results).toEqual(before);
    expect((await call("/api/v1/credits", { key: liveKey.key })).status).toBe(200);
  });

  it("a test key cannot change what live mail does: webhooks, templates, senders, segments, suppressions, contacts, lists, domains stay as the live key left them", async () => {
    const account = await createAccount({ features: ["email_api", "campaigns"] });
    const live = account.api_key;
    const testKey = (await createKey(live, { name: "sandbox", mode: "test" })).key;
    const webhook = await json<{ id: string; url: string }>(
      await call("/api/v1/webhooks", { key: live, body: { url: "https://hooks.example.com/live", events: ["relay.sent"] } }),
    );
    const template = await json<{ id: string }>(await call("/api/v1/templates", { key: live, body: { name: "t", subject: "Hi", text: "Hello" } }));
    const segment = await json<{ id: string }>(
      await call("/api/v1/segments", { key: live, body: { name: "s", match: "all", conditions: [{ field: "country", op: "eq", value: "DE" }] } }),
    );
    expect((await call("/api/v1/suppressions", { key: live, body: { email: "blocked@example.org" } })).status).toBeLessThan(300);
    const contact = await json<{ id: string }>(await call("/api/v1/contacts", { key: live, body: { email: "customer@example.org" } }));
    const list = await json<{ id: string }>(await call("/api/v1/lists", { key: live, body: { name: "customers" } }));
    const domain = await json<{ id: string }>(
      await call("/api/v1/domains", { key: live, body: { name: `live-${crypto.randomUUID().slice(0, 8)}.example` } }),
    );

    const refusals = [
      await call("/api/v1/webhooks", { key: testKey, body: { url: "https://attacker.example/hook", events: ["relay.sent"] } }),
      await call(`/api/v1/webhooks/${webhook.id}`, { key: testKey, method: "PATCH", body: { url: "https://attacker.example/hook" } }),
      await call(`/api/v1/webhooks/${webhook.id}`, { key: testKey, method: "DELETE" }),
      await call(`/api/v1/templates/${template.id}`, { key: testKey, method: "PATCH", body: { text: "Click https://attacker.example" } }),
      await call(`/api/v1/templates/${template.id}`, { key: testKey, method: "DELETE" }),
      await call("/api/v1/senders", { key: testKey, body: { name: "x", email: "x@example.org" } }),
      await call("/api/v1/segments", { key: testKey, body: { name: "x", match: "all", conditions: [{ field: "country", op: "eq", value: "FR" }] } }),
      await call(`/api/v1/segments/${segment.id}`, { key: testKey, method: "DELETE" }),
      await call("/api/v1/suppressions/blocked@example.org", { key: testKey, method: "DELETE" }),
      await call(`/api/v1/contacts/${contact.id}`, { key: testKey, method: "DELETE" }),
      await call(`/api/v1/lists/${list.id}`, { key: testKey, method: "DELETE" }),
      await call(`/api/v1/domains/${domain.id}`, { key: testKey, method: "DELETE" }),
      await call(`/api/v1/domains/${domain.id}/warmup`, { key: testKey, method: "PUT", body: { enabled: true, schedule: [1] } }),
      // Who live mail reaches or skips: the audience and the suppression list.
      await call("/api/v1/suppressions", { key: testKey, body: { email: "customer@example.org" } }),
      await call("/api/v1/contacts", { key: testKey, body: { email: "planted@example.org" } }),
      await call(`/api/v1/contacts/${contact.id}`, { key: testKey, method: "PATCH", body: { status: "unsubscribed" } }),
      await call("/api/v1/contacts/import", { key: testKey, body: { csv: "email\nplanted@example.org\n" } }),
      await call("/api/v1/lists", { key: testKey, body: { name: "planted" } }),
      await call(`/api/v1/lists/${list.id}`, { key: testKey, method: "PATCH", body: { name: "renamed" } }),
      await call(`/api/v1/lists/${list.id}/contacts`, { key: testKey, body: { contact_ids: [contact.id] } }),
      await call(`/api/v1/lists/${list.id}/contacts/${contact.id}`, { key: testKey, method: "DELETE" }),
      await call("/api/v1/domains", { key: testKey, body: { name: `test-${crypto.randomUUID().slice(0, 8)}.example` } }),
    ];
    for (const response of refusals) {
      expect(response.status).toBe(403);
      expect(await json(response)).toMatchObject({ code: "live_key_required", message: expect.stringContaining("live key") });
    }
    expect(await json(await call(`/api/v1/webhooks/${webhook.id}`, { key: live }))).toMatchObject({ url: "https://hooks.example.com/live" });
    expect(await json(await call(`/api/v1/templates/${template.id}`, { key: live }))).toMatchObject({ text: "Hello" });
    expect((await call(`/api/v1/segments/${segment.id}`, { key: live })).status).toBe(200);
    expect((await json<{ data: unknown[] }>(await call("/api/v1/suppressions?email=blocked@example.org", { key: live }))).data).toHaveLength(1);
    for (const path of [`/api/v1/contacts/${contact.id}`, `/api/v1/lists/${list.id}`, `/api/v1/domains/${domain.id}`]) {
      expect((await call(path, { key: live })).status).toBe(200);
    }
    expect(await json(await call(`/api/v1/contacts/${contact.id}`, { key: live }))).toMatchObject({ status: "subscribed" });
    expect(await json(await call(`/api/v1/lists/${list.id}`, { key: live }))).toMatchObject({ name: "customers" });
    expect((await json<{ data: unknown[] }>(await call("/api/v1/contacts", { key: live }))).data).toHaveLength(1);
    expect((await json<{ data: unknown[] }>(await call("/api/v1/lists", { key: live }))).data).toHaveLength(1);
    expect((await json<{ data: unknown[] }>(await call("/api/v1/domains", { key: live }))).data).toHaveLength(1);
    expect((await json<{ data: unknown[] }>(await call("/api/v1/suppressions?email=customer@example.org", { key: live }))).data).toHaveLength(0);
    // What test mode is for still works: reading, and creating templates to send test mail with.
    expect((await call("/api/v1/webhooks", { key: testKey })).status).toBe(200);
    expect((await call("/api/v1/templates", { key: testKey, body: { name: "draft", subject: "Hi", text: "x" } })).status).toBe(201);
  });

  it("a test key creates test keys (its own mode by default) and rotates and revokes them; rotation keeps the mode", async () => {
    const account = await createAccount();
    const testKey = await createKey(account.api_key, { name: "sandbox", mode: "test" });
    const child = await call("/api/v1/api-keys", { key: testKey.key, body: { name: "ci" } });
    expect(child.status).toBe(201);
    const created = await json<{ id: string; key: string; mode: string }>(child);
    expect(created).toMatchObject({ mode: "test", key: expect.stringMatching(/^sk_test_/) });
    expect((await call("/api/v1/api-keys", { key: testKey.key, body: { name: "explicit", mode: "test" } })).status).toBe(201);

    for (const rotator of [testKey.key, account.api_key]) {
      const rotated = await call(`/api/v1/api-keys/${created.id}/rotate`, { key: rotator, method: "POST" });
      expect(rotated.status).toBe(200);
      expect(await json(rotated)).toMatchObject({
        mode: "test",
        key: expect.stringMatching(/^sk_test_/),
        prefix: expect.stringMatching(/^sk_test_/),
      });
    }
    expect((await call(`/api/v1/api-keys/${created.id}`, { key: testKey.key, method: "DELETE" })).status).toBe(200);

    // a live key still creates live keys by default, and test keys when asked
    expect(await createKey(account.api_key, { name: "live" })).toMatchObject({ key: expect.stringMatching(/^sk_live_/) });
    expect(await createKey(account.api_key, { name: "test", mode: "test" })).toMatchObject({ key: expect.stringMatching(/^sk_test_/) });
  });

  it("rejects unknown scopes and fields with 422 keyed by field", async () => {
    const account = await createAccount();
    const response = await call("/api/v1/api-keys", { key: account.api_key, body: { name: "", scopes: ["root"], admin: true } });
    expect(response.status).toBe(422);
    const body = await json<{ code: string; errors: Record<string, string[]> }>(response);
    expect(body.code).toBe("validation_failed");
    expect(Object.keys(body.errors)).toEqual(expect.arrayContaining(["name", "scopes.0"]));
  });
});

describe("the operator API", () => {
  it("needs the admin token, compared exactly", async () => {
    expect((await call("/admin/v1/accounts", { body: { name: "x" } })).status).toBe(401);
    expect((await call("/admin/v1/accounts", { key: `${ADMIN_TOKEN}x`, body: { name: "x" } })).status).toBe(401);
    expect((await call("/admin/v1/accounts", { key: ADMIN_TOKEN.slice(0, -1), body: { name: "x" } })).status).toBe(401);
    const account = await createAccount();
    // An account's API key is not an operator token.
    expect((await call(`/admin/v1/accounts/${account.id}`, { key: account.api_key })).status).toBe(401);
  });

  it("creates with plan defaults and custom features, patches plan and features, tops up with ledger entries", async () => {
    const created = await call("/admin/v1/accounts", { key: ADMIN_TOKEN, body: { name: "Beta", features: ["email_api", "ai"], send_credits: 5 } });
    expect(created.status).toBe(201);
    const account = await json(created);
    expect(account).toMatchObject({ plan: "free", features: ["email_api", "ai"], limits: { daily_send_limit: 100, rate_limit_per_minute: 60 } });

    const patched = await call(`/admin/v1/accounts/${account.id}`, {
      key: ADMIN_TOKEN,
      method: "PATCH",
      body: { plan: "pro", features: ["email_api", "smtp_relay"], daily_send_limit: 5000 },
    });
    expect(patched.status).toBe(200);
    expect(await json(patched)).toMatchObject({
      plan: "pro",
      features: ["email_api", "smtp_relay"],
      limits: { daily_send_limit: 5000, rate_limit_per_minute: 3000 },
    });

    const topped = await call(`/admin/v1/accounts/${account.id}/credits`, { key: ADMIN_TOKEN, body: { send: 10, verify: 7 } });
    expect(topped.status).toBe(200);
    expect(await json(topped)).toMatchObject({ balances: { send: { balance: 15, available: 15 }, verify: { balance: 7 } } });

    const ledger = await (await d1OfAccount(String(account.id)))
      .prepare("SELECT balance, kind, amount, balance_after FROM credit_ledger WHERE account_id = ? ORDER BY balance, balance_after")
      .bind(account.id)
      .all();
    expect(ledger.results).toEqual([
      { balance: "send", kind: "top_up", amount: 5, balance_after: 5 },
      { balance: "send", kind: "top_up", amount: 10, balance_after: 15 },
      { balance: "verify", kind: "top_up", amount: 7, balance_after: 7 },
    ]);
  });

  it("refuses negative or empty top-ups and unknown features", async () => {
    const account = await createAccount();
    for (const body of [{ send: -5 }, {}, { send: 0 }, { send: 1.5 }]) {
      const response = await call(`/admin/v1/accounts/${account.id}/credits`, { key: ADMIN_TOKEN, body });
      expect(response.status).toBe(422);
    }
    const bad = await call("/admin/v1/accounts", { key: ADMIN_TOKEN, body: { name: "x", features: ["teleport"] } });
    expect(bad.status).toBe(422);
    expect((await json<{ errors: Record<string, string[]> }>(bad)).errors).toHaveProperty("features.0");
    for (const request of [
      call("/admin/v1/accounts/acc_nope", { key: ADMIN_TOKEN }),
      call("/admin/v1/accounts/acc_nope", { key: ADMIN_TOKEN, method: "PATCH", body: { name: "x" } }),
      call("/admin/v1/accounts/acc_nope/credits", { key: ADMIN_TOKEN, body: { send: 5 } }),
    ]) {
      const missing = await request;
      expect(missing.status).toBe(404);
      expect(await json(missing)).toMatchObject({ code: "not_found", message: "Account not found" });
    }
  });
});
