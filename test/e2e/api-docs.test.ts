// The API reference (/api/v1/docs) as `npm run dev` serves it: Scalar comes from the Worker's static assets, and in
// chromium the page renders the reference without a single request to another host, without a
// Content-Security-Policy violation, and without Scalar finding fault with the OpenAPI document.
import { describe, expect, inject, it } from "vitest";
import { chromiumPath, launchChromium } from "./browser.ts";

describe("the API reference", () => {
  const stack = inject("e2eStack");
  const url = (path: string) => `${stack.workerUrl}${path}`;

  it("serves the scripts its page references from the Worker's static assets", async () => {
    const page = await (await fetch(url("/api/v1/docs"))).text();
    const scripts = [...page.matchAll(/<script src="([^"]+)"/g)].map(([, src]) => src!);
    expect(scripts).toEqual(["/api-reference/vendor/scalar.js", "/api-reference/init.js"]);
    for (const src of scripts) {
      const response = await fetch(url(src));
      expect(response.status).toBe(200);
      expect(response.headers.get("Content-Type")).toMatch(/javascript/);
    }
    const bundle = await (await fetch(url("/api-reference/vendor/scalar.js"))).text();
    expect(bundle).toContain("createApiReference");
  });

  it.skipIf(!chromiumPath)(
    "renders in chromium from this origin only, within its Content-Security-Policy, and Scalar takes the document as valid",
    async () => {
      const browser = await launchChromium();
      try {
        const page = await browser.newPage();
        const origin = new URL(stack.workerUrl).origin;
        const elsewhere: string[] = [];
        const refused: string[] = [];
        // Scalar checks the document it loads and logs "document validation errors" with each one it finds.
        const invalid: string[] = [];
        page.on("request", (request) => {
          const requested = new URL(request.url());
          if (/^https?:$/.test(requested.protocol) && requested.origin !== origin) elsewhere.push(request.url());
        });
        page.on("console", (message) => {
          if (/Content Security Policy|Refused to/i.test(message.text())) refused.push(message.text());
          if (/validation error/i.test(message.text())) invalid.push(message.text());
        });
        await page.goto(url("/api/v1/docs"));
        // The document's title and its tags (the sidebar's groups) rendered from /api/v1/openapi.json.
        await expect.poll(() => page.locator("body").innerText(), { timeout: 60_000 }).toContain("Mailforge API");
        const text = await page.locator("body").innerText();
        for (const tag of ["Sending", "Campaigns", "Reports"]) expect(text).toContain(tag);
        expect(elsewhere).toEqual([]);
        expect(refused).toEqual([]);
        expect(invalid).toEqual([]);
      } finally {
        await browser.close();
      }
    },
    90_000,
  );
});
