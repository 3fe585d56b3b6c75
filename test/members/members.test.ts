import { describe, expect, it } from "vitest";
import { call, createAccount, json } from "../support/helpers";
import { eventually, sinkMessagesTo } from "../support/sending";
import { acceptInvitationOf, linkIn, mailTo, newBrowser, open, submit, uniqueAddress } from "../support/members";

type Member = { id: string; email: string; role: string; status: string };

async function invite(key: string, email: string, role: string): Promise<Member> {
  const response = await call("/api/v1/members", { key, body: { email, role } });
  expect(response.status, await response.clone().text()).toBe(201);
  return json<Member>(response);
}

describe("members and mailed sign-in", () => {
  it("an account created with owner_email mails its owner an invitation that signs them in once", async () => {
    const owner = uniqueAddress("owner");
    const account = await createAccount({ name: "Owned Co", owner_email: owner.toUpperCase() });
    expect(account).toMatchObject({ owner: { email: owner, status: "invited" } });
    const mail = await mailTo(owner);
    expect(mail.from).toBe("no-reply@demo.mailforge.test");
    expect(mail.contentType).toBe("text/plain");
    expect(mail.text).toContain('"Owned Co" as owner');
    const browser = await acceptInvitationOf(owner);
    const page = await browser.get("/dashboard/members");
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(owner);
    // The invitation was used up.
    const again = await open(newBrowser(), linkIn(mail.text, "/dashboard/invitation"));
    expect(again.status).toBe(410);
  });

  it("a marketer invited through the API signs in by her invitation, opens campaigns and is refused API keys", async () => {
    const account = await createAccount({ features: ["email_api", "smtp_relay", "campaigns"] });
    const email = uniqueAddress("marketer");
    const member = await invite(account.api_key, email, "marketer");
    expect(member).toMatchObject({ email, role: "marketer", status: "invited" });
    const browser = await acceptInvitationOf(email);
    expect((await browser.get("/dashboard/campaigns")).status).toBe(200);
    const keys = await browser.get("/dashboard/api-keys");
    expect(keys.status).toBe(403);
    expect(await keys.text()).toContain("Your role (marketer) does not include this page");
    const listed = await json<{ data: Member[] }>(await call("/api/v1/members", { key: account.api_key }));
    expect(listed.data).toEqual([expect.objectContaining({ id: member.id, status: "active" })]);
  });

  it("the sign-in page mails a member a link that signs her in once; an address that is no member gets the same page and no mail", async () => {
    const account = await createAccount();
    const email = uniqueAddress("dev");
    await invite(account.api_key, email, "developer");
    const stranger = uniqueAddress("stranger");

    const strangerBrowser = newBrowser();
    await open(strangerBrowser, "/dashboard/sign-in");
    const strangerPage = await submit(strangerBrowser, "/dashboard/sign-in", { email: stranger });
    const browser = newBrowser();
    await open(browser, "/dashboard/sign-in");
    const page = await submit(browser, "/dashboard/sign-in", { email });
    expect(page.status).toBe(200);
    expect(strangerPage.status).toBe(200);
    expect((await page.text()).replaceAll(email, "")).toBe(
      (await strangerPage.text()).replaceAll(stranger, "").replace(strangerBrowser.csrf, browser.csrf),
    );

    const mail = await mailTo(email, 2);
    const link = linkIn(mail.text, "/dashboard/sign-in/link");
    // Another browser (a scanner, a forwarded mail) cannot use it, and does not use it up.
    expect((await open(newBrowser(), link)).status).toBe(403);
    const signedIn = await open(browser, link);
    expect(signedIn.status).toBe(303);
    expect((await browser.get(signedIn.headers.get("Location")!)).status).toBe(200);
    expect((await open(browser, link)).status).toBe(410);
    expect(await sinkMessagesTo(stranger)).toEqual([]);
  });

  it("mails an address 5 links a quarter hour, then answers 429, member or not", async () => {
    const browser = newBrowser();
    await open(browser, "/dashboard/sign-in");
    const email = uniqueAddress("flood");
    for (let attempt = 0; attempt < 5; attempt++) expect((await submit(browser, "/dashboard/sign-in", { email })).status).toBe(200);
    const refused = await submit(browser, "/dashboard/sign-in", { email });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("Retry-After"))).toBeGreaterThan(0);
    expect((await submit(browser, "/dashboard/sign-in", { email: uniqueAddress("other") })).status).toBe(200);
  });

  it("signs in with the mailed code in the browser that asked, once", async () => {
    const account = await createAccount({ features: ["email_api", "smtp_relay", "automations"] });
    const email = uniqueAddress("coder");
    await invite(account.api_key, email, "viewer");
    const browser = newBrowser();
    await open(browser, "/dashboard/sign-in");
    await submit(browser, "/dashboard/sign-in", { email });
    const mail = await mailTo(email, 2);
    const code = /Code: (\d{6})/.exec(mail.text)![1]!;
    expect((await submit(browser, "/dashboard/sign-in/code", { email, code: code === "000000" ? "111111" : "000000" })).status).toBe(401);
    const signedIn = await submit(browser, "/dashboard/sign-in/code", { email, code });
    expect(signedIn.status).toBe(303);
    // A viewer reads but changes nothing, and is not shown what starts automation runs.
    expect((await browser.get("/dashboard/contacts")).status).toBe(200);
    const refused = await browser.post("/dashboard/contacts/lists", { name: "Nope" });
    expect(refused.status).toBe(403);
    const list = await json<{ id: string }>(await call("/api/v1/lists", { key: account.api_key, body: { name: "Viewers" } }));
    const automation = await call("/api/v1/automations", {
      key: account.api_key,
      body: { name: "Hooked", steps: [{ type: "add_to_list", list_id: list.id }] },
    });
    const { id, private_url } = await json<{ id: string; private_url: string }>(automation);
    const page = await (await browser.get(`/dashboard/automations/${id}`)).text();
    expect(page).toContain("Hooked");
    expect(page).not.toContain(new URL(private_url).pathname);
  });

  it("DELETE /members/{id} ends that member's open sessions; a lowered role applies to the next request", async () => {
    const account = await createAccount();
    const email = uniqueAddress("leaver");
    const member = await invite(account.api_key, email, "admin");
    const browser = await acceptInvitationOf(email);
    expect((await browser.get("/dashboard/api-keys")).status).toBe(200);
    const lowered = await call(`/api/v1/members/${member.id}`, { key: account.api_key, method: "PATCH", body: { role: "marketer" } });
    expect(lowered.status).toBe(200);
    expect((await browser.get("/dashboard/api-keys")).status).toBe(403);
    const removed = await call(`/api/v1/members/${member.id}`, { key: account.api_key, method: "DELETE" });
    expect(removed.status).toBe(200);
    const after = await browser.get("/dashboard");
    expect(after.status).toBe(303);
    expect(after.headers.get("Location")).toBe("/dashboard/sign-in");
  });

  it("stops API-key sign-in once a member is active, unless the owner allows it", async () => {
    const owner = uniqueAddress("keyowner");
    const account = await createAccount({ owner_email: owner });
    const keyBrowser = newBrowser();
    await open(keyBrowser, "/dashboard/sign-in");
    expect((await submit(keyBrowser, "/dashboard/sign-in", { key: account.api_key })).status).toBe(303);
    const ownerBrowser = await acceptInvitationOf(owner);
    // The key's session ends with the first member's sign-in, and a new one is refused.
    expect((await keyBrowser.get("/dashboard")).status).toBe(303);
    const refusedKey = newBrowser();
    await open(refusedKey, "/dashboard/sign-in");
    expect((await submit(refusedKey, "/dashboard/sign-in", { key: account.api_key })).status).toBe(403);
    expect((await submit(ownerBrowser, "/dashboard/members/settings", { key_sign_in: "on" })).status).toBe(303);
    await open(refusedKey, "/dashboard/sign-in");
    expect((await submit(refusedKey, "/dashboard/sign-in", { key: account.api_key })).status).toBe(303);
  });

  it("refuses what would leave an account without its owner or give it two, and bad input with 422", async () => {
    const owner = uniqueAddress("theowner");
    const account = await createAccount({ owner_email: owner });
    const members = await json<{ data: Member[] }>(await call("/api/v1/members", { key: account.api_key }));
    const ownerId = members.data[0]!.id;
    expect((await call("/api/v1/members", { key: account.api_key, body: { email: uniqueAddress("second"), role: "owner" } })).status).toBe(409);
    expect((await call(`/api/v1/members/${ownerId}`, { key: account.api_key, method: "DELETE" })).status).toBe(409);
    expect((await call(`/api/v1/members/${ownerId}`, { key: account.api_key, method: "PATCH", body: { role: "viewer" } })).status).toBe(409);
    const bad = await call("/api/v1/members", { key: account.api_key, body: { email: "not an address", role: "chief" } });
    expect(bad.status).toBe(422);
    expect(Object.keys((await json<{ errors: Record<string, string[]> }>(bad)).errors).sort()).toEqual(["email", "role"]);
    const scoped = await call("/api/v1/api-keys", { key: account.api_key, body: { name: "scoped", scopes: ["send"] } });
    const scopedKey = (await json<{ key: string }>(scoped)).key;
    expect((await call("/api/v1/members", { key: scopedKey })).status).toBe(403);
    await eventually(async () => ((await sinkMessagesTo(owner)).length > 0 ? true : undefined));
  });
});
