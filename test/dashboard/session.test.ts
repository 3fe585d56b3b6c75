import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createAccount } from "../support/helpers";
import { clientAddress, cookieHeader, signIn, submitSignIn, visit } from "../support/dashboard";

describe("dashboard sign-in", () => {
  it("redirects / to the dashboard and the dashboard to sign-in without a session", async () => {
    const root = await visit("/");
    expect(root.status).toBe(302);
    expect(root.headers.get("Location")).toBe("/dashboard");
    const page = await visit("/dashboard");
    expect(page.status).toBe(303);
    expect(page.headers.get("Location")).toBe("/dashboard/sign-in");
  });

  it("signs in with a full-access key and shows the overview", async () => {
    const account = await createAccount({ name: "Overview Co" });
    const browser = await signIn(account.api_key);
    const page = await browser.get("/dashboard");
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("Overview Co");
    expect(html).toContain("Sending credits");
  });

  it("signing out ends the session on the server: a copied cookie stops working, another session goes on", async () => {
    const account = await createAccount();
    const browser = await signIn(account.api_key);
    const other = await signIn(account.api_key);
    const copied = cookieHeader({ ...browser.jar });
    const csrf = browser.csrf;
    expect((await visit("/dashboard", { headers: { Cookie: copied } })).status).toBe(200);

    const out = await browser.post("/dashboard/sign-out", {});
    expect(out.status).toBe(303);
    expect(out.headers.get("Location")).toBe("/dashboard/sign-in");

    // The copy still has a valid signature and expiry, and its CSRF token: the server no longer knows its session.
    const page = await visit("/dashboard", { headers: { Cookie: copied } });
    expect(page.status).toBe(303);
    expect(page.headers.get("Location")).toBe("/dashboard/sign-in");
    const action = await visit("/dashboard/contacts/lists", {
      headers: { Cookie: copied, "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ _csrf: csrf, name: "after sign-out" }).toString(),
    });
    expect(action.status).toBe(401);
    expect((await visit("/dashboard", { headers: { Cookie: copied, "HX-Request": "true" } })).status).toBe(401);
    // Only that session ended: the same key signed in elsewhere still works.
    expect((await other.get("/dashboard")).status).toBe(200);
  });

  it("counts every attempt from an address, 30 a minute, then refuses even a good key with 429 and Retry-After; another address signs in", async () => {
    const account = await createAccount();
    const address = clientAddress();
    const limiter = env.RATE_LIMITER.getByName(`dashboard-sign-in:${address}`);
    const started = Date.now();
    for (let attempt = 0; attempt < 30; attempt++) {
      const { response } = await submitSignIn(`sk_live_wrong${attempt}`, address);
      expect(response.status).toBe(401);
    }
    // Each attempt took a token: what is left is at most what the bucket refilled meanwhile (one every 2 s).
    const { remaining } = await limiter.consume(30, 60, 0);
    expect(remaining).toBeLessThanOrEqual(Math.floor((Date.now() - started) / 2000));
    // Emptied for the coming minute (whatever refilled since), so the refusal below does not race the refill.
    await limiter.consume(30, 60, 30, Date.now() + 60_000);

    const { response: refused } = await submitSignIn(account.api_key, address);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("Retry-After"))).toBeGreaterThan(0);
    expect(await refused.text()).toMatch(/Too many attempts; try again in \d+ s\./);
    expect(refused.headers.get("Set-Cookie") ?? "").not.toMatch(/session/i);

    const { response: elsewhere } = await submitSignIn(account.api_key, clientAddress());
    expect(elsewhere.status).toBe(303);
  });
});
