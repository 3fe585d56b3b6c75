// People in a real browser: the operator creates an account with `owner_email`, the owner finds the invitation in
// the dev mail sink, opens its link in Chromium and lands in the dashboard signed in as the owner.
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { readDevVars } from "../../scripts/lib/dev-vars.ts";
import { chromiumPath, launchChromium } from "./browser.ts";
import { eventually } from "./stack.ts";

describe.skipIf(!chromiumPath)("an account's owner in chromium", () => {
  const stack = inject("e2eStack");
  let browser: Browser;

  beforeAll(async () => {
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
  });

  /** The text of the newest mail the sink got for `address`. */
  const mailText = (address: string) =>
    eventually(async () => {
      const listed = (await (await fetch(`${stack.sinkUrl}/api/messages?to=${encodeURIComponent(address)}`)).json()) as { data: { id: string }[] };
      const newest = listed.data.at(-1);
      if (!newest) return undefined;
      return ((await (await fetch(`${stack.sinkUrl}/api/messages/${newest.id}`)).json()) as { text: string }).text;
    });

  it("npm run dev says how to sign in as the demo owner, whose invitation is in the sink", async () => {
    expect(stack.output).toContain("sign in as owner@demo.mailforge.test");
    expect(await mailText("owner@demo.mailforge.test")).toContain('"Demo" as owner');
  });

  it("an account created with owner_email mails its owner a link that signs the owner in", async () => {
    const owner = `owner-${Date.now().toString(36)}@people.test`;
    const created = await fetch(`${stack.workerUrl}/admin/v1/accounts`, {
      method: "POST",
      headers: { Authorization: `Bearer ${readDevVars().ADMIN_TOKEN}`, "Content-Type": "application/json" },
      body: JSON.stringify({ name: "Chromium Co", owner_email: owner }),
    });
    expect(created.status).toBe(201);
    const link = /https?:\/\/\S+\/dashboard\/invitation\?token=[\w-]+/.exec(await mailText(owner))?.[0];
    expect(link?.startsWith(stack.workerUrl)).toBe(true);

    const page = await (await browser.newContext()).newPage();
    await page.goto(link!);
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Join Chromium Co");
    await page.getByRole("button", { name: "Accept and sign in" }).click();
    await page.waitForURL(`${stack.workerUrl}/dashboard`);
    await page.goto(`${stack.workerUrl}/dashboard/members`);
    const row = page.getByRole("row", { name: new RegExp(owner) });
    expect(await row.textContent()).toMatch(/owner.*active/);
    // The invitation is used up: opening it again signs nobody in.
    const again = await (await browser.newContext()).newPage();
    expect((await again.goto(link!))?.status()).toBe(410);
  }, 60_000);
});
