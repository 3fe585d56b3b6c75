import { describe, expect, it } from "vitest";
import { call } from "../support/helpers";

// GET /api/v1/docs: the API reference page loads Scalar from this Worker's own static assets (test/e2e/api-docs.test.ts
// fetches those and renders the page in chromium), and its Content-Security-Policy lets it reach no other host.

describe("GET /api/v1/docs", () => {
  it("references no other host: every script is a path on this origin, and the policy allows only 'self'", async () => {
    const response = await call("/api/v1/docs");
    expect(response.status).toBe(200);
    expect(response.headers.get("Content-Type")).toBe("text/html; charset=UTF-8");
    const page = await response.text();

    expect(page).not.toMatch(/https?:|\/\/[a-z0-9.-]+\.[a-z]{2,}/i);
    const references = [...page.matchAll(/\b(?:src|href)="([^"]*)"/g)].map(([, url]) => url!);
    expect(references).toEqual(["/api-reference/vendor/scalar.js", "/api-reference/init.js"]);

    const policy = Object.fromEntries(
      response.headers
        .get("Content-Security-Policy")!
        .split(";")
        .map((directive) => directive.trim().split(/\s+/))
        .map(([name, ...sources]) => [name!, sources]),
    );
    expect(policy["default-src"]).toEqual(["'none'"]);
    expect(policy["script-src"]).toEqual(["'self'"]);
    expect(policy["connect-src"]).toEqual(["'self'"]);
    expect(policy["frame-ancestors"]).toEqual(["'none'"]);
    // No directive names a host or a scheme that could reach one.
    for (const sources of Object.values(policy)) for (const source of sources) expect(source).toMatch(/^('[a-z-]+'|data:|blob:)$/);
  });

  it("needs no API key, as the OpenAPI document it reads", async () => {
    expect((await call("/api/v1/docs")).status).toBe(200);
    expect((await call("/api/v1/openapi.json")).status).toBe(200);
  });
});
