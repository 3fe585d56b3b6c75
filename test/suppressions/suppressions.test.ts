import { describe, expect, it } from "vitest";
import { normalizeSuppressionEmail, suppressionStatements } from "../../src/domain/suppressions/suppressions";
import { call, createAccount, createKey, d1Of, dbOf, json } from "../support/helpers";
import { createContact, type Contact, type ErrorBody } from "../support/contacts";

type Suppression = { email: string; reason: string; scope: string; source_message_id: string | null; created_at: string };

describe("the suppression list", () => {
  it("stores a contact of a suppressed address as unsubscribed", async () => {
    const account = await createAccount();
    const added = await call("/api/v1/suppressions", { key: account.api_key, body: { email: " Blocked@Example.com ", reason: "bounce" } });
    expect(added.status).toBe(201);
    expect(await json<Suppression>(added)).toMatchObject({ email: "blocked@example.com", reason: "bounce", source_message_id: null });

    const contact = await createContact(account.api_key, { email: "BLOCKED@example.com", first_name: "B" });
    expect(contact.status).toBe("unsubscribed");
  });

  it("suppressing an existing contact's address flips it (bounce → bounced), whatever the case of the local part", async () => {
    const account = await createAccount();
    const contact = await createContact(account.api_key, { email: "Flip.Me@example.com" });
    expect(contact.status).toBe("subscribed");
    const response = await call("/api/v1/suppressions", { key: account.api_key, body: { email: "flip.me@EXAMPLE.com" } });
    expect(response.status).toBe(201);
    expect(await json<Contact>(await call(`/api/v1/contacts/${contact.id}`, { key: account.api_key }))).toMatchObject({ status: "unsubscribed" });

    const bounced = await createContact(account.api_key, { email: "bounce@example.com" });
    await d1Of(account).batch(
      suppressionStatements(dbOf(account), {
        accountId: account.id,
        email: "Bounce@example.com",
        reason: "bounce",
        scope: "all",
        sourceMessageId: "msg_1",
      }),
    );
    expect(await json<Contact>(await call(`/api/v1/contacts/${bounced.id}`, { key: account.api_key }))).toMatchObject({ status: "bounced" });
    // A later, weaker reason does not hide the bounce; a complaint is stronger.
    await d1Of(account).batch(
      suppressionStatements(dbOf(account), { accountId: account.id, email: "bounce@example.com", reason: "unsubscribe", scope: "broadcast" }),
    );
    expect(await json<Contact>(await call(`/api/v1/contacts/${bounced.id}`, { key: account.api_key }))).toMatchObject({ status: "bounced" });
    await d1Of(account).batch(
      suppressionStatements(dbOf(account), { accountId: account.id, email: "bounce@example.com", reason: "complaint", scope: "all" }),
    );
    expect(await json<Contact>(await call(`/api/v1/contacts/${bounced.id}`, { key: account.api_key }))).toMatchObject({ status: "complained" });
    // The first entry of each scope is kept.
    const entry = await json<{ data: Suppression[] }>(
      await call("/api/v1/suppressions?email=BOUNCE%40example.com&scope=all", { key: account.api_key }),
    );
    expect(entry.data).toEqual([
      expect.objectContaining({ email: "bounce@example.com", reason: "bounce", scope: "all", source_message_id: "msg_1" }),
    ]);
  });

  it("is idempotent per scope: the same address again in that scope answers 200 with the first entry", async () => {
    const account = await createAccount();
    const first = await call("/api/v1/suppressions", { key: account.api_key, body: { email: "twice@example.com", reason: "unsubscribe" } });
    expect(first.status).toBe(201);
    const firstEntry = await json<Suppression>(first);
    expect(firstEntry).toMatchObject({ scope: "broadcast" });
    const second = await call("/api/v1/suppressions", { key: account.api_key, body: { email: "TWICE@example.com", scope: "broadcast" } });
    expect(second.status).toBe(200);
    expect(await json<Suppression>(second)).toEqual(firstEntry);
    // Another scope is another entry: a manual one keeps every stream away by default.
    const manual = await call("/api/v1/suppressions", { key: account.api_key, body: { email: "twice@example.com" } });
    expect(manual.status).toBe(201);
    expect(await json<Suppression>(manual)).toMatchObject({ reason: "manual", scope: "all" });
  });

  it("DELETE of a contact keeps its suppression", async () => {
    const account = await createAccount();
    const contact = await createContact(account.api_key, { email: "erase@example.com" });
    await call("/api/v1/suppressions", { key: account.api_key, body: { email: "erase@example.com", reason: "complaint" } });
    expect((await call(`/api/v1/contacts/${contact.id}`, { key: account.api_key, method: "DELETE" })).status).toBe(200);
    const list = await json<{ data: Suppression[] }>(await call("/api/v1/suppressions?email=erase%40example.com", { key: account.api_key }));
    expect(list.data).toEqual([expect.objectContaining({ email: "erase@example.com", reason: "complaint", scope: "all" })]);
  });

  it("DELETE /suppressions/{email} removes an entry, 404 when absent; contacts keep their status", async () => {
    const account = await createAccount();
    const contact = await createContact(account.api_key, { email: "back@example.com" });
    await call("/api/v1/suppressions", { key: account.api_key, body: { email: "back@example.com" } });
    const removed = await call(`/api/v1/suppressions/${encodeURIComponent("Back@example.com")}`, { key: account.api_key, method: "DELETE" });
    expect(removed.status).toBe(200);
    expect(await json(removed)).toMatchObject({ email: "back@example.com", deleted: true });
    expect((await call("/api/v1/suppressions/back%40example.com", { key: account.api_key, method: "DELETE" })).status).toBe(404);
    expect(await json<Contact>(await call(`/api/v1/contacts/${contact.id}`, { key: account.api_key }))).toMatchObject({ status: "unsubscribed" });
    const resubscribed = await call(`/api/v1/contacts/${contact.id}`, { key: account.api_key, method: "PATCH", body: { status: "subscribed" } });
    expect(await json<Contact>(resubscribed)).toMatchObject({ status: "subscribed" });
  });

  it("paginates newest first, also through addresses with a `|`", async () => {
    const account = await createAccount();
    const emails = ["a|1@example.com", "b@example.com", "c|3@example.com", "d@example.com", "e@example.com"];
    for (const email of emails)
      await d1Of(account).batch(suppressionStatements(dbOf(account), { accountId: account.id, email, reason: "manual", scope: "all" }));
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { data: Suppression[]; next_cursor: string | null } = await json(
        await call(`/api/v1/suppressions?limit=2${cursor ? `&cursor=${cursor}` : ""}`, { key: account.api_key }),
      );
      seen.push(...page.data.map((entry) => entry.email));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen.sort()).toEqual(emails.sort());
  });

  it("needs the send scope, is per account, and refuses bad input", async () => {
    const account = await createAccount();
    const other = await createAccount();
    const contactsOnly = await createKey(account.api_key, { name: "contacts", scopes: ["contacts"] });
    expect((await call("/api/v1/suppressions", { key: contactsOnly.key, body: { email: "x@example.com" } })).status).toBe(403);
    const sendOnly = await createKey(account.api_key, { name: "send", scopes: ["send"] });
    expect((await call("/api/v1/suppressions", { key: sendOnly.key, body: { email: "mine@example.com" } })).status).toBe(201);
    expect((await json<{ data: Suppression[] }>(await call("/api/v1/suppressions", { key: other.api_key }))).data).toEqual([]);
    expect((await call("/api/v1/suppressions/mine%40example.com", { key: other.api_key, method: "DELETE" })).status).toBe(404);

    for (const body of [{ email: "nope" }, { email: "a@example.com", reason: "dislike" }, { email: "a@example.com", note: "x" }]) {
      const response = await call("/api/v1/suppressions", { key: account.api_key, body });
      expect(response.status).toBe(422);
      expect((await json<ErrorBody>(response)).code).toBe("validation_failed");
    }
  });
});

describe("the sending pipeline's contract", () => {
  it("normalizes by trimming and lower-casing the whole address (IDN domains in punycode)", () => {
    expect(normalizeSuppressionEmail("  John.Doe+Tag@Example.COM ")).toBe("john.doe+tag@example.com");
    expect(normalizeSuppressionEmail("user@Bücher.de")).toBe("user@xn--bcher-kva.de");
    expect(normalizeSuppressionEmail("Not An Address")).toBe("not an address");
  });
});
