// The dashboard's sign-up forms page: list, create (showing the snippet the API gives), delete, as the API does.
import { describe, expect, it } from "vitest";
import { audienceOf, campaignAccount } from "../support/campaigns";
import { call, createKey, json } from "../support/helpers";
import { signIn } from "../support/dashboard";

type Form = { id: string; name: string; lists: string[]; double_opt_in: boolean; sender_id: string | null; fields: string[]; html_snippet: string };

const decode = (value: string) =>
  value
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");

describe("dashboard: sign-up forms", { timeout: 30_000 }, () => {
  it("lists, creates (showing the HTML snippet) and deletes forms, as the API sees them", async () => {
    const { key, sender } = await campaignAccount();
    const { list } = await audienceOf(key, 0);
    const browser = await signIn(key);

    const contacts = await (await browser.get("/dashboard/contacts")).text();
    expect(contacts).toContain('href="/dashboard/contacts/forms"');
    const empty = await browser.get("/dashboard/contacts/forms");
    expect(empty.status).toBe(200);
    const emptyHtml = await empty.text();
    expect(emptyHtml).toContain("No forms yet.");
    expect(emptyHtml).toContain(`<option value="${sender}">`);
    expect(emptyHtml).toContain(`value="${list}"`);

    const created = await browser.post("/dashboard/contacts/forms", {
      name: "Footer",
      lists: list,
      fields: "first_name",
      double_opt_in: "1",
      sender_id: sender,
      redirect_url: "https://acme.example/thanks",
    });
    expect(created.status).toBe(303);
    const location = created.headers.get("Location")!;
    expect(location).toMatch(/^\/dashboard\/contacts\/forms\/frm_/);
    const id = location.split("/").at(-1)!;

    const form = await json<Form>(await call(`/api/v1/forms/${id}`, { key }));
    expect(form).toMatchObject({ name: "Footer", lists: [list], double_opt_in: true, sender_id: sender, fields: ["first_name"] });
    const page = await browser.get(location);
    expect(page.status).toBe(200);
    const snippet = /<pre class="snippet" data-testid="html-snippet"><code>([\s\S]*?)<\/code><\/pre>/.exec(await page.text())?.[1];
    expect(decode(snippet ?? "")).toBe(form.html_snippet);

    const listed = await (await browser.get("/dashboard/contacts/forms")).text();
    expect(listed).toContain(`href="/dashboard/contacts/forms/${id}"`);
    expect(listed).toContain("double opt-in");

    const deleted = await browser.post(`/dashboard/contacts/forms/${id}/delete`, {});
    expect(deleted.status).toBe(303);
    expect(deleted.headers.get("Location")).toBe("/dashboard/contacts/forms?deleted=1");
    expect((await call(`/api/v1/forms/${id}`, { key })).status).toBe(404);
    expect((await browser.get(location)).status).toBe(404);
  });

  it("refuses what the API refuses, a form without its CSRF token, a test key's changes and a key without the contacts scope", async () => {
    const { key } = await campaignAccount();
    const browser = await signIn(key);
    const noSender = await browser.post("/dashboard/contacts/forms", { name: "Footer", double_opt_in: "1" });
    expect(noSender.status).toBe(422);
    expect(await noSender.text()).toContain("sender_id: A double opt-in form needs a sender");
    const badList = await browser.post("/dashboard/contacts/forms", { name: "Footer", lists: "lst_nope" });
    expect(badList.status).toBe(422);
    expect(await badList.text()).toContain("lists.0: No list lst_nope in this account");
    expect((await browser.post("/dashboard/contacts/forms", { name: "Footer" }, { csrf: false })).status).toBe(403);
    expect((await json<{ data: unknown[] }>(await call("/api/v1/forms", { key }))).data).toEqual([]);

    const testKey = await createKey(key, { name: "test", mode: "test" });
    const asTest = await signIn(testKey.key);
    expect((await asTest.get("/dashboard/contacts/forms")).status).toBe(200);
    const refused = await asTest.post("/dashboard/contacts/forms", { name: "Footer" });
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain("needs a live key");

    const sendOnly = await createKey(key, { name: "sender", scopes: ["send"] });
    expect((await (await signIn(sendOnly.key)).get("/dashboard/contacts/forms")).status).toBe(403);
  });
});
