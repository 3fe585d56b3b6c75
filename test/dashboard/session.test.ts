import { describe, expect, it } from "vitest";
import { createAccount } from "../helpers";
import { signIn, visit } from "./helpers";

describe("dashboard sign-in", () => {
  it("redirects / to the dashboard and the dashboard to sign-in without a session", async () => {
    const root = await visit("/");
    expect(root.status).toBe(302);
    expect(root.headers.get("Location")).toBe("/dashboard");
    const page = await visit("/dashboard");
    expect(page.status).toBe(303);
    expect(page.headers.get("Location")).toBe("/dashboard/sign-in");
  });

  it("signs in with a full-access key and shows the overview", async () => {
    const account = await createAccount({ name: "Overview Co" });
    const browser = await signIn(account.api_key);
    const page = await browser.get("/dashboard");
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("Overview Co");
    expect(html).toContain("Sending credits");
  });
});
