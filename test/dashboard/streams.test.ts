import { describe, expect, it } from "vitest";
import { call, createKey, json } from "../support/helpers";
import { campaignAccount } from "../support/campaigns";
import { cookieHeader, signIn, visit, type Browser } from "../support/dashboard";

// The dashboard's part of streams and topics (docs/streams.md): topics and the suppression list under Contacts, a
// contact's subscriptions and consent record, the campaign editor's topic, and the messages' stream filter.

/** A form post with repeated fields (checkboxes), as a browser sends it. */
function postFields(browser: Browser, path: string, fields: [string, string][]) {
  return visit(path, {
    method: "POST",
    headers: { Cookie: cookieHeader(browser.jar), "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams([["_csrf", browser.csrf], ...fields]).toString(),
  });
}

describe("dashboard: topics, suppressions and subscriptions", () => {
  it("adds and deletes topics under Contacts, with what a campaign editor then offers", async () => {
    const { key } = await campaignAccount();
    const browser = await signIn(key);
    const added = await browser.post("/dashboard/contacts/topics", { name: "Newsletter", description: "Monthly", default_subscribed: "true" });
    expect(added.status).toBe(303);
    expect((await browser.post("/dashboard/contacts/topics", { name: "Beta" })).status).toBe(303);
    const topics = await json<{ data: { id: string; name: string; default_subscribed: boolean }[] }>(await call("/api/v1/topics", { key }));
    expect(topics.data.map((topic) => [topic.name, topic.default_subscribed]).sort()).toEqual([
      ["Beta", false],
      ["Newsletter", true],
    ]);
    const page = await (await browser.get("/dashboard/contacts/topics")).text();
    expect(page).toContain("Newsletter");
    expect(page).toContain("subscribed (opt-out)");
    expect(page).toContain("not subscribed (opt-in)");

    const duplicate = await browser.post("/dashboard/contacts/topics", { name: "Newsletter" });
    expect(duplicate.status).toBe(422);
    expect(await duplicate.text()).toContain("already has a topic named Newsletter");

    const editor = await (await browser.get("/dashboard/campaigns")).text();
    for (const topic of topics.data) expect(editor).toContain(`<option value="${topic.id}">${topic.name}</option>`);

    const beta = topics.data.find((topic) => topic.name === "Beta")!;
    expect((await browser.post(`/dashboard/contacts/topics/${beta.id}/delete`, {})).status).toBe(303);
    expect((await call(`/api/v1/topics/${beta.id}`, { key })).status).toBe(404);
  });

  it("saves a contact's subscriptions and shows its consent record, or that there is none", async () => {
    const { key } = await campaignAccount();
    const browser = await signIn(key);
    const news = await json<{ id: string }>(await call("/api/v1/topics", { key, body: { name: "News" } }));
    const product = await json<{ id: string }>(await call("/api/v1/topics", { key, body: { name: "Product" } }));
    const contact = await json<{ id: string }>(await call("/api/v1/contacts", { key, body: { email: `sam-${crypto.randomUUID()}@example.org` } }));

    const before = await (await browser.get(`/dashboard/contacts/${contact.id}`)).text();
    expect(before).toContain("No consent record");
    expect(before).toMatch(new RegExp(`value="${news.id}" checked`));

    const saved = await postFields(browser, `/dashboard/contacts/${contact.id}/topics`, [
      ["offered", news.id],
      ["offered", product.id],
      ["topic", product.id],
    ]);
    expect(saved.status).toBe(303);
    expect((await json<{ topics: Record<string, boolean> }>(await call(`/api/v1/contacts/${contact.id}`, { key }))).topics).toEqual({
      [news.id]: false,
      [product.id]: true,
    });
    const after = await (await browser.get(`/dashboard/contacts/${contact.id}`)).text();
    expect(after).not.toMatch(new RegExp(`value="${news.id}" checked`));
    expect(after).toMatch(new RegExp(`value="${product.id}" checked`));

    // An unknown topic is refused with the API's message, and nothing changes.
    const refused = await postFields(browser, `/dashboard/contacts/${contact.id}/topics`, [["offered", "top_nope"]]);
    expect(refused.status).toBe(422);
    expect(await refused.text()).toContain("No topic top_nope");

    // A test key signs in and reads, but changes nothing.
    const sandbox = await signIn((await createKey(key, { name: "sandbox", mode: "test" })).key);
    const blocked = await postFields(sandbox, `/dashboard/contacts/${contact.id}/topics`, [
      ["offered", news.id],
      ["topic", news.id],
    ]);
    expect(blocked.status).toBe(403);
  });

  it("lists suppressions with their scope, adds one for broadcast mail only, and removes one scope", async () => {
    const { key } = await campaignAccount();
    const browser = await signIn(key);
    const address = `pat-${crypto.randomUUID()}@example.org`;
    expect((await browser.post("/dashboard/contacts/suppressions", { email: address, scope: "broadcast", reason: "unsubscribe" })).status).toBe(303);
    expect((await browser.post("/dashboard/contacts/suppressions", { email: address, scope: "all", reason: "manual" })).status).toBe(303);
    const page = await (await browser.get(`/dashboard/contacts/suppressions?email=${encodeURIComponent(address)}`)).text();
    expect(page).toContain("<td>broadcast</td>");
    expect(page).toContain("<td>all</td>");

    expect((await browser.post("/dashboard/contacts/suppressions/remove", { email: address, scope: "all" })).status).toBe(303);
    const left = await json<{ data: { scope: string; reason: string }[] }>(await call(`/api/v1/suppressions?email=${address}`, { key }));
    expect(left.data).toEqual([expect.objectContaining({ scope: "broadcast", reason: "unsubscribe" })]);
    const refused = await browser.post("/dashboard/contacts/suppressions", { email: "not an address", scope: "all" });
    expect(refused.status).toBe(422);
    expect((await browser.post("/dashboard/contacts/suppressions", { email: address, scope: "everything" })).status).toBe(422);
  });

  it("filters messages by stream and marks broadcast mail", async () => {
    const { key, domain } = await campaignAccount();
    const browser = await signIn(key);
    const from = `hello@${domain.name}`;
    await call("/api/v1/send", { key, body: { from, to: "a@example.org", subject: "Receipt 1042", text: "x" } });
    await call("/api/v1/send", { key, body: { from, to: "b@example.org", subject: "Spring sale", text: "x", stream: "broadcast" } });
    const broadcast = await (await browser.get("/dashboard/messages?stream=broadcast")).text();
    expect(broadcast).toContain("Spring sale");
    expect(broadcast).not.toContain("Receipt 1042");
    expect(broadcast).toContain('<span class="badge">broadcast</span>');
    const transactional = await (await browser.get("/dashboard/messages?stream=transactional")).text();
    expect(transactional).toContain("Receipt 1042");
    expect(transactional).not.toContain("Spring sale");
  });
});
