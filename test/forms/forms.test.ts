import { env, exports } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import { config } from "../../src/config";
import { databaseTag } from "../../src/db/client";
import { SIGN_UPS_PER_ADDRESS_PER_HOUR, SIGN_UPS_PER_IP_PER_MINUTE } from "../../src/api/subscribe";
import { confirmationToken } from "../../src/domain/forms/signup";
import { audienceOf, campaignAccount, campaignMessages, tag, waitForStatus, type Campaign } from "../support/campaigns";
import { clientAddress } from "../support/dashboard";
import { call, createAccount, createKey, json } from "../support/helpers";
import { eventually, sinkMessagesTo, sinkRaw, verifiedDomain } from "../support/sending";

// Sign-up forms (docs/forms.md) through the real Worker: the public endpoint, the confirmation email through the send
// queue to the dev SMTP sink, its link, and campaigns to the form's list before and after.

type Form = {
  id: string;
  name: string;
  lists: string[];
  topics: string[];
  double_opt_in: boolean;
  sender_id: string | null;
  redirect_url: string | null;
  fields: string[];
  subscribe_url: string;
  html_snippet: string;
};
type Contact = {
  id: string;
  email: string;
  first_name: string | null;
  status: string;
  lists: string[];
  topics: Record<string, boolean>;
  consent: { form_id: string; at: string; ip: string | null } | null;
};
type ErrorBody = { message: string; code: string; errors?: Record<string, string[]> };

const rcpt = (label: string) => `${label}-${tag()}@example.net`;

async function createForm(key: string, body: Record<string, unknown>): Promise<Form> {
  const response = await call("/api/v1/forms", { key, body: { name: `Footer ${tag()}`, ...body } });
  expect(response.status, await response.clone().text()).toBe(201);
  return json<Form>(response);
}

/** A sign-up as a website sends it: a browser's form post (URL-encoded, Accept: text/html) or fetch() with JSON. */
function signUp(
  formId: string,
  fields: Record<string, string>,
  options: { as?: "browser" | "json"; ip?: string; headers?: Record<string, string> } = {},
): Promise<Response> {
  const browser = options.as !== "json";
  return exports.default.fetch(
    new Request(`http://localhost/subscribe/${formId}`, {
      method: "POST",
      headers: {
        "Content-Type": browser ? "application/x-www-form-urlencoded" : "application/json",
        Accept: browser ? "text/html,application/xhtml+xml" : "application/json",
        "CF-Connecting-IP": options.ip ?? clientAddress(),
        ...options.headers,
      },
      body: browser ? new URLSearchParams(fields).toString() : JSON.stringify(fields),
      redirect: "manual",
    }),
  );
}

const confirmLink = (path: string, method: "GET" | "POST", ip = clientAddress()) =>
  exports.default.fetch(new Request(`http://localhost${path}`, { method, headers: { "CF-Connecting-IP": ip } }));

async function contactOf(key: string, email: string): Promise<Contact | undefined> {
  const page = await json<{ data: Contact[] }>(await call(`/api/v1/contacts?email=${encodeURIComponent(email)}`, { key }));
  return page.data[0];
}

/** The confirmation email an address got, parsed, and the path of its link. */
async function confirmationMail(address: string) {
  const [mail] = await eventually(async () => {
    const found = await sinkMessagesTo(address);
    return found.length > 0 ? found : undefined;
  });
  const parsed = await PostalMime.parse(await sinkRaw(mail!.id));
  const path = /\/subscribe\/confirm\/[A-Za-z0-9_-]+\.[0-9a-f]+/.exec(parsed.text ?? "")?.[0];
  return { parsed, path };
}

async function campaignTo(key: string, sender: string, list: string): Promise<Campaign> {
  const created = await call("/api/v1/campaigns", {
    key,
    body: { name: `news ${tag()}`, sender_id: sender, subject: "News", text: "Hello", lists: [list] },
  });
  expect(created.status).toBe(201);
  const draft = await json<Campaign>(created);
  expect((await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: {} })).status).toBe(202);
  return waitForStatus(key, draft.id, "sent");
}

describe("forms: the resource", () => {
  it("creates, reads, lists, changes and deletes a form, with its public address and an HTML snippet", async () => {
    const { key, sender } = await campaignAccount();
    const { list } = await audienceOf(key, 0);
    const form = await createForm(key, { lists: [list], sender_id: sender, redirect_url: "https://acme.example/thanks", fields: ["first_name"] });
    expect(form).toMatchObject({ id: expect.stringMatching(/^frm_/), double_opt_in: true, lists: [list], topics: [], fields: ["first_name"] });
    expect(new URL(form.subscribe_url).pathname).toBe(`/subscribe/${form.id}`);
    expect(form.html_snippet).toContain(`<form action="${form.subscribe_url}" method="post">`);
    expect(form.html_snippet).toContain('name="email"');
    expect(form.html_snippet).toContain('name="first_name"');
    expect(form.html_snippet).not.toContain('name="company"');
    expect(form.html_snippet).toMatch(/name="_honeypot" tabindex="-1"/);
    expect(form.html_snippet).not.toContain("<script");

    expect(await json(await call(`/api/v1/forms/${form.id}`, { key }))).toEqual(form);
    const listed = await json<{ data: Form[] }>(await call("/api/v1/forms", { key }));
    expect(listed.data.map((item) => item.id)).toEqual([form.id]);
    const changed = await call(`/api/v1/forms/${form.id}`, { key, method: "PATCH", body: { double_opt_in: false, sender_id: null } });
    expect(await json(changed)).toMatchObject({ double_opt_in: false, sender_id: null, lists: [list] });
    // Back to double opt-in, but without a sender to send its confirmation: the form as changed is checked whole.
    const refused = await call(`/api/v1/forms/${form.id}`, { key, method: "PATCH", body: { double_opt_in: true } });
    expect(refused.status).toBe(422);
    expect((await json<ErrorBody>(refused)).errors).toHaveProperty("sender_id");
    expect((await call(`/api/v1/forms/${form.id}`, { key, method: "DELETE" })).status).toBe(200);
    expect((await call(`/api/v1/forms/${form.id}`, { key })).status).toBe(404);
    expect((await signUp(form.id, { email: rcpt("late") }, { as: "json" })).status).toBe(404);
  });

  it("refuses bad settings with 422 naming each field, and keys without the contacts scope or in test mode", async () => {
    const { key, sender } = await campaignAccount();
    const other = await campaignAccount();
    const cases: [Record<string, unknown>, string][] = [
      [{}, "sender_id"],
      [{ sender_id: other.sender }, "sender_id"],
      [{ sender_id: sender, lists: ["lst_nope"] }, "lists.0"],
      [{ sender_id: sender, topics: ["top_nope"] }, "topics.0"],
      [{ sender_id: sender, fields: ["favourite_colour"] }, "fields.0"],
      [{ sender_id: sender, redirect_url: "javascript:alert(1)" }, "redirect_url"],
      [{ sender_id: sender, name: "" }, "name"],
      [{ sender_id: sender, surprise: true }, "body"],
    ];
    for (const [body, field] of cases) {
      const response = await call("/api/v1/forms", { key, body: { name: "Footer", ...body } });
      expect(response.status, JSON.stringify(body)).toBe(422);
      const error = await json<ErrorBody>(response);
      expect(error.code).toBe("validation_failed");
      expect(Object.keys(error.errors ?? {}), JSON.stringify(body)).toContain(field);
    }
    const sendOnly = await createKey(key, { name: "sender", scopes: ["send"] });
    expect((await call("/api/v1/forms", { key: sendOnly.key })).status).toBe(403);
    const testKey = await createKey(key, { name: "test", mode: "test" });
    const byTestKey = await call("/api/v1/forms", { key: testKey.key, body: { name: "Footer", sender_id: sender } });
    expect(byTestKey.status).toBe(403);
    expect((await json<ErrorBody>(byTestKey)).code).toBe("live_key_required");
  });
});

describe("forms: double opt-in", () => {
  it("a sign-up is pending and mailed a confirmation; once its link is followed it is subscribed, with its consent record, and campaigns reach it", async () => {
    const { key, domain, sender } = await campaignAccount();
    const { list, addresses } = await audienceOf(key, 1);
    const topic = await json<{ id: string }>(await call("/api/v1/topics", { key, body: { name: `Weekly ${tag()}`, default_subscribed: false } }));
    const form = await createForm(key, {
      lists: [list],
      topics: [topic.id],
      sender_id: sender,
      redirect_url: "https://acme.example/check-your-inbox",
      fields: ["first_name"],
    });
    const email = rcpt("nia");
    const posted = await signUp(form.id, { email, first_name: "Nia", company: "ignored", submit: "Subscribe" });
    expect(posted.status).toBe(303);
    expect(posted.headers.get("Location")).toBe("https://acme.example/check-your-inbox");

    const pending = await contactOf(key, email);
    expect(pending).toMatchObject({ status: "pending", first_name: "Nia", lists: [], consent: null, topics: { [topic.id]: false } });

    const { parsed, path } = await confirmationMail(email);
    expect(parsed.from?.address).toBe(`hello@${domain.name}`);
    expect(parsed.subject).toBe("Confirm your subscription to Acme News");
    // Transactional mail about one sign-up: no unsubscribe link.
    expect(parsed.headers.some((header) => header.key === "list-unsubscribe")).toBe(false);
    expect(path).toBeDefined();
    const sent = await json<{ data: { stream: string; credits_charged: number; tags: string[] }[] }>(
      await call(`/api/v1/messages?to=${encodeURIComponent(email)}`, { key }),
    );
    expect(sent.data).toEqual([expect.objectContaining({ stream: "transactional", credits_charged: 1, tags: ["form-confirmation"] })]);

    // Even put in the list by hand, a pending contact is left out of a campaign to it.
    expect((await call(`/api/v1/lists/${list}/contacts`, { key, body: { emails: [email] } })).status).toBeLessThan(300);
    expect((await contactOf(key, email))?.status).toBe("pending");
    const before = await campaignTo(key, sender, list);
    expect((await campaignMessages(before.id)).map((message) => message.email)).toEqual(addresses);

    // A link scanner's GET shows the page and confirms nothing.
    const page = await confirmLink(path!, "GET");
    expect(page.status).toBe(200);
    const pageHtml = await page.text();
    expect(pageHtml).toContain('<form method="post"><button type="submit">Confirm my subscription</button></form>');
    expect(pageHtml).not.toContain("<script");
    expect((await contactOf(key, email))?.status).toBe("pending");

    const confirmed = await confirmLink(path!, "POST", "203.0.113.7");
    expect(confirmed.status).toBe(200);
    expect(await confirmed.text()).toContain("is subscribed");
    const subscribed = await contactOf(key, email);
    expect(subscribed).toMatchObject({
      status: "subscribed",
      lists: [list],
      topics: { [topic.id]: true },
      consent: { form_id: form.id, at: expect.any(String), ip: "203.0.113.7" },
    });
    expect(Date.now() - Date.parse(subscribed!.consent!.at)).toBeLessThan(60_000);

    const after = await campaignTo(key, sender, list);
    expect((await campaignMessages(after.id)).map((message) => message.email).sort()).toEqual([...addresses, email].sort());

    for (const method of ["POST", "GET"] as const) {
      const again = await confirmLink(path!, method, "198.51.100.9");
      expect(again.status).toBe(200);
      expect(await again.text()).toContain("already confirmed");
    }
    expect((await contactOf(key, email))?.consent?.ip).toBe("203.0.113.7");
  });

  it("a forged or expired link says so and confirms nothing", async () => {
    const { account, key, sender } = await campaignAccount();
    const form = await createForm(key, { sender_id: sender });
    const at = { formId: form.id, tag: databaseTag(account.database) };
    const email = rcpt("late");
    expect((await signUp(form.id, { email }, { as: "json" })).status).toBe(202);
    const { path } = await confirmationMail(email);
    const [payload, signature] = path!.slice("/subscribe/confirm/".length).split(".") as [string, string];

    const forgedSignature = `/subscribe/confirm/${payload}.${signature.replace(/^./, (char) => (char === "0" ? "1" : "0"))}`;
    const otherAddress = await confirmationToken({ encryptionKey: "not-the-key" }, at, email);
    for (const forged of [forgedSignature, `/subscribe/confirm/${otherAddress}`, "/subscribe/confirm/nonsense", "/subscribe/confirm/a.b.c"]) {
      for (const method of ["GET", "POST"] as const) {
        const response = await confirmLink(forged, method);
        expect(response.status, forged).toBe(404);
        expect(await response.text()).toContain("This confirmation link is not valid");
      }
    }
    const eightDaysAgo = new Date(Date.now() - 8 * 24 * 60 * 60 * 1000);
    const expired = `/subscribe/confirm/${await confirmationToken(config(env), at, email, eightDaysAgo)}`;
    for (const method of ["GET", "POST"] as const) {
      const response = await confirmLink(expired, method);
      expect(response.status).toBe(410);
      expect(await response.text()).toContain("This confirmation link has expired");
    }
    expect(await contactOf(key, email)).toMatchObject({ status: "pending", consent: null });
  });

  it("an existing subscribed contact is not downgraded, and nothing it holds is overwritten by a sign-up", async () => {
    const { key, sender } = await campaignAccount();
    const email = rcpt("ann");
    expect((await call("/api/v1/contacts", { key, body: { email, first_name: "Ann" } })).status).toBe(201);
    const form = await createForm(key, { sender_id: sender, fields: ["first_name", "last_name"] });
    expect((await signUp(form.id, { email, first_name: "Mallory", last_name: "Smith" }, { as: "json" })).status).toBe(202);
    expect(await contactOf(key, email)).toMatchObject({ status: "subscribed", first_name: "Ann", consent: null });
    // The mailbox owner still gets the confirmation, which is what joins the form's lists.
    expect((await confirmationMail(email)).path).toBeDefined();
  });

  it("confirming brings back someone who had unsubscribed, but not an address that complained", async () => {
    const { key, sender } = await campaignAccount();
    const { list } = await audienceOf(key, 0);
    const form = await createForm(key, { sender_id: sender, lists: [list] });
    const [left, complained] = [rcpt("left"), rcpt("complained")];
    for (const [email, reason] of [
      [left, "unsubscribe"],
      [complained, "complaint"],
    ] as const) {
      expect((await call("/api/v1/contacts", { key, body: { email } })).status).toBe(201);
      const suppressed = await call("/api/v1/suppressions", { key, body: { email, reason, scope: "broadcast" } });
      expect(suppressed.status).toBe(201);
      expect((await signUp(form.id, { email }, { as: "json" })).status).toBe(202);
    }
    expect((await contactOf(key, left))?.status).toBe("unsubscribed");

    // The unsubscribe was the person's own: confirming by the mailed link is the same person asking again.
    const back = await confirmLink((await confirmationMail(left)).path!, "POST");
    expect(await back.text()).toContain("is subscribed");
    expect(await contactOf(key, left)).toMatchObject({ status: "subscribed", lists: [list], consent: { form_id: form.id } });
    const entries = await json<{ data: unknown[] }>(await call(`/api/v1/suppressions?email=${encodeURIComponent(left)}`, { key }));
    expect(entries.data).toEqual([]);

    const refused = await confirmLink((await confirmationMail(complained)).path!, "POST");
    expect(refused.status).toBe(200);
    expect(await refused.text()).toContain("cannot receive these emails");
    expect(await contactOf(key, complained)).toMatchObject({ status: "complained", lists: [], consent: null });
  });

  it("an address suppressed for all mail is not mailed, and the answer is the one anybody gets", async () => {
    const { key, sender } = await campaignAccount();
    const form = await createForm(key, { sender_id: sender });
    const suppressed = rcpt("bounced");
    const fresh = rcpt("fresh");
    expect((await call("/api/v1/suppressions", { key, body: { email: suppressed, reason: "bounce" } })).status).toBe(201);
    const answers = [];
    for (const email of [suppressed, fresh]) {
      const response = await signUp(form.id, { email }, { as: "json" });
      answers.push({ status: response.status, body: await response.json() });
    }
    expect(answers[0]).toEqual(answers[1]);
    expect(answers[0]).toEqual({
      status: 202,
      body: { status: "accepted", double_opt_in: true, message: expect.stringContaining("check your inbox") },
    });
    await confirmationMail(fresh);
    expect(await sinkMessagesTo(suppressed)).toEqual([]);
    expect(await contactOf(key, suppressed)).toBeUndefined();
    const messages = await json<{ data: unknown[] }>(await call(`/api/v1/messages?to=${encodeURIComponent(suppressed)}`, { key }));
    expect(messages.data).toEqual([]);
  });

  it("an automation skips a pending contact's email", async () => {
    const account = await createAccount({ send_credits: 100, features: ["email_api", "automations"] });
    const key = account.api_key;
    const domain = await verifiedDomain(key);
    const sender = await json<{ id: string }>(await call("/api/v1/senders", { key, body: { name: "Acme", email: `hello@${domain.name}` } }));
    const form = await createForm(key, { sender_id: sender.id });
    const email = rcpt("waiting");
    expect((await signUp(form.id, { email }, { as: "json" })).status).toBe(202);
    await confirmationMail(email);
    const automation = await json<{ id: string }>(
      await call("/api/v1/automations", {
        key,
        body: { name: "Welcome", steps: [{ type: "send_email", sender_id: sender.id, subject: "Welcome", text: "Hi" }] },
      }),
    );
    const triggered = await json<{ run_id: string }>(await call(`/api/v1/automations/${automation.id}/trigger`, { key, body: { email } }));
    const run = await eventually(async () => {
      const current = await json<{ status: string; steps: { status: string; detail: { reason?: string } }[] }>(
        await call(`/api/v1/automations/runs/${triggered.run_id}`, { key }),
      );
      return current.status === "completed" ? current : undefined;
    }, 15_000);
    expect(run.steps[0]).toMatchObject({ status: "skipped", detail: { reason: expect.stringContaining("pending") } });
    expect(await sinkMessagesTo(email)).toHaveLength(1);
  });
});

describe("forms: without double opt-in", () => {
  it("subscribes at once, records the consent with the poster's IP, answers JSON, and mails nothing", async () => {
    const { key } = await campaignAccount();
    const { list } = await audienceOf(key, 0);
    const form = await createForm(key, { double_opt_in: false, lists: [list], fields: ["first_name"] });
    const email = rcpt("quick");
    const response = await signUp(form.id, { email, first_name: "Quinn" }, { as: "json", ip: "192.0.2.44" });
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ status: "accepted", double_opt_in: false, message: "Thank you for subscribing." });
    expect(await contactOf(key, email)).toMatchObject({
      status: "subscribed",
      first_name: "Quinn",
      lists: [list],
      consent: { form_id: form.id, ip: "192.0.2.44" },
    });
    // A browser without a redirect URL gets a page.
    const browser = await signUp(form.id, { email: rcpt("page") });
    expect(browser.status).toBe(200);
    expect(await browser.text()).toContain("Thank you for subscribing.");
    expect(await sinkMessagesTo(email)).toEqual([]);
  });

  it("does not put back a contact that unsubscribed", async () => {
    const { key } = await campaignAccount();
    const { list } = await audienceOf(key, 0);
    const email = rcpt("left");
    const created = await json<Contact>(await call("/api/v1/contacts", { key, body: { email } }));
    await call(`/api/v1/contacts/${created.id}`, { key, method: "PATCH", body: { status: "unsubscribed" } });
    const form = await createForm(key, { double_opt_in: false, lists: [list] });
    expect((await signUp(form.id, { email }, { as: "json" })).status).toBe(202);
    expect(await contactOf(key, email)).toMatchObject({ status: "unsubscribed", lists: [], consent: null });
  });
});

describe("forms: the public endpoint's defences", () => {
  it("answers a bot that fills the honeypot like anybody, and keeps and sends nothing", async () => {
    const { key, sender } = await campaignAccount();
    const form = await createForm(key, { sender_id: sender, redirect_url: "https://acme.example/thanks" });
    const bot = rcpt("bot");
    const browser = await signUp(form.id, { email: bot, _honeypot: "http://spam.example" });
    expect(browser.status).toBe(303);
    expect(browser.headers.get("Location")).toBe("https://acme.example/thanks");
    const viaJson = await signUp(form.id, { email: bot, _honeypot: "x" }, { as: "json" });
    expect(viaJson.status).toBe(202);
    expect(await viaJson.json()).toMatchObject({ status: "accepted", double_opt_in: true });
    expect(await contactOf(key, bot)).toBeUndefined();
    const messages = await json<{ data: unknown[] }>(await call(`/api/v1/messages?to=${encodeURIComponent(bot)}`, { key }));
    expect(messages.data).toEqual([]);
  });

  it("limits sign-ups per IP address and per email address with 429 and Retry-After", async () => {
    const { key } = await campaignAccount();
    const form = await createForm(key, { double_opt_in: false });
    const ip = clientAddress();
    // Honeypot posts cost nothing but still count against the IP.
    for (let i = 0; i < SIGN_UPS_PER_IP_PER_MINUTE; i++) {
      expect((await signUp(form.id, { email: rcpt("flood"), _honeypot: "x" }, { as: "json", ip })).status).toBe(202);
    }
    const limited = await signUp(form.id, { email: rcpt("flood") }, { as: "json", ip });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("Retry-After"))).toBeGreaterThan(0);
    expect((await json<ErrorBody>(limited)).code).toBe("rate_limited");

    const email = rcpt("target");
    for (let i = 0; i < SIGN_UPS_PER_ADDRESS_PER_HOUR; i++) expect((await signUp(form.id, { email }, { as: "json" })).status).toBe(202);
    const again = await signUp(form.id, { email: email.toUpperCase() }, { as: "json" });
    expect(again.status).toBe(429);
    expect(Number(again.headers.get("Retry-After"))).toBeGreaterThan(0);
  });

  it("refuses bad input with 422 in the API's error shape, never a 500, and an unknown form with 404", async () => {
    const { key, sender } = await campaignAccount();
    const form = await createForm(key, { sender_id: sender, fields: ["first_name"] });
    const post = (body: string, contentType: string) =>
      exports.default.fetch(
        new Request(`http://localhost/subscribe/${form.id}`, {
          method: "POST",
          headers: { "Content-Type": contentType, "CF-Connecting-IP": clientAddress() },
          body,
        }),
      );
    const cases: [Response, string][] = [
      [await signUp(form.id, {}, { as: "json" }), "email"],
      [await signUp(form.id, { email: "not an address" }), "email"],
      [await signUp(form.id, { email: rcpt("long"), first_name: "x".repeat(257) }, { as: "json" }), "first_name"],
      [await post(JSON.stringify({ email: 42 }), "application/json"), "email"],
      [await post("{", "application/json"), "body"],
      [await post("[]", "application/json"), "body"],
      [await post("email=a@example.com", "text/plain"), "body"],
      [await post("--x\r\nnot a part", "multipart/form-data; boundary=x"), "body"],
    ];
    for (const [response, field] of cases) {
      expect(response.status, field).toBe(422);
      const error = await json<ErrorBody>(response);
      expect(error).toMatchObject({ code: "validation_failed", message: expect.any(String) });
      expect(Object.keys(error.errors ?? {})).toContain(field);
    }
    for (const id of ["frm_unknown", "x".repeat(300)]) {
      const response = await signUp(id, { email: rcpt("nobody") }, { as: "json" });
      expect(response.status).toBe(404);
      expect(await json<ErrorBody>(response)).toMatchObject({ code: "not_found" });
    }
  });

  it("allows cross-origin posts from the account's verified domains only (CORS preflight and answer)", async () => {
    const { key, domain } = await campaignAccount();
    const form = await createForm(key, { double_opt_in: false });
    const preflight = (origin: string) =>
      exports.default.fetch(
        new Request(`http://localhost/subscribe/${form.id}`, {
          method: "OPTIONS",
          headers: { Origin: origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type" },
        }),
      );
    for (const origin of [`https://${domain.name}`, `https://www.${domain.name}`, `http://shop.${domain.name}:8080`]) {
      const response = await preflight(origin);
      expect(response.status, origin).toBe(204);
      expect(response.headers.get("Access-Control-Allow-Origin"), origin).toBe(origin);
      expect(response.headers.get("Access-Control-Allow-Methods")).toContain("POST");
      expect(response.headers.get("Access-Control-Allow-Headers")?.toLowerCase()).toContain("content-type");
    }
    for (const origin of ["https://evil.example", `https://${domain.name}.evil.example`, `https://not${domain.name}`, "null"]) {
      expect((await preflight(origin)).headers.get("Access-Control-Allow-Origin"), origin).toBeNull();
    }
    const origin = `https://www.${domain.name}`;
    const ok = await signUp(form.id, { email: rcpt("cors") }, { as: "json", headers: { Origin: origin } });
    expect(ok.status).toBe(202);
    expect(ok.headers.get("Access-Control-Allow-Origin")).toBe(origin);
    const refused = await signUp(form.id, { email: "bad" }, { as: "json", headers: { Origin: origin } });
    expect(refused.status).toBe(422);
    expect(refused.headers.get("Access-Control-Allow-Origin")).toBe(origin);
  });

  it("answers 503, not 500, when the form's sender is gone, and says nothing more", async () => {
    const { key, sender } = await campaignAccount();
    const form = await createForm(key, { sender_id: sender });
    expect((await call(`/api/v1/senders/${sender}`, { key, method: "DELETE" })).status).toBe(200);
    const response = await signUp(form.id, { email: rcpt("orphan") }, { as: "json" });
    expect(response.status).toBe(503);
    expect(await json<ErrorBody>(response)).toMatchObject({ code: "upstream_unavailable" });
  });
});
