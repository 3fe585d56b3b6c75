import { describe, expect, it } from "vitest";
import { call, createAccount, json } from "../helpers";
import { cookieHeader, signIn, visit } from "./helpers";

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
    };
    for (const [path, text] of Object.entries(empty)) {
      const page = await browser.get(path);
      expect(page.status, path).toBe(200);
      expect(await page.text(), path).toContain(text);
    }
  });

  it("creates a draft campaign with a list audience, counts the audience and shows the preview frame", async () => {
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
    expect(html).toContain(`src="${location}/preview"`);
    const preview = await browser.get(`${location}/preview`);
    expect(preview.headers.get("Content-Security-Policy")).toMatch(/^sandbox;/);
    expect(await preview.text()).toBe("<p>Hello {{first_name}}</p>");
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
