import { sharedDb } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { authenticateSmtpCredential } from "../../src/domain/smtp/credentials";
import { call, createAccount, createKey, json } from "../support/helpers";
import { verifiedDomain } from "../support/sending";
import { receiverPath, receiverUrl, waitForRequests } from "../support/webhooks";
import { cookieHeader, signIn, visit } from "../support/dashboard";

describe("dashboard pages", () => {
  it("renders every section for a full-access key, with empty states on a new account", async () => {
    const account = await createAccount({ features: ["email_api", "smtp_relay", "campaigns", "automations", "ai"] });
    const browser = await signIn(account.api_key);
    const empty: Record<string, string> = {
      "/dashboard": "No mail in the last 30 days",
      "/dashboard/messages": "No messages yet",
      "/dashboard/domains": "No domains yet",
      "/dashboard/api-keys": "Default",
      "/dashboard/webhooks": "No endpoints yet",
      "/dashboard/verification": "No bulk verification jobs yet",
      "/dashboard/contacts": "No contacts yet",
      "/dashboard/campaigns": "No campaigns yet",
      "/dashboard/automations": "No automations yet",
      "/dashboard/ai": "No AI requests yet",
      "/dashboard/usage": "Credit movements",
      "/dashboard/smtp-credentials": "No SMTP credentials yet",
    };
    for (const [path, text] of Object.entries(empty)) {
      const page = await browser.get(path);
      expect(page.status, path).toBe(200);
      expect(await page.text(), path).toContain(text);
    }
  });

  it("shows a domain's reputation and warm-up, starts and pauses the warm-up, and refuses that to a test key", async () => {
    const account = await createAccount();
    const domain = await verifiedDomain(account.api_key);
    const browser = await signIn(account.api_key);
    const page = await (await browser.get(`/dashboard/domains/${domain.id}`)).text();
    expect(page).toContain("Deliverability");
    expect(page).toContain("Today&#39;s bounce rate (limit 5.00%)");
    expect(page).toContain("Today&#39;s complaint rate (limit 0.30%)");
    expect(page).toContain("0 of 0 sent");
    expect(page).toContain("Start warm-up");

    expect((await browser.post(`/dashboard/domains/${domain.id}/warmup`, { enabled: "true", preset: "conservative" })).status).toBe(303);
    const started = await json<{ warmup: { status: string; today_cap: number } }>(
      await call(`/api/v1/domains/${domain.id}`, { key: account.api_key }),
    );
    expect(started.warmup).toMatchObject({ status: "active", today_cap: 20 });
    expect(await (await browser.get(`/dashboard/domains/${domain.id}`)).text()).toContain("Today: 0 of 20 recipients");
    expect((await browser.post(`/dashboard/domains/${domain.id}/warmup`, { enabled: "false" })).status).toBe(303);
    expect(await (await browser.get(`/dashboard/domains/${domain.id}`)).text()).toContain("Resume warm-up");

    const testKey = await createKey(account.api_key, { name: "sandbox", mode: "test" });
    const sandbox = await signIn(testKey.key);
    expect((await sandbox.post(`/dashboard/domains/${domain.id}/warmup`, { enabled: "true" })).status).toBe(403);
    const after = await json<{ warmup: { status: string } }>(await call(`/api/v1/domains/${domain.id}`, { key: account.api_key }));
    expect(after.warmup.status).toBe("paused");
  });

  it("creates a draft campaign with a list audience, counts the audience and previews it filled in for a contact", async () => {
    const account = await createAccount({ features: ["email_api", "smtp_relay", "campaigns"] });
    const list = await json<{ id: string }>(await call("/api/v1/lists", { key: account.api_key, body: { name: "Readers" } }));
    await call(`/api/v1/lists/${list.id}/contacts`, { key: account.api_key, body: { emails: ["a@example.com", "b@example.com"] } });
    const browser = await signIn(account.api_key);
    const created = await browser.post("/dashboard/campaigns", {
      name: "November news",
      subject: "News",
      html: "<p>Hello {{first_name}}</p>",
      lists: list.id,
    });
    expect(created.status).toBe(303);
    const location = created.headers.get("Location")!;
    const page = await browser.get(location);
    const html = await page.text();
    expect(html).toMatch(/Audience: <strong>2<\/strong>/);
    const frame = /<iframe class="preview" title="Preview" sandbox="" src="([^"]+)"/.exec(html)?.[1]?.replace(/&amp;/g, "&");
    expect(frame).toMatch(new RegExp(`^${location}/preview\\?contact=con_`));
    const preview = await browser.get(frame!);
    expect(preview.headers.get("Content-Security-Policy")).toMatch(/^sandbox;/);
    const body = await preview.text();
    // Placeholders filled for the contact (who has no first name), and the unsubscribe footer a send adds.
    expect(body).toContain("<p>Hello </p>");
    expect(body).not.toContain("{{");
    expect(body).toMatch(/<a href="http[^"]+\/u\/[^"]+"[^>]*>Unsubscribe<\/a>/);
  });

  it("counts a segment-only draft's audience and previews it for a contact of that segment, not the newest contact", async () => {
    const account = await createAccount({ features: ["email_api", "smtp_relay", "campaigns"] });
    const key = account.api_key;
    await call("/api/v1/contacts", { key, body: { email: "pro@example.com", first_name: "Pia", custom_fields: { plan: "pro" } } });
    await call("/api/v1/contacts", { key, body: { email: "newest@example.com", first_name: "Ned", custom_fields: { plan: "free" } } });
    const segment = await json<{ id: string }>(
      await call("/api/v1/segments", {
        key,
        body: { name: "Pro", match: "all", conditions: [{ field: "custom_fields.plan", op: "eq", value: "pro" }] },
      }),
    );
    const draft = await json<{ id: string }>(
      await call("/api/v1/campaigns", {
        key,
        body: { name: "Pro news", subject: "Hi", html: "<p>Hello {{first_name}}</p>", segments: [segment.id] },
      }),
    );
    const browser = await signIn(key);
    const html = await (await browser.get(`/dashboard/campaigns/${draft.id}`)).text();
    expect(html).toMatch(/data-testid="audience">\s*Audience: <strong>1<\/strong>/);
    expect(html).toMatch(/data-testid="preview-contact">\s*As pro@example.com will see it\s*\(Pia\)/);
    const preview = await browser.get(`/dashboard/campaigns/${draft.id}/preview`);
    expect(await preview.text()).toContain("<p>Hello Pia</p>");
  });

  it("shows before the send how many addresses a verifying campaign checks and what that costs, and a contact's last result", async () => {
    const account = await createAccount({ verify_credits: 9, features: ["email_api", "campaigns"] });
    const key = account.api_key;
    const list = await json<{ id: string }>(await call("/api/v1/lists", { key, body: { name: "News" } }));
    const t = crypto.randomUUID().slice(0, 8);
    for (const name of ["alice", "bob", "zed"])
      await call("/api/v1/contacts", { key, body: { email: `${name}-${t}@mailbox.test`, lists: [list.id] } });
    // a single check writes its result onto the contact with that address, so the campaign reuses it
    expect((await call("/api/v1/verify", { key, body: { email: `alice-${t}@mailbox.test` } })).status).toBe(200);
    const draft = await json<{ id: string }>(
      await call("/api/v1/campaigns", { key, body: { name: "Clean", subject: "Hi", text: "Hello", lists: [list.id], verification: "valid_only" } }),
    );
    const browser = await signIn(key);
    const html = await (await browser.get(`/dashboard/campaigns/${draft.id}`)).text();
    expect(html).toMatch(
      /data-testid="verification-estimate">Verification first: <strong>2<\/strong> addresses to check, costing <strong>2<\/strong> verification credits \(8\s*available\); 1 checked recently are reused free/,
    );
    const contacts = await json<{ data: { id: string }[] }>(await call(`/api/v1/contacts?email=alice-${t}@mailbox.test`, { key }));
    const contactPage = await (await browser.get(`/dashboard/contacts/${contacts.data[0]!.id}`)).text();
    expect(contactPage).toMatch(/data-testid="verification"><dt>Result<\/dt><dd>valid \(valid/);
  });

  it("shows a segment's page with the count and the contacts GET /segments/{id}/count gives", async () => {
    const account = await createAccount({ features: ["email_api", "campaigns"] });
    const key = account.api_key;
    for (const [email, plan] of [
      ["pro1@example.com", "pro"],
      ["pro2@example.com", "pro"],
      ["free@example.com", "free"],
    ] as const)
      await call("/api/v1/contacts", { key, body: { email, first_name: email.slice(0, 4), custom_fields: { plan } } });
    const segment = await json<{ id: string }>(
      await call("/api/v1/segments", {
        key,
        body: { name: "Pro", match: "all", conditions: [{ field: "custom_fields.plan", op: "eq", value: "pro" }] },
      }),
    );
    const api = await json<{ count: number }>(await call(`/api/v1/segments/${segment.id}/count`, { key }));
    expect(api.count).toBe(2);
    const browser = await signIn(key);
    const page = await browser.get(`/dashboard/segments/${segment.id}`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toMatch(/data-testid="segment-total"><strong>2<\/strong> subscribed contacts match/);
    const listed = [...html.matchAll(/<a href="\/dashboard\/contacts\/con_[^"]+">([^<]+)<\/a>/g)].map((match) => match[1]).sort();
    expect(listed).toEqual(["pro1@example.com", "pro2@example.com"]);
    expect((await browser.get("/dashboard/segments/seg_missing")).status).toBe(404);
  });

  it("verifies a CSV upload as a bulk job and shows its progress and results", async () => {
    const account = await createAccount();
    const browser = await signIn(account.api_key);
    const body = new FormData();
    body.set("_csrf", browser.csrf);
    body.set("file", new File(["email,name\nann@example.com,Ann\nnot-an-address,Bob\n"], "list.csv", { type: "text/csv" }));
    const upload = await visit("/dashboard/verification/upload", { method: "POST", headers: { Cookie: cookieHeader(browser.jar) }, body });
    expect(upload.status).toBe(303);
    const jobPath = upload.headers.get("Location")!;
    let progress = "";
    for (let attempt = 0; attempt < 50 && !progress.includes("100%"); attempt++) {
      progress = await (await browser.get(`${jobPath}/progress`, { "HX-Request": "true" })).text();
      if (!progress.includes("100%")) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(progress).toContain("100% (2 of 2)");
    expect(progress).toContain("Download results");
    const csv = await (await browser.get(`${jobPath}/results.csv`)).text();
    expect(csv.split("\r\n")[0]).toMatch(/^position,email,/);
    expect(csv).toContain("ann@example.com");
  });
});

describe("dashboard uploads", () => {
  it("accepts a CSV over the 1 MB default body limit and refuses one over 5 MB", async () => {
    const account = await createAccount();
    const browser = await signIn(account.api_key);
    const upload = (bytes: number) => {
      const note = "x".repeat(Math.ceil(bytes / 20));
      const rows = Array.from({ length: 20 }, (_, index) => `person${index}@example.com,${note}`);
      const body = new FormData();
      body.set("_csrf", browser.csrf);
      body.set("file", new File([`email,note\n${rows.join("\n")}\n`], "big.csv", { type: "text/csv" }));
      return visit("/dashboard/verification/upload", { method: "POST", headers: { Cookie: cookieHeader(browser.jar) }, body });
    };
    expect((await upload(2 * 1024 * 1024)).status).toBe(303);
    expect((await upload(5.5 * 1024 * 1024)).status).toBe(413);
  });

  it("answers a form over the request size cap with a dashboard page, not the API's JSON", async () => {
    const account = await createAccount();
    const browser = await signIn(account.api_key);
    const post = (path: string, field: string, content: string) => {
      const body = new FormData();
      body.set("_csrf", browser.csrf);
      body.set(field, new File([content], "big.csv", { type: "text/csv" }));
      return visit(path, { method: "POST", headers: { Cookie: cookieHeader(browser.jar) }, body });
    };
    const sevenMegabytes = `email,note\nann@example.com,${"x".repeat(7 * 1024 * 1024)}\n`;

    for (const path of ["/dashboard/contacts/imports", "/dashboard/verification/upload"]) {
      const refused = await post(path, "file", sevenMegabytes);
      expect(refused.status).toBe(413);
      expect(refused.headers.get("Content-Type")).toMatch(/^text\/html/);
      const page = await refused.text();
      expect(page).toContain("The file is larger than 5 MB");
      expect(page).toContain('href="/dashboard"');
    }
    // A form without a file has the 1 MB cap of everything else.
    const list = await post("/dashboard/contacts/lists", "name", "x".repeat(2 * 1024 * 1024));
    expect(list.status).toBe(413);
    expect(list.headers.get("Content-Type")).toMatch(/^text\/html/);
    expect(await list.text()).toContain("The form is larger than 1 MB");
  });

  it("pages 25 contacts at a time: the older link keeps the filters, and the last page has none", async () => {
    const account = await createAccount();
    const key = account.api_key;
    for (let index = 0; index < 26; index++) await call("/api/v1/contacts", { key, body: { email: `reader${index}@example.com` } });
    await call("/api/v1/contacts", { key, body: { email: "gone@example.com", status: "unsubscribed" } });
    const browser = await signIn(key);
    const rowsOf = (html: string) => [...html.matchAll(/<a href="\/dashboard\/contacts\/con_[^"]+">([^<]+)<\/a>/g)].map((match) => match[1]);

    const first = await (await browser.get("/dashboard/contacts?status=subscribed&search=")).text();
    expect(rowsOf(first)).toHaveLength(25);
    const older = /<a href="([^"]+)">Older →<\/a>/.exec(first)?.[1]?.replace(/&amp;/g, "&");
    expect(older).toMatch(/^\/dashboard\/contacts\?status=subscribed&cursor=[\w-]+$/);
    const second = await (await browser.get(older!)).text();
    expect(rowsOf(second)).toHaveLength(1);
    expect(new Set([...rowsOf(first), ...rowsOf(second)])).toEqual(new Set(Array.from({ length: 26 }, (_, index) => `reader${index}@example.com`)));
    expect(second).not.toContain("Older →");
  });
});

describe("dashboard SMTP credentials", () => {
  it("shows a new credential's password once and revokes it", async () => {
    const account = await createAccount();
    const browser = await signIn(account.api_key);
    const created = await browser.post("/dashboard/smtp-credentials", { name: "WordPress" });
    expect(created.status).toBe(201);
    const html = await created.text();
    const password = /data-testid="new-secret">Password <span class="copyable"><code>([0-9A-Za-z]+)<\/code>/.exec(html)?.[1];
    expect(password).toMatch(/^[0-9A-Za-z]{40}$/);
    const id = /action="\/dashboard\/smtp-credentials\/(smtp_[^/"]+)\/revoke"/.exec(html)![1]!;
    const listed = await (await browser.get("/dashboard/smtp-credentials")).text();
    expect(listed).not.toContain(password!);
    // The password shown is the one the SMTP relay accepts for the username listed, until the credential is revoked.
    const username = (await env.DB.prepare("SELECT username FROM smtp_credentials WHERE id = ?1").bind(id).first<{ username: string }>())!.username;
    expect(listed).toContain(username);
    const ignore = () => undefined;
    expect(await authenticateSmtpCredential(sharedDb(env), username, password!, ignore)).toMatchObject({ credentialId: id });
    expect((await browser.post(`/dashboard/smtp-credentials/${id}/revoke`, {})).status).toBe(303);
    expect(await (await browser.get("/dashboard/smtp-credentials")).text()).toContain("No SMTP credentials yet");
    expect(await authenticateSmtpCredential(sharedDb(env), username, password!, ignore)).toBeUndefined();
  });
});

describe("dashboard webhooks", () => {
  it("shows the secret once, sends a test event and replays a real delivery as a new attempt", async () => {
    const account = await createAccount();
    const browser = await signIn(account.api_key);
    const path = receiverPath();
    const created = await browser.post("/dashboard/webhooks", { url: receiverUrl(path), events: "verification.completed" });
    expect(created.status).toBe(200);
    const html = await created.text();
    expect(html).toMatch(/whsec_[A-Za-z0-9+/=]{20,}/);
    const endpointPath =
      /href="(\/dashboard\/webhooks\/wh_[^"/]+)\/?"/.exec(html)?.[1] ?? /action="(\/dashboard\/webhooks\/wh_[^/"]+)\/test"/.exec(html)![1]!;
    expect(await (await browser.get(endpointPath)).text()).not.toMatch(/whsec_[A-Za-z0-9+/=]{20,}/);

    const test = await browser.post(`${endpointPath}/test`, {}, { headers: { "HX-Request": "true" } });
    expect(await test.text()).toContain("Test event delivered: 200");

    // A real event: a single check that emits verification.completed, delivered through the queue.
    await call("/api/v1/verify", { key: account.api_key, body: { email: "ann@example.com", emit_event: true } });
    const [first] = await waitForRequests(path, 2);
    expect(first).toBeDefined();
    let eventId = "";
    for (let attempt = 0; attempt < 50 && !eventId; attempt++) {
      const page = await (await browser.get(endpointPath)).text();
      eventId = /\/events\/(evt_[0-9A-Za-z]+)\/replay/.exec(page)?.[1] ?? "";
      if (!eventId) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(eventId).not.toBe("");
    const replay = await browser.post(`${endpointPath}/events/${eventId}/replay`, {}, { headers: { "HX-Request": "true" } });
    expect(await replay.text()).toContain("Replay delivered: 200");
    const received = await waitForRequests(path, 3);
    expect(received.filter((request) => request.body.includes(eventId))).toHaveLength(2);
    const log = await json<{ data: { event_id: string; attempt: number }[] }>(
      await call(`${endpointPath.replace("/dashboard", "/api/v1")}/deliveries?event_id=${eventId}`, { key: account.api_key }),
    );
    expect(log.data.map((delivery) => delivery.attempt).sort()).toEqual([1, 2]);

    // Test events are not stored: there is nothing to replay.
    expect((await browser.post(`${endpointPath}/events/evt_not_stored/replay`, {})).status).toBe(404);

    // Nor is an event of a type the endpoint does not receive sent to it by a replay.
    const other = await browser.post("/dashboard/webhooks", { url: receiverUrl(receiverPath()), events: "relay.sent" });
    const otherPath = /action="(\/dashboard\/webhooks\/wh_[^/"]+)\/test"/.exec(await other.text())![1]!;
    expect((await browser.post(`${otherPath}/events/${eventId}/replay`, {})).status).toBe(404);
  });

  it("offers email.received only to a key with the inbound scope, and refuses it (or all events) to others", async () => {
    const account = await createAccount();
    const hooks = await createKey(account.api_key, { name: "hooks", scopes: ["webhooks"] });
    const browser = await signIn(hooks.key);
    const form = await (await browser.get("/dashboard/webhooks")).text();
    expect(form).toContain('value="relay.sent"');
    expect(form).not.toContain('value="email.received"');
    for (const fields of [{ events: "email.received" }, {}] as Record<string, string>[]) {
      const refused = await browser.post("/dashboard/webhooks", { url: receiverUrl(receiverPath()), ...fields });
      expect(refused.status).toBe(403);
      expect(await refused.text()).toContain("inbound");
    }
    expect((await json<{ data: unknown[] }>(await call("/api/v1/webhooks", { key: account.api_key }))).data).toEqual([]);

    const reader = await signIn((await createKey(account.api_key, { name: "inbox", scopes: ["webhooks", "inbound"] })).key);
    expect(await (await reader.get("/dashboard/webhooks")).text()).toContain('value="email.received"');
    expect((await reader.post("/dashboard/webhooks", { url: receiverUrl(receiverPath()), events: "email.received" })).status).toBe(200);
  });
});
