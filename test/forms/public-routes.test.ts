// The public addresses of forms and automations reach the account database they are in: the addresses the API gives
// name it (a tag), and addresses without one (made before account databases, or typed from the id) or naming another
// database (the account moved since) still work, by looking in the other databases.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { databaseTag } from "../../src/db/client";
import { audienceOf, campaignAccount } from "../support/campaigns";
import { clientAddress } from "../support/dashboard";
import { createdIn, lastAccountDatabase, otherAccountDatabase } from "../support/databases";
import { call, createAccount, json } from "../support/helpers";
import { eventually } from "../support/sending";

const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;

const post = (path: string, body: Record<string, string>) =>
  exports.default.fetch(
    new Request(`http://localhost${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json", "CF-Connecting-IP": clientAddress() },
      body: JSON.stringify(body),
    }),
  );

describe("a form of an account in the last account database", () => {
  it("its subscribe_url names the database; that address, the bare form id and a stale tag all sign up", async () => {
    const { account, key } = await createdIn(lastAccountDatabase(), async () => {
      const made = await campaignAccount();
      return { ...made, database: made.account.database };
    });
    const { list } = await audienceOf(key, 0);
    const created = await call("/api/v1/forms", { key, body: { name: "Footer", double_opt_in: false, lists: [list] } });
    expect(created.status).toBe(201);
    const form = await json<{ id: string; subscribe_url: string; html_snippet: string }>(created);
    const address = new URL(form.subscribe_url);
    expect(address.pathname).toBe(`/subscribe/${form.id}`);
    expect(address.searchParams.get("db")).toBe(databaseTag(account.database));
    expect(form.html_snippet).toContain(`action="${form.subscribe_url}"`);

    const stale = databaseTag(otherAccountDatabase(account.database));
    const paths = [`${address.pathname}${address.search}`, address.pathname, `${address.pathname}?db=${stale}`];
    for (const path of paths) {
      const email = rcpt("joined");
      const response = await post(path, { email });
      expect(response.status, path).toBe(202);
      const contacts = await json<{ data: { email: string; status: string; lists: string[] }[] }>(
        await call(`/api/v1/contacts?email=${encodeURIComponent(email)}`, { key }),
      );
      expect(contacts.data, path).toEqual([expect.objectContaining({ email, status: "subscribed", lists: [list] })]);
    }
    expect((await post(`/subscribe/frm_nothing?db=${databaseTag(account.database)}`, { email: rcpt("none") })).status).toBe(404);
  });
});

describe("an automation of an account in the last account database", () => {
  it("its private URL names the database; that URL, the bare path and a stale tag all start a run", async () => {
    const account = await createdIn(lastAccountDatabase(), () =>
      createAccount({ send_credits: 100, features: ["email_api", "automations", "campaigns"] }),
    );
    const key = account.api_key;
    const list = await json<{ id: string }>(await call("/api/v1/lists", { key, body: { name: "hooked" } }));
    const created = await call("/api/v1/automations", { key, body: { name: "Hook", steps: [{ type: "add_to_list", list_id: list.id }] } });
    expect(created.status).toBe(201);
    const automation = await json<{ id: string; private_url: string }>(created);
    const segment = new URL(automation.private_url).pathname.split("/").at(-1)!;
    const tag = databaseTag(account.database);
    expect(segment.startsWith(`${tag}.`)).toBe(true);
    const path = segment.slice(tag.length + 1);

    const stale = databaseTag(otherAccountDatabase(account.database));
    expect(stale).not.toBe("");
    for (const url of [segment, path, `${stale}.${path}`]) {
      const email = rcpt("hook");
      const response = await exports.default.fetch(new Request(`http://localhost/hooks/automations/${url}?email=${email}`));
      expect(response.status, url).toBe(202);
      const { run_id } = await json<{ run_id: string }>(response);
      // The run does what the automation says: the address ends up on the list.
      const run = await eventually(async () => {
        const current = await json<{ id: string; automation_id: string; status: string }>(await call(`/api/v1/automations/runs/${run_id}`, { key }));
        return current.status === "completed" ? current : undefined;
      });
      expect(run, url).toMatchObject({ id: run_id, automation_id: automation.id });
      const contact = await json<{ data: { lists: string[] }[] }>(await call(`/api/v1/contacts?email=${encodeURIComponent(email)}`, { key }));
      expect(
        contact.data.map((found) => found.lists),
        url,
      ).toEqual([[list.id]]);
    }
  });
});
