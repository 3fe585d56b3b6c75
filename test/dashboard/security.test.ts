import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { sessionCookieValue } from "../../src/dashboard/session";
import { call, createAccount, createKey, json } from "../support/helpers";
import { cookieHeader, signIn, visit } from "../support/dashboard";

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const formHeaders = (cookie = "") => ({ "Content-Type": "application/x-www-form-urlencoded", ...(cookie ? { Cookie: cookie } : {}) });

describe("dashboard security", () => {
  it("redirects every page to sign-in and refuses every action without a session", async () => {
    for (const path of [
      "/dashboard",
      "/dashboard/messages",
      "/dashboard/domains",
      "/dashboard/api-keys",
      "/dashboard/verification",
      "/dashboard/contacts",
    ]) {
      const page = await visit(path);
      expect(page.status, path).toBe(303);
      expect(page.headers.get("Location")).toBe("/dashboard/sign-in");
    }
    for (const path of ["/dashboard/api-keys", "/dashboard/domains", "/dashboard/verification/check", "/dashboard/sign-out"]) {
      const action = await visit(path, { method: "POST", headers: formHeaders(), body: form({ name: "x" }) });
      expect(action.status, path).toBe(401);
    }
    // A polling request from a page whose session ended: 401, and htmx is told where to go.
    const poll = await visit("/dashboard/verification/vjob_x/progress", { headers: { "HX-Request": "true" } });
    expect(poll.status).toBe(401);
    expect(poll.headers.get("HX-Redirect")).toBe("/dashboard/sign-in");
  });

  it("sets an HttpOnly, SameSite=Lax session cookie (Secure off localhost) and never puts the key in a URL", async () => {
    const account = await createAccount();
    const signInForm = await exportsFetch("https://dash.example.com/dashboard/sign-in");
    const token = /name="_csrf" value="([^"]+)"/.exec(await signInForm.text())![1]!;
    const signInCookie = signInForm.headers.getSetCookie()[0]!.split(";")[0]!;
    expect(signInCookie.startsWith("__Host-mf_sign_in=")).toBe(true);
    const response = await exportsFetch("https://dash.example.com/dashboard/sign-in", {
      method: "POST",
      headers: formHeaders(signInCookie),
      body: form({ _csrf: token, key: account.api_key }),
    });
    expect(response.status).toBe(303);
    expect(response.headers.get("Location")).toBe("/dashboard");
    const session = response.headers.getSetCookie().find((line) => line.startsWith("__Host-mf_session="))!;
    expect(session).toMatch(/; HttpOnly/);
    expect(session).toMatch(/; Secure/);
    expect(session).toMatch(/; SameSite=Lax/);
    expect(session).toMatch(/; Max-Age=43200/);
    expect(session).not.toContain(account.api_key);

    const local = await signIn(account.api_key);
    expect(Object.keys(local.jar)).toContain("mf_session");
  });

  it("shows an error for a bad key and refuses a sign-in form without its token", async () => {
    const signInPage = await visit("/dashboard/sign-in");
    const jar = signInPage.headers.getSetCookie()[0]!.split(";")[0]!;
    const token = /name="_csrf" value="([^"]+)"/.exec(await signInPage.text())![1]!;
    const bad = await visit("/dashboard/sign-in", {
      headers: formHeaders(jar),
      body: form({ _csrf: token, key: "sk_live_notarealkeynotarealkeynotareal12" }),
    });
    expect(bad.status).toBe(401);
    expect(await bad.text()).toContain("That API key is not valid");
    expect(bad.headers.getSetCookie().some((line) => line.includes("mf_session="))).toBe(false);

    const account = await createAccount();
    const forged = await visit("/dashboard/sign-in", { headers: formHeaders(), body: form({ _csrf: token, key: account.api_key }) });
    expect(forged.status).toBe(403);
  });

  it("refuses a post without the CSRF token, or with another session's token", async () => {
    const account = await createAccount();
    const browser = await signIn(account.api_key);
    const missing = await browser.post("/dashboard/api-keys", { name: "sneaky" }, { csrf: false });
    expect(missing.status).toBe(403);
    const other = await signIn(account.api_key);
    const foreign = await browser.post("/dashboard/api-keys", { name: "sneaky", _csrf: other.csrf }, { csrf: false });
    expect(foreign.status).toBe(403);
    const keys = await json<{ data: { name: string }[] }>(await call("/api/v1/api-keys", { key: account.api_key }));
    expect(keys.data.map((key) => key.name)).toEqual(["Default"]);

    const withToken = await browser.post("/dashboard/api-keys", { name: "made in the dashboard" });
    expect(withToken.status).toBe(201);
    expect(await withToken.text()).toMatch(/sk_live_[0-9A-Za-z]{32}/);
    // The htmx header carries the token as well as the form field does.
    const viaHeader = await browser.post("/dashboard/api-keys", { name: "via header" }, { csrf: false, headers: { "X-CSRF-Token": browser.csrf } });
    expect(viaHeader.status).toBe(201);
  });

  it("counts actions against the key's per-minute API limit (429 with Retry-After past it), but not pages or signing out", async () => {
    const account = await createAccount({ rate_limit_per_minute: 4 });
    // Another key has a budget of its own: it reads the result at the end. Creating it is the first key's first call.
    const reader = await createKey(account.api_key, { name: "reader" });
    const browser = await signIn(account.api_key);
    for (let i = 0; i < 5; i++) expect((await browser.get("/dashboard/contacts")).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await browser.post("/dashboard/contacts/lists", { name: `List ${i}` })).status).toBeLessThan(400);
    const refused = await browser.post("/dashboard/contacts/lists", { name: "One too many" });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("Retry-After"))).toBeGreaterThan(0);
    expect(refused.headers.get("Content-Type")).toMatch(/^text\/html/);
    expect(await refused.text()).toContain("this key&#39;s limit is 4 a minute");
    // The API shares the budget: the same key is refused there too.
    expect((await call("/api/v1/lists", { key: account.api_key, body: { name: "Through the API" } })).status).toBe(429);
    const lists = await json<{ data: { name: string }[] }>(await call("/api/v1/lists?limit=100", { key: reader.key }));
    expect(lists.data.map((list) => list.name).sort()).toEqual(["List 0", "List 1", "List 2"]);
    expect((await browser.post("/dashboard/sign-out", {})).status).toBe(303);
  });

  it("refuses a tampered or expired session cookie", async () => {
    const account = await createAccount();
    const browser = await signIn(account.api_key);
    const [payload, signature] = browser.jar.mf_session!.split(".");
    const decoded = JSON.parse(atob(payload!.replace(/-/g, "+").replace(/_/g, "/"))) as { k: string; h: string; s: string; e: number };
    const otherAccount = await createAccount();
    const otherKey = await json<{ data: { id: string }[] }>(await call("/api/v1/api-keys", { key: otherAccount.api_key }));
    const swapped = btoa(JSON.stringify({ ...decoded, k: otherKey.data[0]!.id })).replace(/=+$/, "");
    const tampered = await visit("/dashboard", { headers: { Cookie: cookieHeader({ mf_session: `${swapped}.${signature}` }) } });
    expect(tampered.status).toBe(303);

    const expired = await sessionCookieValue(env, { ...decoded, e: Math.floor(Date.now() / 1000) - 1 });
    expect((await visit("/dashboard", { headers: { Cookie: cookieHeader({ mf_session: expired }) } })).status).toBe(303);
    const valid = await sessionCookieValue(env, { ...decoded, e: Math.floor(Date.now() / 1000) + 60 });
    expect((await visit("/dashboard", { headers: { Cookie: cookieHeader({ mf_session: valid }) } })).status).toBe(200);
  });

  it("ends the session when its key is revoked or rotated", async () => {
    const account = await createAccount();
    const second = await createKey(account.api_key, { name: "second" });
    const browser = await signIn(second.key);
    expect((await browser.get("/dashboard")).status).toBe(200);
    await call(`/api/v1/api-keys/${second.id}/rotate`, { key: account.api_key, method: "POST" });
    expect((await browser.get("/dashboard")).status).toBe(303);

    const third = await createKey(account.api_key, { name: "third" });
    const again = await signIn(third.key);
    expect((await again.get("/dashboard/domains")).status).toBe(200);
    await call(`/api/v1/api-keys/${third.id}`, { key: account.api_key, method: "DELETE" });
    expect((await again.get("/dashboard/domains")).status).toBe(303);
    expect((await again.post("/dashboard/domains", { name: "example.com" })).status).toBe(401);
  });

  it("answers 404 for another account's domain, message, verification job and import", async () => {
    const owner = await createAccount();
    const domain = await json<{ id: string }>(await call("/api/v1/domains", { key: owner.api_key, body: { name: "owner-only.example" } }));
    const job = await json<{ id: string }>(await call("/api/v1/verify", { key: owner.api_key, body: { emails: ["a@example.com"] } }));
    const intruder = await signIn((await createAccount()).api_key);
    for (const path of [
      `/dashboard/domains/${domain.id}`,
      `/dashboard/verification/${job.id}`,
      `/dashboard/verification/${job.id}/results.csv`,
      "/dashboard/messages/msg_nope",
    ]) {
      const page = await intruder.get(path);
      expect(page.status, path).toBe(404);
      expect(await page.text()).not.toContain("owner-only.example");
    }
    expect((await intruder.post(`/dashboard/domains/${domain.id}/verify`, {})).status).toBe(404);
  });

  it("renders a contact's name as text, never as markup", async () => {
    const account = await createAccount();
    const payload = "<img src=x onerror=alert(1)>";
    const created = await call("/api/v1/contacts", { key: account.api_key, body: { email: "xss@example.com", first_name: payload } });
    expect(created.status).toBe(201);
    const browser = await signIn(account.api_key);
    const page = await browser.get("/dashboard/contacts");
    const html = await page.text();
    expect(html).toContain("&lt;img src=x onerror=alert(1)&gt;");
    expect(html).not.toContain(payload);
    expect(page.headers.get("Content-Security-Policy")).toContain("script-src 'self'");
  });

  it("shows a scope-limited key only its sections and refuses the rest with 403", async () => {
    const account = await createAccount();
    const limited = await createKey(account.api_key, { name: "domains only", scopes: ["domains"] });
    const browser = await signIn(limited.key);
    const page = await browser.get("/dashboard/domains");
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('href="/dashboard/domains"');
    expect(html).not.toContain('href="/dashboard/api-keys"');
    expect(html).not.toContain('href="/dashboard/messages"');
    for (const path of ["/dashboard", "/dashboard/api-keys", "/dashboard/messages", "/dashboard/contacts"]) {
      expect((await browser.get(path)).status, path).toBe(403);
    }
    expect((await browser.post("/dashboard/api-keys", { name: "escalate" })).status).toBe(403);
  });
});

function exportsFetch(url: string, init: RequestInit = {}) {
  return import("cloudflare:workers").then(({ exports }) => exports.default.fetch(new Request(url, { ...init, redirect: "manual" })));
}
