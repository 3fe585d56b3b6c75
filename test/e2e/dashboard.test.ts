// The dashboard in a real browser: Debian's chromium driven by playwright-core, against the stack `npm run dev`
// starts (wrangler dev, the DoH server, the mail sink). The test checks that no page overflows sideways at desktop and
// phone widths; with DASHBOARD_SCREENSHOTS=1 it also saves every page at both widths to test-results/screenshots/
// (git-ignored) for a person to look at. Off by default: the pictures are about a third of the file's time.
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { chromiumPath, launchChromium } from "./browser.ts";
import { eventually } from "./stack.ts";

const screenshotDir = join(process.cwd(), "test-results/screenshots");
const widths = { desktop: { width: 1280, height: 900 }, phone: { width: 390, height: 844 } };
const screenshots = Boolean(process.env.DASHBOARD_SCREENSHOTS);

if (!chromiumPath) {
  console.warn("dashboard browser tests skipped: no chromium binary (apt-get install chromium-headless-shell or chromium, or set CHROMIUM_PATH)");
}

describe.skipIf(!chromiumPath)("the dashboard in chromium", () => {
  const stack = inject("e2eStack");
  let browser: Browser;
  let page: Page;
  const stamp = Date.now().toString(36);
  const visited = new Set<string>();

  beforeAll(async () => {
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: widths.desktop });
    page = await context.newPage();
    if (screenshots) await mkdir(screenshotDir, { recursive: true });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
  });

  const url = (path: string) => `${stack.workerUrl}${path}`;
  /** One of the campaign editor's checkbox groups (Lists, Segments, Exclude lists): a list's name is in two of them. */
  const listsBox = (legend: string) => page.locator("fieldset", { has: page.locator("legend", { hasText: new RegExp(`^${legend}$`) }) });
  const api = async <T>(path: string, body?: unknown): Promise<T> => {
    const response = await fetch(url(`/api/v1${path}`), {
      method: body === undefined ? "GET" : "POST",
      headers: { Authorization: `Bearer ${stack.apiKey}`, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  };
  const remember = () => visited.add(new URL(page.url()).pathname);
  const snap = async (file: string, { fullPage = true, on = page }: { fullPage?: boolean; on?: Page } = {}) => {
    if (screenshots) await on.screenshot({ path: join(screenshotDir, file), fullPage });
  };

  it("redirects to sign-in, refuses a bad key and signs in with the demo key", async () => {
    await page.goto(url("/"));
    expect(new URL(page.url()).pathname).toBe("/dashboard/sign-in");
    await page.getByLabel("API key").fill("sk_live_00000000000000000000000000000000");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("That API key is not valid");
    visited.add("/dashboard/sign-in");
    await page.getByLabel("API key").fill(stack.apiKey);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(url("/dashboard"));
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Overview");
    expect(await page.getByText("Sending credits").count()).toBe(1);
    const cookies = await page.context().cookies();
    expect(cookies.find((cookie) => cookie.name === "mf_session")).toMatchObject({ httpOnly: true, sameSite: "Lax" });
    remember();
  }, 60_000);

  it("creates an API key and shows its secret once", async () => {
    await page.goto(url("/dashboard/api-keys"));
    await page.getByLabel("Name").fill(`e2e ${stamp}`);
    await page.getByLabel("send", { exact: true }).check();
    await page.getByRole("button", { name: "Create key" }).click();
    const secret = await page.getByTestId("new-secret").locator("code").textContent();
    expect(secret).toMatch(/^sk_live_[0-9A-Za-z]{32}$/);
    const me = await fetch(url("/api/v1/me"), { headers: { Authorization: `Bearer ${secret}` } });
    expect(((await me.json()) as { api_key: { scopes: string[] } }).api_key.scopes).toEqual(["send"]);
    await page.goto(url("/dashboard/api-keys"));
    expect(await page.getByTestId("new-secret").count()).toBe(0);
    expect(await page.content()).not.toContain(secret!);
    expect(await page.getByRole("cell", { name: `e2e ${stamp}`, exact: true }).count()).toBe(1);
    remember();
  }, 60_000);

  it("adds a domain, publishes its records and verifies it", async () => {
    const name = `dash-${stamp}.example`;
    await page.goto(url("/dashboard/domains"));
    await page.getByLabel("Domain").fill(name);
    await page.getByRole("button", { name: "Add domain" }).click();
    await page.waitForURL(/\/dashboard\/domains\/dom_/);
    expect(await page.locator("#records .badge").first().textContent()).toBe("pending");
    // Publish what the page shows, as a person would at their DNS host (here: the dev DoH server's zone).
    const rows = await page.locator("#records tbody tr").all();
    for (const row of rows) {
      const [recordName, value] = await row.locator("code").allTextContents();
      const published = await fetch(`${stack.dohAdminUrl}/zone/${recordName}`, { method: "PUT", body: JSON.stringify({ TXT: [value] }) });
      expect(published.status).toBe(200);
    }
    await page.getByRole("button", { name: "Verify now" }).click();
    await expect.poll(() => page.locator("#records h2 .badge").textContent()).toBe("verified");
    expect(await page.getByRole("button", { name: /^Copy / }).count()).toBe(rows.length * 2);
    remember();
    await page.goto(url("/dashboard/domains"));
    remember();
  }, 60_000);

  it("sends a test email and finds it on the messages page", async () => {
    const to = `reader-${stamp}@example.org`;
    await page.goto(url("/dashboard/messages"));
    await page.getByText("Send a test email").click();
    await page.locator("#test-from").fill("Dashboard <hello@demo.mailforge.test>");
    await page.locator("#test-to").fill(to);
    await page.locator("#test-subject").fill(`Hello from e2e ${stamp}`);
    await page.getByRole("button", { name: "Send", exact: true }).click();
    await page.waitForURL(/sent=1/);
    await eventually(async () => {
      await page.goto(url(`/dashboard/messages?to=${encodeURIComponent(to)}&status=sent`));
      return (await page.getByRole("link", { name: `Hello from e2e ${stamp}` }).count()) > 0 || undefined;
    });
    remember();
    await page.getByRole("link", { name: `Hello from e2e ${stamp}` }).click();
    await page.waitForURL(/\/dashboard\/messages\/msg_/);
    expect(await page.locator(".timeline").textContent()).toContain("relay.sent");
    expect(await page.locator("dl.facts").nth(1).textContent()).toContain(to);
    remember();
  }, 60_000);

  it("verifies an uploaded CSV and the progress bar reaches 100%", async () => {
    await page.goto(url("/dashboard/verification"));
    await page.getByLabel("Email address").fill("someone@demo.mailforge.test");
    await page.getByRole("button", { name: "Verify", exact: true }).click();
    await expect.poll(() => page.getByTestId("single-result").textContent()).toContain("someone@demo.mailforge.test");
    const addresses = Array.from({ length: 40 }, (_, index) => `person${index}@demo.mailforge.test`);
    await page
      .getByLabel(/CSV file/)
      .setInputFiles({ name: "people.csv", mimeType: "text/csv", buffer: Buffer.from(`email\n${addresses.join("\n")}\nnot-an-address\n`) });
    await page.getByRole("button", { name: "Upload and verify" }).click();
    await page.waitForURL(/\/dashboard\/verification\/vjob_/);
    // The bar is replaced by htmx polling, without a reload.
    await expect.poll(() => page.locator("progress").getAttribute("value"), { timeout: 30_000 }).toBe("100");
    expect(await page.locator(".progress-text").textContent()).toBe("100% (41 of 41)");
    const download = page.waitForEvent("download");
    await page.getByRole("link", { name: "Download results (CSV)" }).click();
    expect((await download).suggestedFilename()).toMatch(/^vjob_.*\.csv$/);
    remember();
    await page.goto(url("/dashboard/verification"));
    remember();
  }, 60_000);

  it("imports contacts into a list, then creates and schedules a campaign to it", async () => {
    await page.goto(url("/dashboard/contacts"));
    await page.getByLabel("New list").fill(`Readers ${stamp}`);
    await page.getByRole("button", { name: "Create list" }).click();
    await page.getByLabel(/CSV with a header row/).setInputFiles({
      name: "contacts.csv",
      mimeType: "text/csv",
      buffer: Buffer.from(`email,first_name\nann-${stamp}@example.org,Ann\nbob-${stamp}@example.org,<img src=x onerror=alert(1)>\n`),
    });
    await page.getByLabel("Add to list").selectOption({ label: `Readers ${stamp}` });
    await page.getByRole("button", { name: "Import" }).click();
    await page.waitForURL(/\/dashboard\/contacts\/imports\/imp_/);
    await expect.poll(() => page.locator("progress").getAttribute("value"), { timeout: 30_000 }).toBe("100");
    remember();
    await page.goto(url("/dashboard/contacts"));
    expect(await page.getByRole("cell", { name: "<img src=x onerror=alert(1)>", exact: false }).count()).toBeGreaterThan(0);
    expect(await page.locator("td img").count()).toBe(0);
    remember();

    await page.goto(url("/dashboard/campaigns"));
    await page.locator("#sender-name").fill("Demo news");
    await page.locator("#sender-email").fill("news@demo.mailforge.test");
    await page.getByRole("button", { name: "Add sender" }).click();
    await page.waitForURL(url("/dashboard/campaigns"));
    await page.locator("#cmp-name").fill(`Newsletter ${stamp}`);
    await page.locator("#cmp-sender").selectOption({ label: "Demo news <news@demo.mailforge.test>" });
    await listsBox("Lists").getByLabel(`Readers ${stamp}`).check();
    await page.locator("#cmp-subject").fill("Our November news");
    await page.locator("#cmp-html").fill('<h1>Hello {{first_name}}</h1><p>Read <a href="https://example.com/news">the news</a>.</p>');
    await page.getByRole("button", { name: "Create draft" }).click();
    await page.waitForURL(/\/dashboard\/campaigns\/cmp_/);
    const draftPath = new URL(page.url()).pathname;
    expect(await page.getByTestId("audience").textContent()).toContain("Audience: 2 ");
    expect(await page.getByTestId("audience").textContent()).toContain("sending credits (one per recipient; ");
    // What "Send or schedule" sends is said beside it, and it comes after the editor whose changes must be saved first.
    expect(await page.getByTestId("sends-saved").textContent()).toContain("sends the draft as last saved");
    const top = async (selector: string) => (await page.locator(selector).boundingBox())!.y;
    expect(await top("#send")).toBeGreaterThan(await top("#cmp-name"));
    // The preview is the mail one contact of the audience gets: their name in place of the placeholder.
    expect(await page.frameLocator("iframe.preview").locator("h1").textContent()).toMatch(/^Hello (Ann|<img src=x onerror=alert\(1\)>)$/);
    // The draft's page (editor and preview) is gone once it is scheduled: its pictures are taken now.
    for (const [label, viewport] of Object.entries(widths)) {
      await page.setViewportSize(viewport);
      await snap(`${label}-campaigns_draft.png`);
    }
    await page.setViewportSize(widths.desktop);
    remember();
    // The list counts a draft's audience as the editor does (it has no recipients of its own until it is sent).
    await page.goto(url("/dashboard/campaigns"));
    expect(
      await page
        .getByRole("row", { name: new RegExp(`Newsletter ${stamp}`) })
        .getByRole("cell")
        .nth(2)
        .textContent(),
    ).toBe("2 if sent now");
    await page.goto(url(draftPath));
    // The time is typed and shown as the dashboard shows every time: UTC, 24-hour, whatever the browser's locale.
    const sendAt = `${new Date(Date.now() + 86_400_000).toISOString().slice(0, 10)} 17:45`;
    const field = page.getByLabel("Send at, in UTC (YYYY-MM-DD HH:MM, 24-hour; empty: now)");
    await field.fill(sendAt);
    expect(await field.inputValue()).toBe(sendAt);
    await page.getByRole("button", { name: "Send or schedule" }).click();
    await page.waitForURL(/scheduled=1/);
    expect(await page.locator("#campaign-progress .badge").first().textContent()).toBe("scheduled");
    expect(await page.locator("#campaign-progress").textContent()).toContain(`for ${sendAt}:00 UTC`);
    expect(await page.getByRole("button", { name: "Cancel campaign" }).count()).toBe(1);
    await page.goto(url("/dashboard/campaigns"));
    expect(
      await page
        .getByRole("row", { name: new RegExp(`Newsletter ${stamp}.*scheduled`) })
        .getByRole("cell")
        .nth(2)
        .textContent(),
    ).toBe("2 when scheduled");
    remember();
  }, 90_000);

  it("builds a template and a segment, sends a campaign to a list and the segment minus an exclude list, and the right people get it by name", async () => {
    // The people: three members of a list (one of them staff, excluded), one on the pro plan outside it, one not.
    const members = await api<{ id: string }>("/lists", { name: `Members ${stamp}` });
    const staff = await api<{ id: string }>("/lists", { name: `Staff ${stamp}` });
    const plan = `pro-${stamp}`;
    const people = {
      ann: { first_name: "Ann", lists: [members.id] },
      bob: { first_name: "Bob", lists: [members.id] },
      eve: { first_name: "Eve", lists: [members.id, staff.id] },
      carl: { first_name: "Carl", custom_fields: { plan } },
      dan: { first_name: "Dan", custom_fields: { plan: `free-${stamp}` } },
    };
    const address = (name: string) => `${name}-${stamp}@example.org`;
    for (const [name, fields] of Object.entries(people)) await api("/contacts", { email: address(name), ...fields });

    await page.goto(url("/dashboard/templates"));
    await page.locator("#tpl-name").fill(`Welcome ${stamp}`);
    await page.locator("#tpl-subject").fill("News for {{first_name|friend}}");
    await page.locator("#tpl-html").fill("<h1>Hello {{first_name|friend}}</h1><p>This is for {{email}}.</p>");
    await page.getByRole("button", { name: "Create template" }).click();
    await page.waitForURL(/\/dashboard\/templates\/tpl_/);
    expect(await page.frameLocator("iframe.preview").locator("body").textContent()).not.toContain("{{");
    remember();
    await page.goto(url("/dashboard/templates"));
    remember();

    await page.goto(url("/dashboard/segments"));
    await page.locator("#seg-name").fill(`Pro plan ${stamp}`);
    await page.getByLabel("Condition 1 field").fill("custom_fields.plan");
    await page.getByLabel("Condition 1 operator").selectOption("eq");
    await page.getByLabel("Condition 1 value").fill(plan);
    await page.getByLabel("Condition 1 value").blur();
    await expect.poll(() => page.getByTestId("segment-count").textContent()).toContain("1 subscribed contacts match");
    await page.getByRole("button", { name: "Create segment" }).click();
    await page.waitForURL(/\/dashboard\/segments\/seg_/);
    expect(await page.getByTestId("segment-total").textContent()).toContain("1 subscribed contacts match");
    remember();
    await page.goto(url("/dashboard/segments"));
    remember();

    await page.goto(url("/dashboard/campaigns"));
    await page.locator("#cmp-name").fill(`Members news ${stamp}`);
    await page.locator("#cmp-sender").selectOption({ label: "Demo news <news@demo.mailforge.test>" });
    await listsBox("Lists").getByLabel(`Members ${stamp}`).check();
    await listsBox("Segments").getByLabel(`Pro plan ${stamp}`).check();
    await listsBox("Exclude lists").getByLabel(`Staff ${stamp}`).check();
    // The audience is counted as the boxes change: Ann, Bob and Carl; Eve is excluded, Dan matches nothing.
    await expect.poll(() => page.getByTestId("editor-audience").first().textContent()).toContain("Audience: 3 ");
    await page.locator("#cmp-template").selectOption({ label: `Welcome ${stamp}` });
    await page.getByRole("button", { name: "Create draft" }).click();
    await page.waitForURL(/\/dashboard\/campaigns\/cmp_/);
    const campaignPath = new URL(page.url()).pathname;
    expect(await page.getByTestId("audience").textContent()).toContain("Audience: 3 ");
    const preview = await page.frameLocator("iframe.preview").locator("body").textContent();
    expect(preview).not.toContain("{{");
    expect(preview).toMatch(/News for (Ann|Bob|Carl)/);
    expect(await page.frameLocator("iframe.preview").getByRole("link", { name: "Unsubscribe" }).count()).toBe(1);
    for (const [label, viewport] of Object.entries(widths)) {
      await page.setViewportSize(viewport);
      await snap(`${label}-campaigns_editor.png`);
    }
    await page.setViewportSize(widths.desktop);

    // Saving with only the subject changed keeps everything else, the exclude list included.
    await page.locator("#cmp-subject").fill("Members news for {{first_name|friend}}");
    await page.getByRole("button", { name: "Save draft" }).click();
    await page.waitForURL(url(campaignPath));
    const saved = await api<{ subject: string; lists: string[]; segments: string[]; exclude_lists: string[]; template_id: string | null }>(
      `/campaigns/${campaignPath.split("/").pop()}`,
    );
    expect(saved).toMatchObject({ subject: "Members news for {{first_name|friend}}", lists: [members.id], exclude_lists: [staff.id] });
    expect(saved.segments).toHaveLength(1);
    expect(saved.template_id).toMatch(/^tpl_/);

    await page.getByRole("button", { name: "Send or schedule" }).click();
    await page.waitForURL(url(campaignPath));
    await expect.poll(() => page.locator("#campaign-progress .badge").first().textContent(), { timeout: 30_000 }).toBe("sent");
    await page.reload();
    expect(await page.getByTestId("report").textContent()).toContain("Delivered");
    // The subject is shown as the template it is, with one recipient's copy filled in.
    expect(await page.locator("dl.facts dt", { hasText: "Subject template" }).count()).toBe(1);
    expect(await page.getByTestId("subject").locator("code").textContent()).toBe("Members news for {{first_name|friend}}");
    expect(await page.getByTestId("subject-example").textContent()).toMatch(/Filled in for (ann|bob|carl)-.*: “Members news for (Ann|Bob|Carl)”/);
    remember();

    // The right people got it, each with their own name; the excluded and the unmatched got nothing.
    for (const name of ["ann", "bob", "carl"]) {
      const raw = await eventually(async () => {
        const found = (await (await fetch(`${stack.sinkUrl}/api/messages?to=${encodeURIComponent(address(name))}`)).json()) as {
          data: { id: string }[];
        };
        return found.data[0] ? await (await fetch(`${stack.sinkUrl}/api/messages/${found.data[0].id}/raw`)).text() : undefined;
      });
      const first = people[name as keyof typeof people].first_name;
      expect(raw).toContain(`Subject: Members news for ${first}`);
      expect(raw).toContain(`Hello ${first}`);
    }
    for (const name of ["eve", "dan"]) {
      const found = (await (await fetch(`${stack.sinkUrl}/api/messages?to=${encodeURIComponent(address(name))}`)).json()) as { data: unknown[] };
      expect(found.data, name).toHaveLength(0);
    }

    // The messages list names each recipient.
    await page.goto(url(`/dashboard/messages?to=${encodeURIComponent(address("ann"))}`));
    expect(await page.getByTestId("recipients").first().textContent()).toContain(address("ann"));
    await page.goto(url("/dashboard/messages"));
    expect(await page.getByTestId("recipients").allTextContents()).toEqual(expect.arrayContaining([expect.stringContaining("@example.org")]));
  }, 120_000);

  it("opens a contact and changes its first name", async () => {
    const email = `zoe-${stamp}@example.org`;
    await api("/contacts", { email, first_name: "Zoe" });
    await page.goto(url(`/dashboard/contacts?email=${encodeURIComponent(email)}`));
    await page.getByRole("link", { name: email }).click();
    await page.waitForURL(/\/dashboard\/contacts\/con_/);
    await page.getByLabel("First name").fill("Zoë");
    await page.getByRole("button", { name: "Save contact" }).click();
    await page.waitForURL(/saved=1/);
    expect(await page.getByLabel("First name").inputValue()).toBe("Zoë");
    const listed = await api<{ data: { first_name: string }[] }>(`/contacts?email=${encodeURIComponent(email)}`);
    expect(listed.data[0]?.first_name).toBe("Zoë");
    remember();
  }, 60_000);

  it("builds an automation from a template, a wait and a list step, shows a refused step's message beside its field, pauses, resumes and lists each contact's run", async () => {
    const template = await api<{ id: string }>("/templates", {
      name: `Onboarding mail ${stamp}`,
      subject: "Hi {{first_name|there}}",
      html: "<p>Hi</p>",
    });
    const list = await api<{ id: string }>("/lists", { name: `Onboarded ${stamp}` });
    const sender = await api<{ id: string }>("/senders", { name: `Onboarding ${stamp}`, email: `onboarding-${stamp}@demo.mailforge.test` });
    await page.goto(url("/dashboard/automations"));
    await page.locator("#new-automation-name").fill(`Onboarding ${stamp}`);
    await page.locator("#step-type").selectOption({ label: "Send an email" });
    await page.getByRole("button", { name: "Next" }).click();
    await page.waitForURL(/\/dashboard\/automations\/new/);
    // Neither a template nor a subject: the API's refusal, beside the form.
    await page.locator("#step-sender").selectOption(sender.id);
    await page.getByRole("button", { name: "Create automation" }).click();
    expect(await page.locator(".notice.error").first().textContent()).toContain("Give either template_id, or subject with html and/or text");
    expect(await page.locator("#aut-name").inputValue()).toBe(`Onboarding ${stamp}`);
    await page.locator("#step-template").selectOption({ label: `Onboarding mail ${stamp}` });
    await page.getByRole("button", { name: "Create automation" }).click();
    await page.waitForURL(/\/dashboard\/automations\/aut_/);
    const automationPath = new URL(page.url()).pathname;

    await page.locator("#step-type").selectOption({ label: "Wait" });
    await page.getByRole("button", { name: "Add step" }).click();
    await page.locator("#step-amount").fill("400");
    await page.getByRole("button", { name: "Add step" }).click();
    // 400 days is more than the API allows: its message shows under the field.
    expect(await page.locator("#error-seconds").textContent()).toMatch(/less than or equal|31536000/);
    await page.locator("#step-amount").fill("2");
    await page.getByRole("button", { name: "Add step" }).click();
    await page.waitForURL((target) => target.pathname === automationPath);
    await page.locator("#step-type").selectOption({ label: "Add to a list" });
    await page.getByRole("button", { name: "Add step" }).click();
    await page.locator("#step-list").selectOption({ label: `Onboarded ${stamp}` });
    await page.getByRole("button", { name: "Add step" }).click();
    await page.waitForURL((target) => target.pathname === automationPath);
    const steps = await page.locator("ol.steps > li").allTextContents();
    expect(steps.map((step) => step.replace(/\s+/g, " "))).toEqual([
      expect.stringContaining(`Send the template “Onboarding mail ${stamp}” from Onboarding ${stamp}`),
      expect.stringContaining("Wait 2 days"),
      expect.stringContaining(`Add to the list “Onboarded ${stamp}”`),
    ]);
    const id = automationPath.split("/").pop();
    const saved = await api<{ steps: unknown[]; status: string }>(`/automations/${id}`);
    expect(saved.steps).toEqual([
      // The step form's kind of mail: marketing unless chosen otherwise.
      { type: "send_email", sender_id: sender.id, template_id: template.id, stream: "broadcast" },
      { type: "wait", seconds: 172_800 },
      { type: "add_to_list", list_id: list.id },
    ]);
    remember();

    await page.getByRole("button", { name: "Pause" }).click();
    await page.waitForURL((target) => target.pathname === automationPath);
    expect((await api<{ status: string }>(`/automations/${id}`)).status).toBe("paused");
    await page.getByRole("button", { name: "Resume" }).click();
    await page.waitForURL((target) => target.pathname === automationPath);
    expect((await api<{ status: string }>(`/automations/${id}`)).status).toBe("active");
    const email = `newbie-${stamp}@example.org`;
    await api(`/automations/${id}/trigger`, { email, first_name: "Nia" });
    await page.reload();
    await page.getByRole("link", { name: email }).click();
    await page.waitForURL(/\/dashboard\/automations\/runs\/run_/);
    expect(await page.locator("h1").textContent()).toContain(`Run for ${email}`);
    remember();
    for (const [label, viewport] of Object.entries(widths)) {
      await page.setViewportSize(viewport);
      await page.goto(url(automationPath));
      await snap(`${label}-automations_builder.png`);
      await page.goto(url(`${automationPath}/steps/0`));
      await snap(`${label}-automations_step.png`);
    }
    await page.setViewportSize(widths.desktop);
  }, 120_000);

  it("fits the navigation on one line at 1280 px and behind a menu at 390 px", async () => {
    await page.setViewportSize(widths.desktop);
    await page.goto(url("/dashboard/campaigns"));
    // Every section and the sign-out button share one line (their vertical middles within a few pixels), and the
    // header is no wider than the window.
    const middles = await page.locator("header.top nav > ul > li, header.top .sign-out button").evaluateAll((elements) =>
      elements.map((element) => {
        const box = (element as unknown as { getBoundingClientRect(): { top: number; height: number; right: number } }).getBoundingClientRect();
        return { middle: box.top + box.height / 2, right: box.right };
      }),
    );
    expect(middles.length).toBeGreaterThan(8);
    const lines = middles.map((box) => box.middle);
    expect(Math.max(...lines) - Math.min(...lines)).toBeLessThan(6);
    expect(Math.max(...middles.map((box) => box.right))).toBeLessThanOrEqual(widths.desktop.width);
    expect(await page.getByRole("button", { name: "Menu" }).isVisible()).toBe(false);
    await page.setViewportSize(widths.phone);
    await page.goto(url("/dashboard/campaigns"));
    expect(await page.getByRole("link", { name: "Templates" }).isVisible()).toBe(false);
    await page.getByRole("button", { name: "Menu" }).click();
    expect(await page.getByRole("link", { name: "Templates" }).isVisible()).toBe(true);
    await snap("phone-menu-open.png", { fullPage: false });
    await page.setViewportSize(widths.desktop);
  }, 60_000);

  it("shows every page at desktop and phone widths with nothing wider than the screen, each with its icon", async () => {
    for (const path of [
      "/dashboard",
      "/dashboard/smtp-credentials",
      "/dashboard/webhooks",
      "/dashboard/automations",
      "/dashboard/contacts",
      "/dashboard/contacts/topics",
      "/dashboard/contacts/suppressions",
      "/dashboard/contacts/forms",
      "/dashboard/ai",
      "/dashboard/usage",
    ]) {
      visited.add(path);
    }
    const overflowing: string[] = [];
    const iconless: string[] = [];
    // One page per width, signed in alike (one context), loading the same path at once. A page is done at its load
    // event: its charts draw from data inline in the page (dashboard.js, on DOMContentLoaded), and nothing loads later.
    const pages = await Promise.all(
      Object.entries(widths).map(async ([label, viewport]) => {
        const tab = await page.context().newPage();
        await tab.setViewportSize(viewport);
        return { label, tab };
      }),
    );
    for (const path of visited) {
      if (path === "/dashboard/sign-in") continue;
      await Promise.all(
        pages.map(async ({ label, tab }) => {
          await tab.goto(url(path));
          // Ids vary from run to run; a detail page keeps one name so a run replaces the last one's picture.
          const name = path
            .replace(/^\/dashboard\/?/, "")
            .replace(/\/[a-z]+_[0-9A-Za-z]{16,}/g, "/detail")
            .replace(/\//g, "_");
          await snap(`${label}-${name || "overview"}.png`, { on: tab });
          // A table may scroll inside its card; the page itself must not scroll sideways.
          const wider = await tab.evaluate(() => {
            // The callback runs in the page; this file is type-checked without the DOM library.
            const root = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }).document
              .documentElement;
            return root.scrollWidth > root.clientWidth;
          });
          if (wider) overflowing.push(`${label} ${path}`);
          // A browser asks for the icon a page names, else for /favicon.ico; the headless shell asks for neither, so
          // the page loads it here as an image, as a browser's tab would.
          const iconWidth = await tab.evaluate(async () => {
            const window = globalThis as unknown as {
              document: { querySelector(selector: string): { href: string } | null };
              location: { href: string };
              Image: new () => { src: string; naturalWidth: number; decode(): Promise<void> };
            };
            const icon = new window.Image();
            icon.src = window.document.querySelector('link[rel~="icon"]')?.href ?? new URL("/favicon.ico", window.location.href).href;
            await icon.decode().catch(() => undefined);
            return icon.naturalWidth;
          });
          if (iconWidth === 0) iconless.push(`${label} ${path}`);
        }),
      );
    }
    await Promise.all(pages.map(({ tab }) => tab.close()));
    expect(overflowing).toEqual([]);
    expect(iconless).toEqual([]);
    // The overview's charts were drawn (uPlot canvases), not left empty.
    await page.setViewportSize(widths.desktop);
    await page.goto(url("/dashboard"));
    expect(await page.locator(".chart canvas").count()).toBeGreaterThan(0);
    await page.context().clearCookies();
    await page.goto(url("/dashboard/sign-in"));
    for (const [label, viewport] of Object.entries(widths)) {
      await page.setViewportSize(viewport);
      await snap(`${label}-sign-in.png`);
    }
  }, 120_000);
});
