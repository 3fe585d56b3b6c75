// The dashboard refuses what the API refuses, with the same code and message, and its draft editor changes only
// what its form edits. Each refusal is asked of both, side by side.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { call, createAccount, createKey, d1Of, json } from "../support/helpers";
import { verifiedDomain } from "../support/sending";
import { receiverPath, receiverUrl } from "../support/webhooks";
import { cookieHeader, signIn, visit, type Browser } from "../support/dashboard";

type Campaign = {
  id: string;
  subject: string | null;
  lists: string[];
  exclude_lists: string[];
  segments: string[];
  html: string | null;
  tags: string[];
};

/** The visible text of a dashboard error page's notice. */
async function noticeOf(response: Response): Promise<string> {
  const html = await response.text();
  const notice = /<div class="notice error" role="alert">([\s\S]*?)<\/div>/.exec(html)?.[1] ?? "";
  return notice
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");
}

async function campaignAccount(features = ["email_api", "smtp_relay", "campaigns"]) {
  const account = await createAccount({ features });
  const key = account.api_key;
  const domain = await verifiedDomain(key);
  const sender = await json<{ id: string }>(await call("/api/v1/senders", { key, body: { name: "News", email: `news@${domain.name}` } }));
  const list = await json<{ id: string }>(await call("/api/v1/lists", { key, body: { name: "Readers" } }));
  const excluded = await json<{ id: string }>(await call("/api/v1/lists", { key, body: { name: "Staff" } }));
  await call(`/api/v1/lists/${list.id}/contacts`, { key, body: { emails: ["ann@example.com", "bob@example.com", "eve@example.com"] } });
  await call(`/api/v1/lists/${excluded.id}/contacts`, { key, body: { emails: ["eve@example.com"] } });
  return { account, key, domain, sender: sender.id, list: list.id, excluded: excluded.id };
}

/** The editor's fields as the browser posts them for this draft: every control the page renders, as rendered. */
async function editorForm(browser: Browser, campaignId: string): Promise<URLSearchParams> {
  const html = await (await browser.get(`/dashboard/campaigns/${campaignId}`)).text();
  const form = /<form method="post" action="\/dashboard\/campaigns\/cmp_[^"]+" class="stack">([\s\S]*?)<\/form>/.exec(html)![1]!;
  const fields = new URLSearchParams();
  const decode = (value: string) =>
    value
      .replace(/&lt;/g, "<")
      .replace(/&gt;/g, ">")
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&amp;/g, "&");
  for (const input of form.matchAll(/<input([^>]*)>/g)) {
    const attrs = input[1]!;
    const name = /name="([^"]+)"/.exec(attrs)?.[1];
    const value = decode(/value="([^"]*)"/.exec(attrs)?.[1] ?? "");
    if (!name) continue;
    if (/type="checkbox"/.test(attrs) && !/checked/.test(attrs)) continue;
    fields.append(name, value);
  }
  for (const select of form.matchAll(/<select[^>]*name="([^"]+)"[^>]*>([\s\S]*?)<\/select>/g)) {
    fields.append(select[1]!, /<option value="([^"]*)" selected/.exec(select[2]!)?.[1] ?? "");
  }
  for (const area of form.matchAll(/<textarea[^>]*name="([^"]+)"[^>]*>([\s\S]*?)<\/textarea>/g)) fields.append(area[1]!, decode(area[2]!));
  return fields;
}

/** A form post as the browser sends it: URLSearchParams keeps repeated names (lists=…&lists=…), which a plain object cannot. */
const postForm = (browser: Browser, path: string, fields: URLSearchParams) =>
  visit(path, {
    method: "POST",
    headers: { Cookie: cookieHeader(browser.jar), "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams([["_csrf", browser.csrf], ...fields]).toString(),
  });

describe("the dashboard's draft editor", { timeout: 60_000 }, () => {
  it("keeps a draft's exclude lists when only the subject changes", async () => {
    const { key, sender, list, excluded } = await campaignAccount();
    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", {
        key,
        body: { name: "News", sender_id: sender, subject: "Old", html: "\n<p>Hi {{first_name}}</p>\r\n", lists: [list], exclude_lists: [excluded] },
      }),
    );
    const browser = await signIn(key);
    const fields = await editorForm(browser, draft.id);
    fields.set("subject", "New subject");
    const saved = await postForm(browser, `/dashboard/campaigns/${draft.id}`, fields);
    expect(saved.status).toBe(303);
    const after = await json<Campaign>(await call(`/api/v1/campaigns/${draft.id}`, { key }));
    expect(after).toMatchObject({ subject: "New subject", lists: [list], exclude_lists: [excluded], html: "\n<p>Hi {{first_name}}</p>\r\n" });
    // The excluded contact is still left out of the audience the page counts.
    expect(await (await browser.get(`/dashboard/campaigns/${draft.id}`)).text()).toMatch(/Audience: <strong>2<\/strong>/);
  });

  it("keeps lists the editor does not offer (past its first 100)", async () => {
    const { account, key, sender } = await campaignAccount();
    const oldest = await json<{ id: string }>(await call("/api/v1/lists", { key, body: { name: "Oldest" } }));
    // Newer lists push the oldest off the editor's first page (newest first).
    await d1Of(account).batch(
      Array.from({ length: 150 }, (_, i) =>
        d1Of(account)
          .prepare("INSERT INTO lists (id, account_id, name) SELECT ?1, account_id, ?2 FROM lists WHERE id = ?3")
          .bind(`lst_bulk${String(i).padStart(3, "0")}${oldest.id.slice(-8)}`, `Bulk ${i}`, oldest.id),
      ),
    );
    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "News", sender_id: sender, subject: "Old", text: "Hi", lists: [oldest.id] } }),
    );
    const browser = await signIn(key);
    const fields = await editorForm(browser, draft.id);
    expect(fields.getAll("lists_offered")).not.toContain(oldest.id);
    fields.set("subject", "Changed");
    expect((await postForm(browser, `/dashboard/campaigns/${draft.id}`, fields)).status).toBe(303);
    expect(await json<Campaign>(await call(`/api/v1/campaigns/${draft.id}`, { key }))).toMatchObject({ subject: "Changed", lists: [oldest.id] });
  });

  it("refuses what the API's schema refuses, with the API's messages, and changes nothing", async () => {
    const { key, sender, list } = await campaignAccount();
    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "News", sender_id: sender, subject: "Old", text: "Hi", lists: [list] } }),
    );
    const api = await call(`/api/v1/campaigns/${draft.id}`, { key, method: "PATCH", body: { tags: ["not a tag!"], name: "  " } });
    expect(api.status).toBe(422);
    const apiBody = await json<{ code: string; errors: Record<string, string[]> }>(api);
    const browser = await signIn(key);
    const fields = await editorForm(browser, draft.id);
    fields.set("tags", "not a tag!");
    fields.set("name", "  ");
    const page = await postForm(browser, `/dashboard/campaigns/${draft.id}`, fields);
    expect(page.status).toBe(422);
    const notice = await noticeOf(page);
    for (const [path, messages] of Object.entries(apiBody.errors)) for (const message of messages) expect(notice).toContain(`${path}: ${message}`);
    expect(await json<Campaign>(await call(`/api/v1/campaigns/${draft.id}`, { key }))).toMatchObject({ name: "News", tags: [] });
  });
});

describe("the dashboard refuses what the API refuses", { timeout: 60_000 }, () => {
  it("AI drafts need the campaigns feature: 403 from both", async () => {
    const account = await createAccount({ features: ["email_api", "smtp_relay", "ai"] });
    const api = await call("/api/v1/ai/campaign", { key: account.api_key, body: { prompt: "A spring sale for our tea shop" } });
    expect(api.status).toBe(403);
    const apiBody = await json<{ code: string; message: string }>(api);
    expect(apiBody.code).toBe("feature_disabled");
    const browser = await signIn(account.api_key);
    const page = await browser.post("/dashboard/ai", { prompt: "A spring sale for our tea shop", variations: "1" });
    expect(page.status).toBe(403);
    expect(await noticeOf(page)).toBe(apiBody.message);
    expect((await browser.get("/dashboard/ai")).status).toBe(403);
    const requests = await d1Of(account)
      .prepare("SELECT count(*) AS n FROM ai_requests WHERE account_id = ?1")
      .bind(account.id)
      .first<{ n: number }>();
    expect(requests?.n).toBe(0);
  });

  it("a campaign from a domain under a reputation hold: 403 with the hold's notice from both, and it stays a draft", async () => {
    const { key, domain, sender, list } = await campaignAccount();
    await env.DB.prepare("UPDATE domains SET reputation_status = 'held', reputation_reason = 'bounce rate 20.0% is over 5.0%' WHERE id = ?1")
      .bind(domain.id)
      .run();
    const create = () => call("/api/v1/campaigns", { key, body: { name: "News", sender_id: sender, subject: "Hi", text: "Hello", lists: [list] } });
    const viaApi = await json<Campaign>(await create());
    const viaDashboard = await json<Campaign>(await create());
    const api = await call(`/api/v1/campaigns/${viaApi.id}/send`, { key, body: {} });
    expect(api.status).toBe(403);
    const apiBody = await json<{ code: string; message: string }>(api);
    expect(apiBody.code).toBe("domain_reputation_hold");
    const browser = await signIn(key);
    const page = await browser.post(`/dashboard/campaigns/${viaDashboard.id}/send`, { send_at: "" });
    expect(page.status).toBe(403);
    expect(await noticeOf(page)).toBe(apiBody.message);
    expect(apiBody.message).toContain("bounce rate 20.0% is over 5.0%");
    const after = await json<{ status: string; credits_reserved: number }>(await call(`/api/v1/campaigns/${viaDashboard.id}`, { key }));
    expect(after).toMatchObject({ status: "draft", credits_reserved: 0 });
  });

  it("a schedule time is read as typed, in UTC and 24-hour; another format is refused naming the one it takes", async () => {
    const { key, sender, list } = await campaignAccount();
    const browser = await signIn(key);
    const day = new Date(Date.now() + 2 * 86_400_000).toISOString().slice(0, 10);
    const [month, date, year] = [day.slice(5, 7), day.slice(8, 10), day.slice(0, 4)];
    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "News", sender_id: sender, subject: "Hi", text: "Hello", lists: [list] } }),
    );
    const localised = await browser.post(`/dashboard/campaigns/${draft.id}/send`, { send_at: `${month}/${date}/${year} 05:45 PM` });
    expect(localised.status).toBe(422);
    expect(await noticeOf(localised)).toContain("send_at: Write the time in UTC as YYYY-MM-DD HH:MM, 24-hour");
    expect(await json(await call(`/api/v1/campaigns/${draft.id}`, { key }))).toMatchObject({ status: "draft" });

    const scheduled = await browser.post(`/dashboard/campaigns/${draft.id}/send`, { send_at: ` ${day} 17:45 ` });
    expect(scheduled.status).toBe(303);
    expect(await json(await call(`/api/v1/campaigns/${draft.id}`, { key }))).toMatchObject({ status: "scheduled", send_at: `${day}T17:45:00.000Z` });
  });

  it("a test email needs what POST /send needs: without smtp_relay, 403 from both", async () => {
    const account = await createAccount({ features: ["email_api"] });
    const domain = await verifiedDomain(account.api_key);
    const body = { from: `hello@${domain.name}`, to: "ann@example.com", subject: "Hi", text: "Hello" };
    const api = await call("/api/v1/send", { key: account.api_key, body });
    expect(api.status).toBe(403);
    const apiBody = await json<{ code: string; message: string }>(api);
    const browser = await signIn(account.api_key);
    const page = await browser.post("/dashboard/messages/test", body);
    expect(page.status).toBe(403);
    expect(await noticeOf(page)).toBe(apiBody.message);
  });

  it("a test key cannot change a campaign through either", async () => {
    const { key, sender, list } = await campaignAccount();
    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "News", sender_id: sender, subject: "Old", text: "Hi", lists: [list] } }),
    );
    const testKey = await createKey(key, { name: "sandbox", mode: "test" });
    const api = await call(`/api/v1/campaigns/${draft.id}`, { key: testKey.key, method: "PATCH", body: { subject: "Changed" } });
    expect(api.status).toBe(403);
    const browser = await signIn(testKey.key);
    const page = await browser.post(`/dashboard/campaigns/${draft.id}`, { name: "News", subject: "Changed" });
    expect(page.status).toBe(403);
    expect((await json<Campaign>(await call(`/api/v1/campaigns/${draft.id}`, { key }))).subject).toBe("Old");
  });
});

describe("templates, segments and contacts answer as the API does", { timeout: 60_000 }, () => {
  it("deleting a segment an unfinished campaign targets: 409 with the same message from both, and it stays", async () => {
    const { key, sender, list } = await campaignAccount();
    const segment = await json<{ id: string }>(
      await call("/api/v1/segments", {
        key,
        body: { name: "Pro", match: "all", conditions: [{ field: "custom_fields.plan", op: "eq", value: "pro" }] },
      }),
    );
    const campaign = await json<{ id: string }>(
      await call("/api/v1/campaigns", {
        key,
        body: { name: "News", sender_id: sender, subject: "Hi", text: "Hello", lists: [list], segments: [segment.id] },
      }),
    );
    const api = await call(`/api/v1/segments/${segment.id}`, { key, method: "DELETE" });
    expect(api.status).toBe(409);
    const apiBody = await json<{ message: string }>(api);
    expect(apiBody.message).toBe(`The segment is in the audience of campaign ${campaign.id} ("News"), which has not finished; remove it there first`);
    const browser = await signIn(key);
    const page = await browser.post(`/dashboard/segments/${segment.id}/delete`, {});
    expect(page.status).toBe(409);
    expect(await noticeOf(page)).toBe(apiBody.message);
    expect((await call(`/api/v1/segments/${segment.id}`, { key })).status).toBe(200);
  });

  it("a segment condition the API refuses is refused by the builder with the API's message", async () => {
    const { key } = await campaignAccount();
    const condition = { field: "status", op: "contains", value: "sub" };
    const api = await call("/api/v1/segments", { key, body: { name: "Bad", match: "all", conditions: [condition] } });
    expect(api.status).toBe(422);
    const apiBody = await json<{ errors: Record<string, string[]> }>(api);
    const browser = await signIn(key);
    const page = await browser.post("/dashboard/segments", { name: "Bad", match: "all", ...condition });
    expect(page.status).toBe(422);
    const notice = await noticeOf(page);
    for (const [path, messages] of Object.entries(apiBody.errors)) for (const message of messages) expect(notice).toContain(`${path}: ${message}`);
    const segments = await json<{ data: unknown[] }>(await call("/api/v1/segments", { key }));
    expect(segments.data).toHaveLength(0);
  });

  it("a template without html or text: 422 with the same field error from both", async () => {
    const { key } = await campaignAccount();
    const api = await call("/api/v1/templates", { key, body: { name: "Empty", subject: "Hi" } });
    expect(api.status).toBe(422);
    const apiBody = await json<{ errors: Record<string, string[]> }>(api);
    const browser = await signIn(key);
    const page = await browser.post("/dashboard/templates", { name: "Empty", subject: "Hi", html: "", text: "" });
    expect(page.status).toBe(422);
    const notice = await noticeOf(page);
    for (const [path, messages] of Object.entries(apiBody.errors)) for (const message of messages) expect(notice).toContain(`${path}: ${message}`);
  });

  it("saving a contact's first name changes only the first name", async () => {
    const { key } = await campaignAccount();
    const contact = await json<{ id: string }>(
      await call("/api/v1/contacts", { key, body: { email: "zoe@example.com", first_name: "Zoe", last_name: "Ng", custom_fields: { plan: "pro" } } }),
    );
    const browser = await signIn(key);
    const page = await (await browser.get(`/dashboard/contacts/${contact.id}`)).text();
    expect(page).toContain('value="Zoe"');
    const saved = await browser.post(`/dashboard/contacts/${contact.id}`, {
      first_name: "Zoë",
      last_name: "Ng",
      company: "",
      phone: "",
      country: "",
      status: "subscribed",
    });
    expect(saved.status).toBe(303);
    expect(await json(await call(`/api/v1/contacts/${contact.id}`, { key }))).toMatchObject({
      first_name: "Zoë",
      last_name: "Ng",
      custom_fields: { plan: "pro" },
      status: "subscribed",
    });
  });
});

describe("contacts search and lists answer as the API does", { timeout: 60_000 }, () => {
  it("finds contacts by any part of the address or the name, the same ones GET /contacts?search= finds", async () => {
    const { key } = await campaignAccount();
    await call("/api/v1/contacts", { key, body: { email: "zoe.lee@example.com", first_name: "Zoe", last_name: "Lee" } });
    await call("/api/v1/contacts", { key, body: { email: "mo@sample.org", first_name: "Mo", last_name: "Stone" } });
    const browser = await signIn(key);
    const found = async (search: string) => {
      const html = await (await browser.get(`/dashboard/contacts?search=${encodeURIComponent(search)}`)).text();
      return [...html.matchAll(/<a href="\/dashboard\/contacts\/con_[^"]+">([^<]+)<\/a>/g)].map((match) => match[1]).sort();
    };
    const viaApi = async (search: string) =>
      (await json<{ data: { email: string }[] }>(await call(`/api/v1/contacts?search=${encodeURIComponent(search)}`, { key }))).data
        .map((row) => row.email)
        .sort();
    const cases: [string, string[]][] = [
      ["LEE", ["zoe.lee@example.com"]],
      ["sample", ["mo@sample.org"]],
      ["mo st", ["mo@sample.org"]],
      ["example.com", ["ann@example.com", "bob@example.com", "eve@example.com", "zoe.lee@example.com"]],
      ["%", []],
    ];
    for (const [search, expected] of cases) {
      expect(await found(search)).toEqual(expected);
      expect(await viaApi(search)).toEqual(expected);
    }
  });

  it("lists show their counts, rename as PATCH /lists does (its limits and messages) and delete as DELETE /lists does", async () => {
    const { key, sender, list, excluded } = await campaignAccount();
    const browser = await signIn(key);
    const page = await (await browser.get("/dashboard/contacts")).text();
    expect(page).toMatch(/>Readers<\/a>\s*<\/td>\s*<td>3<\/td>\s*<td>3<\/td>/);
    const longName = "L".repeat(150);
    expect((await browser.post(`/dashboard/contacts/lists/${list}`, { name: longName })).status).toBe(303);
    expect((await json<{ name: string }>(await call(`/api/v1/lists/${list}`, { key }))).name).toBe(longName);
    const api = await call(`/api/v1/lists/${list}`, { key, method: "PATCH", body: { name: "x".repeat(201) } });
    expect(api.status).toBe(422);
    const apiBody = await json<{ errors: Record<string, string[]> }>(api);
    const refused = await browser.post(`/dashboard/contacts/lists/${list}`, { name: "x".repeat(201) });
    expect(refused.status).toBe(422);
    const notice = await noticeOf(refused);
    for (const [path, messages] of Object.entries(apiBody.errors)) expect(notice).toContain(`${path}: ${messages.join(", ")}`);
    expect((await browser.post("/dashboard/contacts/lists", { name: "M".repeat(150) })).status).toBe(303);

    const campaign = await json<{ id: string }>(
      await call("/api/v1/campaigns", { key, body: { name: "News", sender_id: sender, subject: "Hi", text: "Hello", lists: [list] } }),
    );
    const apiDelete = await call(`/api/v1/lists/${list}`, { key, method: "DELETE" });
    expect(apiDelete.status).toBe(409);
    const refusal = (await json<{ message: string }>(apiDelete)).message;
    expect(refusal).toBe(`The list is in the audience of campaign ${campaign.id} ("News"), which has not finished; remove it there first`);
    const dashboardDelete = await browser.post(`/dashboard/contacts/lists/${list}/delete`, {});
    expect(dashboardDelete.status).toBe(409);
    expect(await noticeOf(dashboardDelete)).toBe(refusal);
    expect((await call(`/api/v1/lists/${list}`, { key })).status).toBe(200);
    expect((await browser.post(`/dashboard/contacts/lists/${excluded}/delete`, {})).status).toBe(303);
    expect((await call(`/api/v1/lists/${excluded}`, { key })).status).toBe(404);
    expect((await browser.post(`/dashboard/contacts/lists/${excluded}/delete`, {})).status).toBe(404);
  });
});

/** A dashboard form and the API body it stands for: both must be refused with the API's status and field errors. */
async function expectBothRefuse(
  browser: Browser,
  key: string,
  api: { path: string; method?: string; body: unknown },
  dashboard: { path: string; form: Record<string, string> },
) {
  const apiResponse = await call(api.path, { key, method: api.method, body: api.body });
  expect(apiResponse.status).toBe(422);
  const apiBody = await json<{ errors: Record<string, string[]> }>(apiResponse);
  const page = await browser.post(dashboard.path, dashboard.form);
  expect(page.status).toBe(422);
  const notice = await noticeOf(page);
  for (const [path, messages] of Object.entries(apiBody.errors)) expect(notice).toContain(`${path}: ${messages.join(", ")}`);
}

describe("webhooks, senders and domains: the dashboard's forms parse with the API's schemas", { timeout: 60_000 }, () => {
  it("a webhook endpoint with an unknown event type, a long description or an ftp URL is refused by both, and none is added", async () => {
    const account = await createAccount();
    const key = account.api_key;
    const browser = await signIn(key);
    const url = receiverUrl(receiverPath());
    const cases: { body: Record<string, unknown>; form: Record<string, string> }[] = [
      { body: { url, events: ["nope.happened"] }, form: { url, events: "nope.happened" } },
      { body: { url, events: ["*"], description: "d".repeat(501) }, form: { url, description: "d".repeat(501) } },
      { body: { url: "ftp://example.com/hooks", events: ["*"] }, form: { url: "ftp://example.com/hooks" } },
    ];
    for (const { body, form } of cases) {
      await expectBothRefuse(browser, key, { path: "/api/v1/webhooks", body }, { path: "/dashboard/webhooks", form });
    }
    expect((await json<{ data: unknown[] }>(await call("/api/v1/webhooks", { key }))).data).toHaveLength(0);
  });

  it("a sender whose name has a line break or is too long, or whose address is on an unverified domain, is refused by both", async () => {
    const { key, domain } = await campaignAccount();
    const browser = await signIn(key);
    const cases = [
      { name: "News\nBcc: everyone@example.com", email: `news@${domain.name}` },
      { name: "N".repeat(201), email: `news@${domain.name}` },
      { name: "News", email: "news@unverified.example" },
    ];
    for (const sender of cases) {
      await expectBothRefuse(browser, key, { path: "/api/v1/senders", body: sender }, { path: "/dashboard/campaigns/senders", form: sender });
    }
    expect((await json<{ data: unknown[] }>(await call("/api/v1/senders", { key }))).data).toHaveLength(1);
  });

  it("a domain name that is not one, an unknown warm-up preset and over 200 receiving addresses are refused by both, and nothing changes", async () => {
    const { key, domain } = await campaignAccount();
    const browser = await signIn(key);
    await expectBothRefuse(
      browser,
      key,
      { path: "/api/v1/domains", body: { name: "not a domain" } },
      { path: "/dashboard/domains", form: { name: "not a domain" } },
    );
    await expectBothRefuse(
      browser,
      key,
      { path: `/api/v1/domains/${domain.id}/warmup`, method: "PUT", body: { enabled: true, preset: "turbo" } },
      { path: `/dashboard/domains/${domain.id}/warmup`, form: { enabled: "true", preset: "turbo" } },
    );
    const addresses = Array.from({ length: 201 }, (_, index) => `desk${index}`);
    await expectBothRefuse(
      browser,
      key,
      { path: `/api/v1/domains/${domain.id}`, method: "PATCH", body: { receiving: false, receiving_addresses: addresses } },
      { path: `/dashboard/inbound/domains/${domain.id}`, form: { addresses: addresses.join(", ") } },
    );
    expect((await json<{ data: unknown[] }>(await call("/api/v1/domains", { key }))).data).toHaveLength(1);
    expect(await json(await call(`/api/v1/domains/${domain.id}`, { key }))).toMatchObject({ receiving_addresses: null, warmup: { status: "off" } });
  });

  it("an API key with a scope that does not exist is refused by both (the dashboard made it a full-access key), and so is a long credential name", async () => {
    const { key } = await campaignAccount();
    const browser = await signIn(key);
    await expectBothRefuse(
      browser,
      key,
      { path: "/api/v1/api-keys", body: { name: "CI", scopes: ["everything"], mode: "live" } },
      { path: "/dashboard/api-keys", form: { name: "CI", scopes: "everything", mode: "live" } },
    );
    const keys = await json<{ data: { name: string }[] }>(await call("/api/v1/api-keys", { key }));
    expect(keys.data.map((row) => row.name)).not.toContain("CI");
    await expectBothRefuse(
      browser,
      key,
      { path: "/api/v1/smtp-credentials", body: { name: "c".repeat(101) } },
      { path: "/dashboard/smtp-credentials", form: { name: "c".repeat(101) } },
    );
  });

  it("a CSV upload with an address over 1,024 characters is refused as POST /verify refuses it, and no job starts", async () => {
    const account = await createAccount();
    const key = account.api_key;
    const long = `${"a".repeat(1100)}@example.com`;
    const api = await call("/api/v1/verify", { key, body: { emails: ["ann@example.com", long] } });
    expect(api.status).toBe(422);
    const apiBody = await json<{ errors: Record<string, string[]> }>(api);
    const browser = await signIn(key);
    const body = new FormData();
    body.set("_csrf", browser.csrf);
    body.set("file", new File([`email\nann@example.com\n${long}\n`], "list.csv", { type: "text/csv" }));
    const upload = await visit("/dashboard/verification/upload", { method: "POST", headers: { Cookie: cookieHeader(browser.jar) }, body });
    expect(upload.status).toBe(422);
    const notice = await noticeOf(upload);
    for (const [path, messages] of Object.entries(apiBody.errors)) expect(notice).toContain(`${path}: ${messages.join(", ")}`);
    expect(await (await browser.get("/dashboard/verification")).text()).not.toContain("list.csv");
  });

  it("a test email is refused where POST /send refuses it (a subject over 998 characters, a bad address) and sent where it is accepted", async () => {
    const { key, domain } = await campaignAccount();
    const browser = await signIn(key);
    const good = { from: `News <news@${domain.name}>`, to: "ann@example.com", subject: "Hi", text: "Hello" };
    for (const bad of [{ subject: "s".repeat(999) }, { to: "ann@" }]) {
      await expectBothRefuse(
        browser,
        key,
        { path: "/api/v1/send", body: { ...good, ...bad } },
        { path: "/dashboard/messages/test", form: { ...good, ...bad } },
      );
    }
    expect((await browser.post("/dashboard/messages/test", good)).status).toBe(303);
    const sent = await json<{ data: { subject: string; tags: string[] }[] }>(await call("/api/v1/messages", { key }));
    expect(sent.data.map((message) => [message.subject, message.tags])).toEqual([["Hi", ["dashboard-test"]]]);
  });

  it("a contact import without an email column is refused by both with the same field errors", async () => {
    const { key } = await campaignAccount();
    const csv = "name,phone\nAnn,1\n";
    const api = await call("/api/v1/contacts/import", { key, body: { file: `data:text/csv;base64,${btoa(csv)}` } });
    expect(api.status).toBe(422);
    const apiBody = await json<{ message: string; errors: Record<string, string[]> }>(api);
    const browser = await signIn(key);
    const body = new FormData();
    body.set("_csrf", browser.csrf);
    body.set("file", new File([csv], "people.csv", { type: "text/csv" }));
    const upload = await visit("/dashboard/contacts/imports", { method: "POST", headers: { Cookie: cookieHeader(browser.jar) }, body });
    expect(upload.status).toBe(422);
    const notice = await noticeOf(upload);
    expect(notice.startsWith(apiBody.message)).toBe(true);
    for (const [path, messages] of Object.entries(apiBody.errors)) expect(notice).toContain(`${path}: ${messages.join(", ")}`);
  });
});
