import { describe, expect, it } from "vitest";
import { call, createAccount, json } from "../support/helpers";
import { actionOf } from "../../src/domain/audit/audit";
import { acceptInvitationOf, linkIn, mailTo, newBrowser, open, submit, uniqueAddress } from "../support/members";

type Entry = {
  action: string;
  actor: { type: string; id: string; name: string };
  target: { type: string; id: string | null } | null;
  via: string;
  ip: string | null;
  user_agent: string | null;
};
type Page = { data: Entry[]; has_more: boolean; next_cursor: string | null };

const log = async (key: string, query = "") => json<Page>(await call(`/api/v1/audit-log${query}`, { key }));

describe("the audit log", () => {
  it("names the invitation and the member's sign-ins, with who, on what and from where; reads are not logged", async () => {
    const account = await createAccount();
    const email = uniqueAddress("audited");
    const invited = await call("/api/v1/members", {
      key: account.api_key,
      body: { email, role: "developer" },
      headers: { "CF-Connecting-IP": "203.0.113.7", "User-Agent": "audit-test/1.0" },
    });
    const member = await json<{ id: string }>(invited);
    await call("/api/v1/members", { key: account.api_key });
    const browser = await acceptInvitationOf(email);
    // A second sign-in, by a link asked for on the sign-in page.
    const again = newBrowser();
    await open(again, "/dashboard/sign-in");
    await submit(again, "/dashboard/sign-in", { email });
    expect((await open(again, linkIn((await mailTo(email, 2)).text, "/dashboard/sign-in/link"))).status).toBe(303);
    // A change in the dashboard is the member's.
    expect((await browser.post("/dashboard/smtp-credentials", { name: "audited" })).status).toBeLessThan(400);

    const entries = (await log(account.api_key)).data;
    expect(entries.map((entry) => entry.action)).toEqual([
      "smtp_credential.created",
      "member.signed_in",
      "member.signed_in",
      "member.invited",
      "account.created",
    ]);
    const [created, , signedIn, invitation] = entries;
    expect(invitation).toMatchObject({
      actor: { type: "api_key", name: expect.stringMatching(/^Default \(sk_live_/) },
      target: { type: "member", id: member.id },
      via: "api",
      ip: "203.0.113.7",
      user_agent: "audit-test/1.0",
    });
    expect(signedIn).toMatchObject({
      actor: { type: "member", id: member.id, name: email },
      target: { type: "member", id: member.id },
      via: "dashboard",
    });
    expect(created).toMatchObject({ actor: { type: "member", name: email }, target: { type: "smtp_credential" } });

    const filtered = await log(account.api_key, `?actor=${encodeURIComponent(email)}&action=member.signed_in&limit=1`);
    expect(filtered.data).toHaveLength(1);
    expect(filtered.has_more).toBe(true);
    const next = await log(account.api_key, `?actor=${encodeURIComponent(email)}&action=member.signed_in&limit=1&cursor=${filtered.next_cursor}`);
    expect(next.data).toHaveLength(1);
    expect(next.has_more).toBe(false);
    expect((await log(account.api_key, "?to=2000-01-01")).data).toEqual([]);
    expect((await call("/api/v1/audit-log?from=yesterday", { key: account.api_key })).status).toBe(422);
    // The dashboard page shows it to the account's people who may see it.
    expect((await browser.get("/dashboard/audit-log")).status).toBe(403);
  });

  it("records the operator's account and its owner's invitation, and a refused change not at all", async () => {
    const owner = uniqueAddress("opowner");
    const account = await createAccount({ owner_email: owner });
    expect((await call("/api/v1/domains", { key: account.api_key, body: { name: "not a domain" } })).status).toBe(422);
    const entries = (await log(account.api_key)).data;
    expect(entries.map((entry) => [entry.action, entry.actor.type, entry.via]).sort()).toEqual([
      ["account.created", "operator", "operator"],
      ["member.invited", "operator", "operator"],
    ]);
    const ownerBrowser = await acceptInvitationOf(owner);
    const page = await ownerBrowser.get("/dashboard/audit-log");
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("member.signed_in");
  });

  it("names actions from the routes, one vocabulary for the API and the dashboard", () => {
    expect(actionOf("POST", "/campaigns/{id}/send")).toBe("campaign.sent");
    expect(actionOf("DELETE", "/api-keys/{id}")).toBe("api_key.revoked");
    expect(actionOf("POST", "/api-keys/:id/revoke")).toBe("api_key.revoked");
    expect(actionOf("POST", "/domains")).toBe("domain.added");
    expect(actionOf("PUT", "/domains/{id}/warmup")).toBe(actionOf("POST", "/domains/:id/warmup"));
    expect(actionOf("DELETE", "/lists/{id}/contacts/{contact_id}")).toBe("list.contact_removed");
    expect(actionOf("POST", "/contacts/lists/:id")).toBe("list.updated");
    expect(actionOf("PATCH", "/members/{id}")).toBe("member.role_changed");
  });
});
