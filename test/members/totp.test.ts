import { Secret, TOTP } from "otpauth";
import { describe, expect, it } from "vitest";
import { call, createAccount, json } from "../support/helpers";
import type { Browser } from "../support/dashboard";
import { acceptInvitationOf, linkIn, mailTo, newBrowser, open, submit, uniqueAddress } from "../support/members";

/** The code an authenticator app shows for `secret`, `steps` periods from now. */
const codeOf = (secret: string, steps = 0) => TOTP.generate({ secret: Secret.fromBase32(secret), timestamp: Date.now() + steps * 30_000 });

/** Sets TOTP up on the Security page: the key the page shows, and the recovery codes. */
async function enroll(browser: Browser): Promise<{ secret: string; recovery: string[] }> {
  const page = await open(browser, "/dashboard/security");
  const secret = /data-testid="totp-secret">([A-Z2-7]+)</.exec(await page.text())![1]!;
  expect((await submit(browser, "/dashboard/security/totp", { code: "000000" === codeOf(secret) ? "111111" : "000000" })).status).toBe(401);
  const done = await submit(browser, "/dashboard/security/totp", { code: codeOf(secret, -1) });
  expect(done.status).toBe(201);
  const recovery = [...(await done.text()).matchAll(/<li><code>([a-z0-9-]+)<\/code><\/li>/g)].map((match) => match[1]!);
  return { secret, recovery };
}

/** Asks for a sign-in link in a new browser and opens it: the second factor's page. */
async function firstFactor(email: string, mails: number) {
  const browser = newBrowser();
  await open(browser, "/dashboard/sign-in");
  await submit(browser, "/dashboard/sign-in", { email });
  const page = await open(browser, linkIn((await mailTo(email, mails)).text, "/dashboard/sign-in/link"));
  return { browser, page };
}

describe("the second factor", () => {
  it("a member with TOTP signs in with the link and then a code (once) or a recovery code (once)", async () => {
    const account = await createAccount();
    const email = uniqueAddress("totp");
    await call("/api/v1/members", { key: account.api_key, body: { email, role: "developer" } });
    const { secret, recovery } = await enroll(await acceptInvitationOf(email));
    expect(recovery).toHaveLength(10);
    const members = await json<{ data: { totp: boolean }[] }>(await call("/api/v1/members", { key: account.api_key }));
    expect(members.data[0]!.totp).toBe(true);

    const { browser, page } = await firstFactor(email, 2);
    expect(page.status).toBe(200);
    expect(await page.clone().text()).toContain("Second factor");
    // The link alone gives no session.
    expect((await browser.get("/dashboard")).status).toBe(303);
    expect((await submit(browser, "/dashboard/sign-in/second-factor", { code: "123456" === codeOf(secret) ? "654321" : "123456" })).status).toBe(401);
    const code = codeOf(secret);
    const signedIn = await submit(browser, "/dashboard/sign-in/second-factor", { code });
    expect(signedIn.status).toBe(303);
    expect((await browser.get("/dashboard/api-keys")).status).toBe(200);

    // The same code does not sign in twice; a recovery code does, once.
    const second = await firstFactor(email, 3);
    expect((await submit(second.browser, "/dashboard/sign-in/second-factor", { code })).status).toBe(401);
    expect((await submit(second.browser, "/dashboard/sign-in/second-factor", { code: recovery[0]!.toUpperCase() })).status).toBe(303);
    const third = await firstFactor(email, 4);
    expect((await submit(third.browser, "/dashboard/sign-in/second-factor", { code: recovery[0]! })).status).toBe(401);
  });

  it("an owner who requires it sends members without one to set it up first", async () => {
    const owner = uniqueAddress("strict");
    const account = await createAccount({ owner_email: owner });
    const ownerBrowser = await acceptInvitationOf(owner);
    expect((await submit(ownerBrowser, "/dashboard/members/settings", { require_totp: "on" })).status).toBe(303);
    const blocked = await ownerBrowser.get("/dashboard/members");
    expect(blocked.status).toBe(303);
    expect(blocked.headers.get("Location")).toBe("/dashboard/security");
    expect((await ownerBrowser.post("/dashboard/members", { email: uniqueAddress("x"), role: "viewer" })).status).toBe(403);
    await enroll(ownerBrowser);
    expect((await ownerBrowser.get("/dashboard/members")).status).toBe(200);
    // Required, so it cannot be turned off.
    expect((await ownerBrowser.post("/dashboard/security/totp/delete", { code: "000000" })).status).toBe(403);
    const log = await json<{ data: { action: string }[] }>(await call("/api/v1/audit-log?action=member.totp_enabled", { key: account.api_key }));
    expect(log.data).toHaveLength(1);
  });
});
