import { describe, expect, it } from "vitest";
import { call, createAccount, createKey, d1Of, json } from "../support/helpers";
import { createContact, createList, type Contact, type ErrorBody } from "../support/contacts";

describe("POST /contacts creates or updates by address", () => {
  it("creates a contact (201), then updates the same address given with an upper-cased domain (200)", async () => {
    const account = await createAccount();
    const first = await call("/api/v1/contacts", {
      key: account.api_key,
      body: { email: "  Jane.Doe@example.com ", first_name: "Jane", company: "Acme", custom_fields: { plan: "pro", seats: 3 } },
    });
    expect(first.status).toBe(201);
    const created = await json<Contact>(first);
    expect(created).toMatchObject({
      id: expect.stringMatching(/^con_/),
      email: "Jane.Doe@example.com",
      first_name: "Jane",
      last_name: null,
      company: "Acme",
      custom_fields: { plan: "pro", seats: 3 },
      status: "subscribed",
      lists: [],
    });

    const second = await call("/api/v1/contacts", { key: account.api_key, body: { email: "Jane.Doe@EXAMPLE.COM", last_name: "Doe" } });
    expect(second.status).toBe(200);
    const updated = await json<Contact>(second);
    expect(updated).toMatchObject({ id: created.id, email: "Jane.Doe@example.com", first_name: "Jane", last_name: "Doe", company: "Acme" });
    expect(updated.created_at).toBe(created.created_at);
    expect(updated.updated_at >= created.updated_at).toBe(true);

    const count = await d1Of(account).prepare("SELECT count(*) AS n FROM contacts WHERE account_id = ?").bind(account.id).first<{ n: number }>();
    expect(count?.n).toBe(1);
  });

  it("treats a different local-part case as the same contact, keeping the first spelling", async () => {
    const account = await createAccount();
    const lower = await createContact(account.api_key, { email: "sam@example.com" });
    const upper = await call("/api/v1/contacts", { key: account.api_key, body: { email: "SAM@example.com" } });
    expect(upper.status).toBe(200);
    expect(await json<Contact>(upper)).toMatchObject({ id: lower.id, email: "sam@example.com" });
  });

  it("merges custom fields on update, and null removes a key", async () => {
    const account = await createAccount();
    await createContact(account.api_key, { email: "merge@example.com", custom_fields: { plan: "free", seats: 1, beta: true } });
    const response = await call("/api/v1/contacts", {
      key: account.api_key,
      body: { email: "merge@example.com", custom_fields: { plan: "pro", beta: null, region: "eu" } },
    });
    expect(response.status).toBe(200);
    expect((await json<Contact>(response)).custom_fields).toEqual({ plan: "pro", seats: 1, region: "eu" });
  });

  it("clears a text field given as null or empty, and leaves out fields alone", async () => {
    const account = await createAccount();
    await createContact(account.api_key, { email: "clear@example.com", first_name: "A", last_name: "B", phone: "+331" });
    const response = await call("/api/v1/contacts", { key: account.api_key, body: { email: "clear@example.com", first_name: null, last_name: "" } });
    expect(await json<Contact>(response)).toMatchObject({ first_name: null, last_name: null, phone: "+331" });
  });

  it("adds the contact to the given lists, keeping earlier memberships", async () => {
    const account = await createAccount();
    const news = await createList(account.api_key, "News");
    const promos = await createList(account.api_key, "Promos");
    const created = await createContact(account.api_key, { email: "lists@example.com", lists: [news.id] });
    expect(created.lists).toEqual([news.id]);
    const response = await call("/api/v1/contacts", { key: account.api_key, body: { email: "lists@example.com", lists: [promos.id, news.id] } });
    expect((await json<Contact>(response)).lists.sort()).toEqual([news.id, promos.id].sort());
  });
});

describe("reading, changing and deleting contacts", () => {
  it("GET /contacts?email= looks one contact up (domain without case), as a list of 0 or 1", async () => {
    const account = await createAccount();
    const contact = await createContact(account.api_key, { email: "find.me@example.com" });
    const found = await json<{ data: Contact[]; has_more: boolean }>(
      await call("/api/v1/contacts?email=find.me%40Example.COM", { key: account.api_key }),
    );
    expect(found).toEqual({ data: [expect.objectContaining({ id: contact.id })], has_more: false, next_cursor: null });
    const missing = await json<{ data: Contact[] }>(await call("/api/v1/contacts?email=nobody%40example.com", { key: account.api_key }));
    expect(missing.data).toEqual([]);
  });

  it("paginates newest first and filters by list, status and creation time", async () => {
    const account = await createAccount();
    const list = await createList(account.api_key);
    const emails = ["p1@example.com", "p2@example.com", "p3@example.com", "p4@example.com", "p5@example.com"];
    const created: Contact[] = [];
    for (const email of emails) created.push(await createContact(account.api_key, { email, ...(email < "p3" ? { lists: [list.id] } : {}) }));

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { data: Contact[]; has_more: boolean; next_cursor: string | null } = await json(
        await call(`/api/v1/contacts?limit=2${cursor ? `&cursor=${cursor}` : ""}`, { key: account.api_key }),
      );
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((contact) => contact.email));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toEqual([...emails].reverse());

    const inList = await json<{ data: Contact[] }>(await call(`/api/v1/contacts?list_id=${list.id}`, { key: account.api_key }));
    expect(inList.data.map((contact) => contact.email).sort()).toEqual(["p1@example.com", "p2@example.com"]);

    await call("/api/v1/suppressions", { key: account.api_key, body: { email: "p5@example.com" } });
    const unsubscribed = await json<{ data: Contact[] }>(await call("/api/v1/contacts?status=unsubscribed", { key: account.api_key }));
    expect(unsubscribed.data.map((contact) => contact.email)).toEqual(["p5@example.com"]);

    const after = await json<{ data: Contact[] }>(
      await call(`/api/v1/contacts?created_after=${encodeURIComponent(created[2]!.created_at)}`, { key: account.api_key }),
    );
    expect(after.data.every((contact) => contact.created_at > created[2]!.created_at)).toBe(true);
    expect(after.data.map((contact) => contact.email)).not.toContain("p3@example.com");
  });

  it("PATCH changes fields, merges custom fields, moves the address, and refuses a taken one (409)", async () => {
    const account = await createAccount();
    const contact = await createContact(account.api_key, { email: "old@example.com", custom_fields: { a: 1, b: 2 } });
    await createContact(account.api_key, { email: "taken@example.com" });
    const patched = await call(`/api/v1/contacts/${contact.id}`, {
      key: account.api_key,
      method: "PATCH",
      body: { email: "new@example.com", country: "FR", custom_fields: { b: null, c: "x" } },
    });
    expect(patched.status).toBe(200);
    expect(await json<Contact>(patched)).toMatchObject({ id: contact.id, email: "new@example.com", country: "FR", custom_fields: { a: 1, c: "x" } });

    const taken = await call(`/api/v1/contacts/${contact.id}`, { key: account.api_key, method: "PATCH", body: { email: "taken@EXAMPLE.com" } });
    expect(taken.status).toBe(409);
    expect((await json<ErrorBody>(taken)).code).toBe("conflict");
  });

  it("PATCH status unsubscribes and resubscribes, but cannot resubscribe a suppressed address", async () => {
    const account = await createAccount();
    const contact = await createContact(account.api_key, { email: "toggle@example.com" });
    const path = `/api/v1/contacts/${contact.id}`;
    expect(await json<Contact>(await call(path, { key: account.api_key, method: "PATCH", body: { status: "unsubscribed" } }))).toMatchObject({
      status: "unsubscribed",
    });
    expect(await json<Contact>(await call(path, { key: account.api_key, method: "PATCH", body: { status: "subscribed" } }))).toMatchObject({
      status: "subscribed",
    });
    await call("/api/v1/suppressions", { key: account.api_key, body: { email: "toggle@example.com" } });
    const refused = await call(path, { key: account.api_key, method: "PATCH", body: { status: "subscribed" } });
    expect(refused.status).toBe(422);
    expect((await json<ErrorBody>(refused)).errors).toHaveProperty("status");
  });

  it("DELETE removes the contact and its memberships", async () => {
    const account = await createAccount();
    const list = await createList(account.api_key);
    const contact = await createContact(account.api_key, { email: "gone@example.com", lists: [list.id] });
    const deleted = await call(`/api/v1/contacts/${contact.id}`, { key: account.api_key, method: "DELETE" });
    expect(deleted.status).toBe(200);
    expect(await json(deleted)).toEqual({ id: contact.id, deleted: true });
    expect((await call(`/api/v1/contacts/${contact.id}`, { key: account.api_key })).status).toBe(404);
    expect((await call(`/api/v1/contacts/${contact.id}`, { key: account.api_key, method: "DELETE" })).status).toBe(404);
    const members = await d1Of(account)
      .prepare("SELECT count(*) AS n FROM list_members WHERE contact_id = ?")
      .bind(contact.id)
      .first<{ n: number }>();
    expect(members?.n).toBe(0);
  });
});

describe("bad input", () => {
  it.each([
    ["a malformed email", { email: "not-an-email" }, "email"],
    ["an address with a space", { email: "jane doe@example.com" }, "email"],
    ["an unknown field", { email: "a@example.com", nickname: "J" }, "body"],
    ["a nested custom field", { email: "a@example.com", custom_fields: { address: { city: "Paris" } } }, "custom_fields.address"],
    ["an array custom field", { email: "a@example.com", custom_fields: { tags: ["a"] } }, "custom_fields.tags"],
    [
      "too many custom fields",
      { email: "a@example.com", custom_fields: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i])) },
      "custom_fields",
    ],
    [
      "oversized custom fields",
      {
        email: "a@example.com",
        custom_fields: { a: "x".repeat(2000), b: "x".repeat(2000), c: "x".repeat(2000), d: "x".repeat(2000), e: "x".repeat(2000) },
      },
      "custom_fields",
    ],
    ["a too long first name", { email: "a@example.com", first_name: "x".repeat(300) }, "first_name"],
  ])("refuses %s with 422 naming the field", async (_name, body, field) => {
    const account = await createAccount();
    const response = await call("/api/v1/contacts", { key: account.api_key, body });
    expect(response.status).toBe(422);
    const error = await json<ErrorBody>(response);
    expect(error.code).toBe("validation_failed");
    expect(Object.keys(error.errors ?? {})).toContain(field);
  });

  it("refuses custom fields whose merge with the stored ones would exceed the cap", async () => {
    const account = await createAccount();
    await createContact(account.api_key, {
      email: "cap@example.com",
      custom_fields: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`a${i}`, i])),
    });
    const response = await call("/api/v1/contacts", {
      key: account.api_key,
      body: { email: "cap@example.com", custom_fields: Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`b${i}`, i])) },
    });
    expect(response.status).toBe(422);
    expect((await json<ErrorBody>(response)).errors?.custom_fields?.[0]).toContain("50");
  });

  it("refuses unknown list ids and another account's list with 422", async () => {
    const account = await createAccount();
    const other = await createAccount();
    const foreign = await createList(other.api_key);
    const response = await call("/api/v1/contacts", { key: account.api_key, body: { email: "l@example.com", lists: ["lst_nope", foreign.id] } });
    expect(response.status).toBe(422);
    expect(Object.keys((await json<ErrorBody>(response)).errors ?? {})).toEqual(["lists.0", "lists.1"]);
    const none = await call("/api/v1/contacts?email=l%40example.com", { key: account.api_key });
    expect((await json<{ data: Contact[] }>(none)).data).toEqual([]);
  });

  it("refuses a malformed lookup address and bad filters with 422", async () => {
    const account = await createAccount();
    expect((await call("/api/v1/contacts?email=nope", { key: account.api_key })).status).toBe(422);
    expect((await call("/api/v1/contacts?status=asleep", { key: account.api_key })).status).toBe(422);
    expect((await call("/api/v1/contacts?created_after=yesterday", { key: account.api_key })).status).toBe(422);
    expect((await call("/api/v1/contacts?cursor=garbage", { key: account.api_key })).status).toBe(422);
  });
});

describe("isolation and scopes", () => {
  it("another account's key gets 404 for every contact and list id of this account", async () => {
    const owner = await createAccount();
    const stranger = await createAccount();
    const list = await createList(owner.api_key);
    const contact = await createContact(owner.api_key, { email: "private@example.com", lists: [list.id] });
    const key = stranger.api_key;
    expect((await call(`/api/v1/contacts/${contact.id}`, { key })).status).toBe(404);
    expect((await call(`/api/v1/contacts/${contact.id}`, { key, method: "PATCH", body: { first_name: "x" } })).status).toBe(404);
    expect((await call(`/api/v1/contacts/${contact.id}`, { key, method: "DELETE" })).status).toBe(404);
    expect((await call(`/api/v1/lists/${list.id}`, { key })).status).toBe(404);
    expect((await call(`/api/v1/lists/${list.id}`, { key, method: "PATCH", body: { name: "x" } })).status).toBe(404);
    expect((await call(`/api/v1/lists/${list.id}/contacts`, { key, body: { contact_ids: [contact.id] } })).status).toBe(404);
    expect((await call(`/api/v1/lists/${list.id}/contacts/${contact.id}`, { key, method: "DELETE" })).status).toBe(404);
    expect((await call(`/api/v1/lists/${list.id}`, { key, method: "DELETE" })).status).toBe(404);
    expect((await call(`/api/v1/contacts?list_id=${list.id}`, { key })).status).toBe(404);
    expect((await json<{ data: Contact[] }>(await call("/api/v1/contacts?email=private%40example.com", { key }))).data).toEqual([]);
    // Nothing of the owner's changed.
    expect(await json<Contact>(await call(`/api/v1/contacts/${contact.id}`, { key: owner.api_key }))).toMatchObject({
      first_name: null,
      lists: [list.id],
    });
  });

  it("needs the contacts scope", async () => {
    const account = await createAccount();
    const sendOnly = await createKey(account.api_key, { name: "send", scopes: ["send"] });
    expect((await call("/api/v1/contacts", { key: sendOnly.key })).status).toBe(403);
    expect((await call("/api/v1/lists", { key: sendOnly.key })).status).toBe(403);
    const contactsOnly = await createKey(account.api_key, { name: "contacts", scopes: ["contacts"] });
    expect((await call("/api/v1/contacts", { key: contactsOnly.key })).status).toBe(200);
    expect((await call("/api/v1/suppressions", { key: contactsOnly.key })).status).toBe(403);
  });
});
