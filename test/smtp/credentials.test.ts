import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { call, createAccount, createKey, json } from "../support/helpers";

type Credential = {
  id: string;
  name: string;
  username: string;
  mode: "live" | "test";
  password?: string;
  created_at: string;
  last_used_at: string | null;
};

async function createCredential(key: string, name = "App server", mode?: "live" | "test"): Promise<Credential> {
  const response = await call("/api/v1/smtp-credentials", { key, body: { name, mode } });
  expect(response.status).toBe(201);
  return json<Credential>(response);
}

describe("SMTP credentials", () => {
  it("creates a credential whose password is shown once, and lists it without the password", async () => {
    const account = await createAccount();
    const created = await createCredential(account.api_key, "Billing app");
    expect(created).toMatchObject({ name: "Billing app", mode: "live", last_used_at: null });
    expect(created.id).toMatch(/^smtp_[0-9A-Za-z]{22}$/);
    expect(created.username).toMatch(/^smtp_[0-9A-Za-z]{20}$/);
    expect(created.password).toMatch(/^[0-9A-Za-z]{40}$/);

    const listed = await json<{ data: Credential[] }>(await call("/api/v1/smtp-credentials", { key: account.api_key }));
    expect(listed.data).toEqual([
      { id: created.id, name: "Billing app", username: created.username, mode: "live", created_at: created.created_at, last_used_at: null },
    ]);
    expect(JSON.stringify(listed)).not.toContain(created.password);
  });

  it("stores only a SHA-256 hash of the password", async () => {
    const account = await createAccount();
    const created = await createCredential(account.api_key);
    const row = await env.DB.prepare("SELECT * FROM smtp_credentials WHERE id = ?").bind(created.id).first<Record<string, unknown>>();
    expect(JSON.stringify(row)).not.toContain(created.password);
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(created.password)));
    expect(row?.password_hash).toBe([...digest].map((byte) => byte.toString(16).padStart(2, "0")).join(""));
  });

  it("needs the send scope, and the smtp_relay feature to create", async () => {
    const account = await createAccount();
    const verifyOnly = await createKey(account.api_key, { name: "verify", scopes: ["verify"] });
    const denied = await call("/api/v1/smtp-credentials", { key: verifyOnly.key, body: { name: "x" } });
    expect(denied.status).toBe(403);
    expect(await json(denied)).toMatchObject({ code: "scope_missing" });
    expect((await call("/api/v1/smtp-credentials", { key: verifyOnly.key })).status).toBe(403);

    const sendOnly = await createKey(account.api_key, { name: "send", scopes: ["send"] });
    expect((await call("/api/v1/smtp-credentials", { key: sendOnly.key, body: { name: "x" } })).status).toBe(201);

    const apiOnly = await createAccount({ features: ["email_api"] });
    const noRelay = await call("/api/v1/smtp-credentials", { key: apiOnly.api_key, body: { name: "x" } });
    expect(noRelay.status).toBe(403);
    expect(await json(noRelay)).toMatchObject({ code: "feature_disabled", message: expect.stringContaining("smtp_relay") });
  });

  it("rejects a missing name, an unknown mode and unknown fields with 422 keyed by field", async () => {
    const account = await createAccount();
    const response = await call("/api/v1/smtp-credentials", { key: account.api_key, body: { name: " ", mode: "sandbox", password: "mine" } });
    expect(response.status).toBe(422);
    expect(Object.keys((await json<{ errors: Record<string, string[]> }>(response)).errors)).toEqual(expect.arrayContaining(["name", "mode"]));
  });

  it("a test key creates only test credentials: its own mode by default, 403 live_key_required for live", async () => {
    const account = await createAccount();
    const testKey = await createKey(account.api_key, { name: "sandbox", mode: "test" });
    expect(await createCredential(testKey.key, "staging")).toMatchObject({ mode: "test" });
    expect(await createCredential(testKey.key, "explicit", "test")).toMatchObject({ mode: "test" });

    const escalate = await call("/api/v1/smtp-credentials", { key: testKey.key, body: { name: "escalate", mode: "live" } });
    expect(escalate.status).toBe(403);
    expect(await json(escalate)).toEqual({ code: "live_key_required", message: expect.stringContaining("test key") });

    const rows = await env.DB.prepare("SELECT name, mode FROM smtp_credentials WHERE account_id = ? ORDER BY name").bind(account.id).all();
    expect(rows.results).toEqual([
      { name: "explicit", mode: "test" },
      { name: "staging", mode: "test" },
    ]);
  });

  it("a test key revokes test credentials but not live ones (403 live_key_required)", async () => {
    const account = await createAccount();
    const testKey = await createKey(account.api_key, { name: "sandbox", mode: "test" });
    const live = await createCredential(account.api_key, "production");
    const test = await createCredential(account.api_key, "staging", "test");
    const refused = await call(`/api/v1/smtp-credentials/${live.id}`, { key: testKey.key, method: "DELETE" });
    expect(refused.status).toBe(403);
    expect(await json(refused)).toMatchObject({ code: "live_key_required" });
    expect((await call(`/api/v1/smtp-credentials/${test.id}`, { key: testKey.key, method: "DELETE" })).status).toBe(200);
    const listed = await json<{ data: Credential[] }>(await call("/api/v1/smtp-credentials", { key: account.api_key }));
    expect(listed.data.map((credential) => credential.name)).toEqual(["production"]);
  });

  it("a live key creates live credentials by default and test ones when asked; the list shows each mode", async () => {
    const account = await createAccount();
    const live = await createCredential(account.api_key, "production");
    const test = await createCredential(account.api_key, "staging", "test");
    expect([live.mode, test.mode]).toEqual(["live", "test"]);
    const listed = await json<{ data: Credential[] }>(await call("/api/v1/smtp-credentials", { key: account.api_key }));
    expect(Object.fromEntries(listed.data.map((credential) => [credential.name, credential.mode]))).toEqual({ production: "live", staging: "test" });
  });

  it("revokes a credential: gone from the list, a second revoke is 404", async () => {
    const account = await createAccount();
    const created = await createCredential(account.api_key);
    const revoked = await call(`/api/v1/smtp-credentials/${created.id}`, { key: account.api_key, method: "DELETE" });
    expect(revoked.status).toBe(200);
    expect(await json(revoked)).toMatchObject({ id: created.id, revoked_at: expect.any(String) });
    expect((await json<{ data: Credential[] }>(await call("/api/v1/smtp-credentials", { key: account.api_key }))).data).toEqual([]);
    expect((await call(`/api/v1/smtp-credentials/${created.id}`, { key: account.api_key, method: "DELETE" })).status).toBe(404);
  });

  it("another account can neither see nor revoke a credential (404)", async () => {
    const owner = await createAccount({ name: "Owner" });
    const other = await createAccount({ name: "Other" });
    const created = await createCredential(owner.api_key);
    expect((await call(`/api/v1/smtp-credentials/${created.id}`, { key: other.api_key, method: "DELETE" })).status).toBe(404);
    expect((await json<{ data: Credential[] }>(await call("/api/v1/smtp-credentials", { key: other.api_key }))).data).toEqual([]);
    expect((await json<{ data: Credential[] }>(await call("/api/v1/smtp-credentials", { key: owner.api_key }))).data).toHaveLength(1);
  });

  it("is documented in the OpenAPI document, and the internal relay API is not", async () => {
    const document = await json<{ paths: Record<string, Record<string, { "x-required-scope"?: string }>> }>(await call("/api/v1/openapi.json"));
    expect(document.paths["/api/v1/smtp-credentials"]?.post?.["x-required-scope"]).toBe("send");
    expect(document.paths["/api/v1/smtp-credentials/{id}"]?.delete).toBeDefined();
    expect(Object.keys(document.paths).filter((path) => path.startsWith("/internal"))).toEqual([]);
  });
});
