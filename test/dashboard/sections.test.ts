// Each section's access is named once, where src/dashboard/index.tsx mounts it. These walk the dashboard's own route
// table, so a route added later is held to the same checks without a test naming it.
import { describe, expect, it } from "vitest";
import { dashboardRoutes } from "../../src/dashboard/index";
import { call, createAccount, createKey } from "../support/helpers";
import { acceptInvitationOf, uniqueAddress } from "../support/members";
import { signIn } from "../support/dashboard";

/** Pages of anyone signed in, or signing in: they belong to no section. */
const sectionless = /^\/(sign-in|invitation|sign-out|security)(\/|$)/;

/** Every GET and POST route of the dashboard but the sectionless ones and `skip`, its parameters filled in. */
function routesBut(skip: RegExp): string[] {
  const routes = new Set<string>();
  for (const { method, path } of dashboardRoutes.routes) {
    if ((method !== "GET" && method !== "POST") || path.includes("*") || sectionless.test(path) || skip.test(path)) continue;
    const filled = path
      .replace(/:\w+\{[^/]*\}/g, "1")
      .replace(/:index\?/g, "0")
      .replace(/:[A-Za-z]+/g, "x_1");
    routes.add(`${method} /dashboard${filled === "/" ? "" : filled}`);
  }
  return [...routes];
}

describe("dashboard sections", () => {
  it("refuses a key every route of the sections its scopes do not cover, reading and changing alike", async () => {
    const account = await createAccount({ rate_limit_per_minute: 1000 });
    const verifier = await createKey(account.api_key, { name: "verification only", scopes: ["verify"] });
    const browser = await signIn(verifier.key);
    const routes = routesBut(/^\/verification(\/|$)/);
    // The walk covers the routes that share a prefix with another section's, and those with checks of their own.
    expect(routes).toEqual(
      expect.arrayContaining([
        "GET /dashboard",
        "GET /dashboard/contacts/suppressions",
        "POST /dashboard/inbound/domains/x_1",
        "POST /dashboard/campaigns/x_1/test",
        "POST /dashboard/automations/x_1/steps/0",
      ]),
    );
    for (const route of routes) {
      const [method, path] = route.split(" ") as [string, string];
      const response = method === "GET" ? await browser.get(path) : await browser.post(path, {});
      expect(response.status, route).toBe(403);
      expect(await response.text(), route).toMatch(/This page needs (a full-access key|a key with the <code>\w+<\/code> scope)/);
    }
  });

  it("refuses a viewer every change, in every section", async () => {
    const account = await createAccount({ rate_limit_per_minute: 1000 });
    const email = uniqueAddress("viewer");
    expect((await call("/api/v1/members", { key: account.api_key, body: { email, role: "viewer" } })).status).toBe(201);
    const browser = await acceptInvitationOf(email);
    const changes = routesBut(/$^/).filter((route) => route.startsWith("POST "));
    expect(changes.length).toBeGreaterThan(50);
    for (const route of changes) {
      const response = await browser.post(route.slice("POST ".length), {});
      expect(response.status, route).toBe(403);
      expect(await response.text(), route).toContain("A viewer can look but not change anything");
    }
  });
});
