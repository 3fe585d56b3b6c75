import { describe, expect, it } from "vitest";
import { call, createAccount, json } from "../support/helpers";
import { createContact, createList, type Contact, type ErrorBody } from "../support/contacts";

type List = { id: string; name: string; description: string | null; contact_count: number; subscriber_count: number };

describe("lists", () => {
  it("creates, reads, renames and lists lists with their counts", async () => {
    const account = await createAccount();
    const created = await call("/api/v1/lists", { key: account.api_key, body: { name: " Customers ", description: "Paying" } });
    expect(created.status).toBe(201);
    const list = await json<List>(created);
    expect(list).toMatchObject({
      id: expect.stringMatching(/^lst_/),
      name: "Customers",
      description: "Paying",
      contact_count: 0,
      subscriber_count: 0,
    });
    const empty = await createList(account.api_key, "Empty");

    await createContact(account.api_key, { email: "c1@example.com", lists: [list.id] });
    await createContact(account.api_key, { email: "c2@example.com", lists: [list.id] });
    await createContact(account.api_key, { email: "c3@example.com", lists: [list.id] });
    await call("/api/v1/suppressions", { key: account.api_key, body: { email: "c3@example.com", reason: "unsubscribe" } });

    const page = await json<{ data: List[]; has_more: boolean }>(await call("/api/v1/lists", { key: account.api_key }));
    expect(page.data.map((entry) => [entry.name, entry.contact_count, entry.subscriber_count])).toEqual([
      ["Empty", 0, 0],
      ["Customers", 3, 2],
    ]);

    const renamed = await call(`/api/v1/lists/${list.id}`, { key: account.api_key, method: "PATCH", body: { name: "Clients", description: null } });
    expect(await json<List>(renamed)).toMatchObject({ name: "Clients", description: null, contact_count: 3 });
    expect(await json<List>(await call(`/api/v1/lists/${empty.id}`, { key: account.api_key }))).toMatchObject({ name: "Empty" });
  });

  it("adds members by address: creates new contacts, reports what was already there, leaves existing contacts alone", async () => {
    const account = await createAccount();
    const list = await createList(account.api_key);
    const existing = await createContact(account.api_key, { email: "known@example.com", first_name: "Known", lists: [list.id] });
    const other = await createContact(account.api_key, { email: "other@example.com" });
    await call("/api/v1/suppressions", { key: account.api_key, body: { email: "blocked@example.com", reason: "complaint" } });

    const response = await call(`/api/v1/lists/${list.id}/contacts`, {
      key: account.api_key,
      body: { emails: ["known@EXAMPLE.com", "other@example.com", "fresh@example.com", "Blocked@example.com", "fresh@example.com"] },
    });
    expect(response.status).toBe(200);
    const result = await json<{ added: string[]; already: string[]; unknown: string[]; created: string[] }>(response);
    expect(result.already).toEqual([existing.id]);
    expect(result.added).toContain(other.id);
    expect(result.added).toHaveLength(3);
    expect(result.created).toHaveLength(2);
    expect(result.unknown).toEqual([]);

    const members = await json<{ data: Contact[] }>(await call(`/api/v1/contacts?list_id=${list.id}`, { key: account.api_key }));
    expect(members.data.map((contact) => [contact.email, contact.status]).sort()).toEqual([
      ["Blocked@example.com", "unsubscribed"],
      ["fresh@example.com", "subscribed"],
      ["known@example.com", "subscribed"],
      ["other@example.com", "subscribed"],
    ]);
    expect(members.data.find((contact) => contact.id === existing.id)?.first_name).toBe("Known");
  });

  it("adds members by id, reporting unknown and other accounts' ids, and removes one", async () => {
    const account = await createAccount();
    const stranger = await createAccount();
    const list = await createList(account.api_key);
    const mine = await createContact(account.api_key, { email: "mine@example.com" });
    const theirs = await createContact(stranger.api_key, { email: "theirs@example.com" });
    const first = await json<Record<string, string[]>>(
      await call(`/api/v1/lists/${list.id}/contacts`, { key: account.api_key, body: { contact_ids: [mine.id, theirs.id, "con_nope"] } }),
    );
    expect(first).toEqual({ added: [mine.id], already: [], unknown: [theirs.id, "con_nope"], created: [] });
    const again = await json<Record<string, string[]>>(
      await call(`/api/v1/lists/${list.id}/contacts`, { key: account.api_key, body: { contact_ids: [mine.id] } }),
    );
    expect(again).toMatchObject({ added: [], already: [mine.id] });

    const removed = await call(`/api/v1/lists/${list.id}/contacts/${mine.id}`, { key: account.api_key, method: "DELETE" });
    expect(removed.status).toBe(200);
    expect((await call(`/api/v1/lists/${list.id}/contacts/${mine.id}`, { key: account.api_key, method: "DELETE" })).status).toBe(404);
    expect((await json<Contact>(await call(`/api/v1/contacts/${mine.id}`, { key: account.api_key }))).lists).toEqual([]);
  });

  it("DELETE removes the list and its memberships, not the contacts", async () => {
    const account = await createAccount();
    const list = await createList(account.api_key);
    const contact = await createContact(account.api_key, { email: "stays@example.com", lists: [list.id] });
    expect((await call(`/api/v1/lists/${list.id}`, { key: account.api_key, method: "DELETE" })).status).toBe(200);
    expect((await call(`/api/v1/lists/${list.id}`, { key: account.api_key })).status).toBe(404);
    expect(await json<Contact>(await call(`/api/v1/contacts/${contact.id}`, { key: account.api_key }))).toMatchObject({ id: contact.id, lists: [] });
  });

  it("refuses bad list input with 422", async () => {
    const account = await createAccount();
    const list = await createList(account.api_key);
    for (const body of [{}, { name: "" }, { name: "x", color: "red" }]) {
      expect((await call("/api/v1/lists", { key: account.api_key, body })).status).toBe(422);
    }
    expect((await call(`/api/v1/lists/${list.id}`, { key: account.api_key, method: "PATCH", body: {} })).status).toBe(422);
    const both = await call(`/api/v1/lists/${list.id}/contacts`, {
      key: account.api_key,
      body: { emails: ["a@example.com"], contact_ids: ["con_x"] },
    });
    expect(both.status).toBe(422);
    const bad = await call(`/api/v1/lists/${list.id}/contacts`, { key: account.api_key, body: { emails: ["ok@example.com", "broken"] } });
    expect(bad.status).toBe(422);
    expect(Object.keys((await json<ErrorBody>(bad)).errors ?? {})).toEqual(["emails.1"]);
    expect((await json<{ data: Contact[] }>(await call("/api/v1/contacts?email=ok%40example.com", { key: account.api_key }))).data).toEqual([]);
  });
});
