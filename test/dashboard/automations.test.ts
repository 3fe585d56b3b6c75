// The dashboard's automation builder: steps built and edited through its forms are what the API then returns, its
// refusals are the API's (side by side, the same 422 messages, shown beside the fields they name), pause and resume
// are what triggers obey, and each contact's run can be followed.
import { describe, expect, it } from "vitest";
import { call, createAccount, createKey, json } from "../support/helpers";
import { verifiedDomain } from "../support/sending";
import { cookieHeader, signIn, visit, type Browser } from "../support/dashboard";

type Automation = { id: string; name: string; status: string; steps: Record<string, unknown>[] };

async function setup() {
  const account = await createAccount({ send_credits: 100, features: ["email_api", "automations", "campaigns"] });
  const key = account.api_key;
  const domain = await verifiedDomain(key);
  const sender = await json<{ id: string }>(await call("/api/v1/senders", { key, body: { name: "Acme", email: `hello@${domain.name}` } }));
  const list = await json<{ id: string }>(await call("/api/v1/lists", { key, body: { name: "Onboarded" } }));
  const template = await json<{ id: string }>(
    await call("/api/v1/templates", { key, body: { name: "Welcome", subject: "Welcome, {{first_name|there}}", html: "<p>Hi {{first_name}}</p>" } }),
  );
  return { key, sender: sender.id, list: list.id, template: template.id };
}

const decode = (html: string) =>
  html
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");

/** The page's top notice, as text. */
const noticeOf = (html: string) => decode(/<div class="notice error" role="alert">([\s\S]*?)<\/div>/.exec(html)?.[1] ?? "");
/** The message shown under the form field `name`. */
const besideField = (html: string, name: string) =>
  decode(new RegExp(`<span class="field-error" id="error-${name}" role="alert">([^<]*)</span>`).exec(html)?.[1] ?? "");

async function automationsOf(key: string): Promise<Automation[]> {
  return (await json<{ data: Automation[] }>(await call("/api/v1/automations", { key }))).data;
}

async function created(browser: Browser, form: Record<string, string>): Promise<string> {
  const response = await browser.post("/dashboard/automations", form);
  expect(response.status, await response.clone().text()).toBe(303);
  return response.headers.get("Location")!.split("/").pop()!;
}

describe("the dashboard's automation builder", { timeout: 60_000 }, () => {
  it("builds a template email, a wait and a list step that the API then returns as saved, and edits and removes a step", async () => {
    const { key, sender, list, template } = await setup();
    const browser = await signIn(key);
    const form = await (await browser.get("/dashboard/automations/new?type=send_email&name=Onboarding")).text();
    expect(form).toContain('value="Onboarding"');
    expect(form).toContain(`<option value="${template}">Welcome</option>`);
    const id = await created(browser, {
      type: "send_email",
      name: "Onboarding",
      status: "active",
      sender_id: sender,
      template_id: template,
      subject: "",
      html: "",
      text: "",
    });
    expect((await browser.post(`/dashboard/automations/${id}/steps`, { type: "wait", amount: "2", unit: "days", until: "" })).status).toBe(303);
    expect((await browser.post(`/dashboard/automations/${id}/steps`, { type: "add_to_list", list_id: list })).status).toBe(303);
    const saved = await json<Automation>(await call(`/api/v1/automations/${id}`, { key }));
    expect(saved).toMatchObject({ name: "Onboarding", status: "active" });
    expect(saved.steps).toEqual([
      { type: "send_email", sender_id: sender, template_id: template },
      { type: "wait", seconds: 2 * 86_400 },
      { type: "add_to_list", list_id: list },
    ]);
    const page = decode(await (await browser.get(`/dashboard/automations/${id}`)).text());
    expect(page).toContain("Send the template “Welcome” from Acme");
    expect(page).toContain("Wait 2 days");
    expect(page).toContain("Add to the list “Onboarded”");

    const until = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 16);
    expect((await browser.post(`/dashboard/automations/${id}/steps/1`, { type: "wait", amount: "", unit: "days", until })).status).toBe(303);
    expect((await browser.post(`/dashboard/automations/${id}/steps/2/delete`, {})).status).toBe(303);
    const edited = await json<Automation>(await call(`/api/v1/automations/${id}`, { key }));
    expect(edited.steps).toEqual([
      { type: "send_email", sender_id: sender, template_id: template },
      { type: "wait", until: `${until}:00Z` },
    ]);
  });

  it("an email step says whether it is marketing (with its topic) or transactional, as the API saves it", async () => {
    const { key, sender, template } = await setup();
    const topic = await json<{ id: string }>(await call("/api/v1/topics", { key, body: { name: "Tips" } }));
    const browser = await signIn(key);
    const form = await (await browser.get("/dashboard/automations/new?type=send_email&name=Orders")).text();
    expect(form).toContain(`<option value="${topic.id}">Tips</option>`);
    expect(form).toContain('<option value="transactional">');
    const base = { type: "send_email", sender_id: sender, template_id: template, subject: "", html: "", text: "" };
    const id = await created(browser, { ...base, name: "Orders", status: "active", stream: "transactional", topic_id: "" });
    expect((await browser.post(`/dashboard/automations/${id}/steps`, { ...base, stream: "broadcast", topic_id: topic.id })).status).toBe(303);
    const saved = await json<Automation>(await call(`/api/v1/automations/${id}`, { key }));
    expect(saved.steps).toEqual([
      { type: "send_email", sender_id: sender, template_id: template, stream: "transactional" },
      { type: "send_email", sender_id: sender, template_id: template, stream: "broadcast", topic_id: topic.id },
    ]);
    const page = decode(await (await browser.get(`/dashboard/automations/${id}`)).text());
    expect(page).toContain("Send the template “Welcome” from Acme");
    expect(page).toContain("(transactional)");
    expect(page).toContain("(topic Tips)");
    // A topic is for marketing: the API's refusal, shown beside the field.
    const refused = await browser.post(`/dashboard/automations/${id}/steps`, { ...base, stream: "transactional", topic_id: topic.id });
    expect(refused.status).toBe(422);
    expect(besideField(await refused.text(), "topic_id")).toContain("Topics are for broadcast mail");
  });

  it("update-contact, condition and webhook steps are saved as the API takes them", async () => {
    const { key, sender } = await setup();
    const browser = await signIn(key);
    const id = await created(browser, {
      type: "update_contact",
      name: "Tagging",
      first_name: "",
      company: "Acme",
      custom_fields: "plan=pro\nsource = form",
    });
    const condition = new URLSearchParams([
      ["_csrf", browser.csrf],
      ["type", "condition"],
      ["match", "any"],
      ["field", "custom_fields.plan"],
      ["op", "eq"],
      ["value", "pro"],
      ["field", ""],
      ["op", "eq"],
      ["value", ""],
    ]);
    const response = await visit(`/dashboard/automations/${id}/steps`, {
      method: "POST",
      headers: { Cookie: cookieHeader(browser.jar), "Content-Type": "application/x-www-form-urlencoded" },
      body: condition.toString(),
    });
    expect(response.status).toBe(303);
    expect((await browser.post(`/dashboard/automations/${id}/steps`, { type: "webhook", url: "https://example.com/hooks/tagged" })).status).toBe(303);
    expect(
      (
        await browser.post(`/dashboard/automations/${id}/steps`, {
          type: "send_email",
          sender_id: sender,
          template_id: "",
          subject: "Hi {{first_name}}",
          html: "",
          text: "Hello",
        })
      ).status,
    ).toBe(303);
    expect((await json<Automation>(await call(`/api/v1/automations/${id}`, { key }))).steps).toEqual([
      { type: "update_contact", fields: { company: "Acme" }, custom_fields: { plan: "pro", source: "form" } },
      { type: "condition", match: "any", conditions: [{ field: "custom_fields.plan", op: "eq", value: "pro" }] },
      { type: "webhook", url: "https://example.com/hooks/tagged" },
      { type: "send_email", sender_id: sender, subject: "Hi {{first_name}}", text: "Hello" },
    ]);
  });

  it("the condition step offers the segment builder's rows: the same operators, in the same words, shown back as saved", async () => {
    const { key } = await setup();
    const browser = await signIn(key);
    const operators = (html: string) => /<select name="op" aria-label="Condition 1 operator">([\s\S]*?)<\/select>/.exec(html)?.[1];
    const blank = await (await browser.get("/dashboard/automations/new?type=condition&name=Pro")).text();
    expect(operators(blank)).toContain('<option value="in">is one of</option>');
    expect(operators(blank)).toBe(operators(await (await browser.get("/dashboard/segments")).text()));

    const id = await created(browser, { type: "condition", name: "Pro", match: "any", field: "custom_fields.plan", op: "in", value: "pro, team" });
    const saved = await (await browser.get(`/dashboard/automations/${id}/steps/0`)).text();
    expect(operators(saved)).toContain('<option value="in" selected="">is one of</option>');
    expect(saved).toContain('<option value="any" selected="">any condition</option>');
    expect(saved).toContain('value="pro, team" aria-label="Condition 1 value"');
  });

  it("a sender of another account: 422 from both with the same message, shown beside the sender field, and nothing saved", async () => {
    const { key, template } = await setup();
    const other = await setup();
    const step = { type: "send_email", sender_id: other.sender, template_id: template };
    const api = await call("/api/v1/automations", { key, body: { name: "Stolen", steps: [step] } });
    expect(api.status).toBe(422);
    const apiErrors = (await json<{ errors: Record<string, string[]> }>(api)).errors;
    expect(Object.keys(apiErrors)).toEqual(["steps.0.sender_id"]);
    const browser = await signIn(key);
    const page = await browser.post("/dashboard/automations", { name: "Stolen", status: "active", ...step, subject: "", html: "", text: "" });
    expect(page.status).toBe(422);
    const html = await page.text();
    expect(besideField(html, "sender_id")).toBe(apiErrors["steps.0.sender_id"]!.join(". "));
    expect(noticeOf(html)).toContain(`steps.0.sender_id: ${apiErrors["steps.0.sender_id"]![0]}`);
    expect(html).toContain('value="Stolen"');
    expect(await automationsOf(key)).toHaveLength(0);
  });

  it("steps the API refuses in a PATCH are refused by the step forms with the same messages, and the steps stay", async () => {
    const { key, sender, list } = await setup();
    const other = await setup();
    const automation = await json<Automation>(
      await call("/api/v1/automations", { key, body: { name: "Lists", steps: [{ type: "add_to_list", list_id: list }] } }),
    );
    const browser = await signIn(key);
    const cases: { api: Record<string, unknown>; form: Record<string, string>; beside?: string }[] = [
      {
        api: { type: "send_email", sender_id: sender },
        form: { type: "send_email", sender_id: sender, template_id: "", subject: "", html: "", text: "" },
      },
      { api: { type: "wait" }, form: { type: "wait", amount: "", unit: "days", until: "" } },
      { api: { type: "remove_from_list", list_id: other.list }, form: { type: "remove_from_list", list_id: other.list }, beside: "list_id" },
      { api: { type: "webhook", url: "not a url" }, form: { type: "webhook", url: "not a url" }, beside: "url" },
      { api: { type: "wait", seconds: 400 * 86_400 }, form: { type: "wait", amount: "400", unit: "days", until: "" }, beside: "seconds" },
    ];
    for (const { api: step, form, beside } of cases) {
      const api = await call(`/api/v1/automations/${automation.id}`, {
        key,
        method: "PATCH",
        body: { steps: [{ type: "add_to_list", list_id: list }, step] },
      });
      expect(api.status).toBe(422);
      const apiErrors = (await json<{ errors: Record<string, string[]> }>(api)).errors;
      const page = await browser.post(`/dashboard/automations/${automation.id}/steps`, form);
      expect(page.status).toBe(422);
      const html = await page.text();
      for (const [path, messages] of Object.entries(apiErrors)) expect(noticeOf(html)).toContain(`${path}: ${messages.join(", ")}`);
      if (beside) expect(besideField(html, beside)).toBe(apiErrors[`steps.1.${beside}`]!.join(". "));
    }
    expect((await json<Automation>(await call(`/api/v1/automations/${automation.id}`, { key }))).steps).toEqual([
      { type: "add_to_list", list_id: list },
    ]);
  });

  it("pause and resume: a paused automation refuses triggers as the API says, a resumed one runs, and each contact's run shows", async () => {
    const { key, list } = await setup();
    const browser = await signIn(key);
    const id = await created(browser, { type: "wait", name: "Drip", amount: "1", unit: "days", until: "" });
    expect((await browser.post(`/dashboard/automations/${id}/steps`, { type: "add_to_list", list_id: list })).status).toBe(303);
    expect((await browser.post(`/dashboard/automations/${id}/status`, { status: "paused" })).status).toBe(303);
    expect(await (await browser.get(`/dashboard/automations/${id}`)).text()).toContain(">Resume</button>");
    const refused = await call(`/api/v1/automations/${id}/trigger`, { key, body: { email: "ann@example.com" } });
    expect(refused.status).toBe(409);
    expect((await json<{ code: string }>(refused)).code).toBe("automation_paused");
    expect((await browser.post(`/dashboard/automations/${id}/status`, { status: "stopped" })).status).toBe(422);
    expect((await browser.post(`/dashboard/automations/${id}/status`, { status: "active" })).status).toBe(303);
    const triggered = await call(`/api/v1/automations/${id}/trigger`, { key, body: { email: "ann@example.com", first_name: "Ann" } });
    expect(triggered.status).toBe(202);
    const { run_id } = await json<{ run_id: string }>(triggered);
    const page = await (await browser.get(`/dashboard/automations/${id}`)).text();
    expect(page).toContain(`<a href="/dashboard/automations/runs/${run_id}">ann@example.com</a>`);
    const run = decode(await (await browser.get(`/dashboard/automations/runs/${run_id}`)).text());
    expect(run).toContain("Run for ann@example.com");
    expect(run).toContain("1. Wait 1 day");
    expect(run).toContain("2. Add to the list “Onboarded”");
    expect((await browser.get("/dashboard/automations/runs/run_nosuchrun")).status).toBe(404);
  });

  it("a test key cannot create or change an automation through either, and another account's automation is not found", async () => {
    const { key, list } = await setup();
    const automation = await json<Automation>(
      await call("/api/v1/automations", { key, body: { name: "Lists", steps: [{ type: "add_to_list", list_id: list }] } }),
    );
    const testKey = await createKey(key, { name: "sandbox", mode: "test" });
    const api = await call(`/api/v1/automations/${automation.id}`, { key: testKey.key, method: "PATCH", body: { status: "paused" } });
    expect(api.status).toBe(403);
    const apiBody = await json<{ message: string }>(api);
    const browser = await signIn(testKey.key);
    const page = await browser.post(`/dashboard/automations/${automation.id}/status`, { status: "paused" });
    expect(page.status).toBe(403);
    expect(noticeOf(await page.text())).toBe(apiBody.message);
    expect((await browser.post("/dashboard/automations", { type: "add_to_list", name: "X", list_id: list })).status).toBe(403);
    expect((await json<Automation>(await call(`/api/v1/automations/${automation.id}`, { key }))).status).toBe("active");
    const stranger = await signIn((await setup()).key);
    expect((await stranger.get(`/dashboard/automations/${automation.id}`)).status).toBe(404);
    expect((await stranger.post(`/dashboard/automations/${automation.id}/steps/0/delete`, {})).status).toBe(404);
  });
});
