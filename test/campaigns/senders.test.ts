import { describe, expect, it } from "vitest";
import { call, createAccount, createKey, json } from "../support/helpers";
import type { ErrorBody } from "../support/contacts";
import { uniqueDomain, verifiedDomain } from "../support/sending";

type Sender = { id: string; name: string; email: string; reply_to: string | null; domain_id: string; created_at: string; updated_at: string };

async function createSender(key: string, body: Record<string, unknown>): Promise<Sender> {
  const response = await call("/api/v1/senders", { key, body });
  expect(response.status, await response.clone().text()).toBe(201);
  return json<Sender>(response);
}

describe("senders", () => {
  it("creates, reads, lists, changes and deletes a sender on a verified domain", async () => {
    const account = await createAccount();
    const domain = await verifiedDomain(account.api_key);

    const sender = await createSender(account.api_key, {
      name: " Acme News ",
      email: `News@${domain.name.toUpperCase()}`,
      reply_to: "support@example.org",
    });
    expect(sender).toMatchObject({
      id: expect.stringMatching(/^snd_/),
      name: "Acme News",
      // The domain is stored lower-cased (as the domain record is); the local part keeps its case.
      email: `News@${domain.name}`,
      reply_to: "support@example.org",
      domain_id: domain.id,
    });
    const second = await createSender(account.api_key, { name: "Billing", email: `billing@${domain.name}` });
    expect(second.reply_to).toBeNull();

    expect(await json<Sender>(await call(`/api/v1/senders/${sender.id}`, { key: account.api_key }))).toEqual(sender);
    const firstPage = await json<{ data: Sender[]; has_more: boolean; next_cursor: string | null }>(
      await call("/api/v1/senders?limit=1", { key: account.api_key }),
    );
    expect(firstPage.data.map((entry) => entry.name)).toEqual(["Billing"]);
    expect(firstPage.has_more).toBe(true);
    const secondPage = await json<{ data: Sender[]; has_more: boolean }>(
      await call(`/api/v1/senders?limit=1&cursor=${firstPage.next_cursor}`, { key: account.api_key }),
    );
    expect(secondPage).toMatchObject({ data: [{ id: sender.id }], has_more: false });

    const changed = await call(`/api/v1/senders/${sender.id}`, {
      key: account.api_key,
      method: "PATCH",
      body: { name: "Acme Weekly", reply_to: null },
    });
    expect(changed.status).toBe(200);
    expect(await json<Sender>(changed)).toMatchObject({ name: "Acme Weekly", email: `News@${domain.name}`, reply_to: null, domain_id: domain.id });

    const deleted = await call(`/api/v1/senders/${sender.id}`, { key: account.api_key, method: "DELETE" });
    expect(await json(deleted)).toEqual({ id: sender.id, deleted: true });
    expect((await call(`/api/v1/senders/${sender.id}`, { key: account.api_key })).status).toBe(404);
    expect((await call(`/api/v1/senders/${sender.id}`, { key: account.api_key, method: "DELETE" })).status).toBe(404);
  });

  it("refuses an address on a domain that is not verified, or not the account's, with errors.email", async () => {
    const account = await createAccount();
    const other = await createAccount({ name: "Other" });
    const pending = await call("/api/v1/domains", { key: account.api_key, body: { name: uniqueDomain("pending") } });
    const pendingName = (await json<{ name: string }>(pending)).name;
    const othersDomain = await verifiedDomain(other.api_key);

    for (const email of [`news@${pendingName}`, `news@${othersDomain.name}`, "news@gmail.com"]) {
      const response = await call("/api/v1/senders", { key: account.api_key, body: { name: "News", email } });
      expect(response.status).toBe(422);
      const body = await json<ErrorBody>(response);
      expect(body.code).toBe("validation_failed");
      expect(Object.keys(body.errors ?? {})).toEqual(["email"]);
      expect(body.errors?.email).toEqual([
        `${email.split("@")[1]} is not a verified sending domain of this account; add and verify it first (Domains in the dashboard, or POST /api/v1/domains then POST /api/v1/domains/{id}/verify)`,
      ]);
    }
    expect((await json<{ data: unknown[] }>(await call("/api/v1/senders", { key: account.api_key }))).data).toEqual([]);
  });

  it("checks the fields: a bad address, a name with a line break, unknown fields, all at once", async () => {
    const account = await createAccount();
    const response = await call("/api/v1/senders", {
      key: account.api_key,
      body: { name: "News\r\nBcc: x@example.com", email: "not-an-address", reply_to: "also bad", extra: 1 },
    });
    expect(response.status).toBe(422);
    const body = await json<ErrorBody>(response);
    expect(Object.keys(body.errors ?? {}).sort()).toEqual(["body", "email", "name", "reply_to"]);
    expect(body.errors?.email).toEqual(["Not a valid email address (missing at)"]);
  });

  it("re-checks the domain on PATCH: moving to an unverified domain is a 422 and changes nothing", async () => {
    const account = await createAccount();
    const domain = await verifiedDomain(account.api_key);
    const second = await verifiedDomain(account.api_key);
    const sender = await createSender(account.api_key, { name: "News", email: `news@${domain.name}` });

    const refused = await call(`/api/v1/senders/${sender.id}`, {
      key: account.api_key,
      method: "PATCH",
      body: { name: "Other", email: "news@unverified.example" },
    });
    expect(refused.status).toBe(422);
    expect((await json<ErrorBody>(refused)).errors?.email?.[0]).toContain("unverified.example is not a verified sending domain");
    expect(await json<Sender>(await call(`/api/v1/senders/${sender.id}`, { key: account.api_key }))).toEqual(sender);

    const moved = await json<Sender>(
      await call(`/api/v1/senders/${sender.id}`, { key: account.api_key, method: "PATCH", body: { email: `hello@${second.name}` } }),
    );
    expect(moved).toMatchObject({ email: `hello@${second.name}`, domain_id: second.id, name: "News" });

    // The domain is deleted: even a name change is refused until the address is on a verified domain again.
    expect((await call(`/api/v1/domains/${second.id}`, { key: account.api_key, method: "DELETE" })).status).toBe(200);
    const stale = await call(`/api/v1/senders/${sender.id}`, { key: account.api_key, method: "PATCH", body: { name: "Renamed" } });
    expect(stale.status).toBe(422);
    expect((await json<ErrorBody>(stale)).errors?.email?.[0]).toContain(`${second.name} is not a verified sending domain`);
  });

  it("answers 404 for another account's sender, on every method", async () => {
    const owner = await createAccount();
    const intruder = await createAccount({ name: "Intruder" });
    const domain = await verifiedDomain(owner.api_key);
    const intruderDomain = await verifiedDomain(intruder.api_key);
    const sender = await createSender(owner.api_key, { name: "News", email: `news@${domain.name}` });

    expect((await call(`/api/v1/senders/${sender.id}`, { key: intruder.api_key })).status).toBe(404);
    const patch = await call(`/api/v1/senders/${sender.id}`, { key: intruder.api_key, method: "PATCH", body: { email: `x@${intruderDomain.name}` } });
    expect(patch.status).toBe(404);
    expect(await json<ErrorBody>(patch)).toEqual({ code: "not_found", message: "Sender not found" });
    expect((await call(`/api/v1/senders/${sender.id}`, { key: intruder.api_key, method: "DELETE" })).status).toBe(404);
    expect((await json<{ data: unknown[] }>(await call("/api/v1/senders", { key: intruder.api_key }))).data).toEqual([]);
    expect(await json<Sender>(await call(`/api/v1/senders/${sender.id}`, { key: owner.api_key }))).toEqual(sender);
  });

  it("needs the campaigns scope", async () => {
    const account = await createAccount();
    const domain = await verifiedDomain(account.api_key);
    const sendOnly = await createKey(account.api_key, { name: "send only", scopes: ["send"] });
    const campaigns = await createKey(account.api_key, { name: "campaigns", scopes: ["campaigns"] });

    const refused = await call("/api/v1/senders", { key: sendOnly.key, body: { name: "News", email: `news@${domain.name}` } });
    expect(refused.status).toBe(403);
    expect(await json<ErrorBody>(refused)).toEqual({ code: "scope_missing", message: "This API key lacks the `campaigns` scope" });
    expect((await call("/api/v1/senders", { key: sendOnly.key })).status).toBe(403);
    await createSender(campaigns.key, { name: "News", email: `news@${domain.name}` });
  });
});
