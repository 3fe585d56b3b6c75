import { count, eq, sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { statement } from "../../src/db/client";
import { contacts, listMembers } from "../../src/db/schema";
import { segmentWhere, type SegmentCondition } from "../../src/domain/segments/segments";
import { call, createAccount, createKey, d1Of, dbOf, json, type CreatedAccount } from "../support/helpers";
import { createContact, createList, createTopic, type Contact, type ErrorBody } from "../support/contacts";

type Segment = { id: string; name: string; match: "all" | "any"; conditions: SegmentCondition[]; created_at: string; updated_at: string };
type SegmentCount = { count: number; contacts?: Contact[] };

async function createSegment(key: string, body: Record<string, unknown>): Promise<Segment> {
  const response = await call("/api/v1/segments", { key, body });
  expect(response.status, await response.clone().text()).toBe(201);
  return json<Segment>(response);
}

async function countOf(key: string, segmentId: string, preview = true): Promise<SegmentCount> {
  const response = await call(`/api/v1/segments/${segmentId}/count${preview ? "?preview=1" : ""}`, { key });
  expect(response.status, await response.clone().text()).toBe(200);
  return json<SegmentCount>(response);
}

const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();

async function backdate(account: CreatedAccount, contactId: string, createdAt: string) {
  await d1Of(account).prepare("UPDATE contacts SET created_at = ? WHERE id = ?").bind(createdAt, contactId).run();
}

describe("segment conditions against real contacts", () => {
  let account: CreatedAccount;
  let listA: string;
  let listB: string;
  /** Contact id → short name, for readable expectations. */
  const names = new Map<string, string>();

  beforeAll(async () => {
    // Every case is two requests (create, count): far more than the default 60 a minute.
    account = await createAccount({ rate_limit_per_minute: 100_000 });
    listA = (await createList(account.api_key, "A")).id;
    listB = (await createList(account.api_key, "B")).id;
    const add = async (name: string, body: Record<string, unknown>, createdAt?: string) => {
      const contact = await createContact(account.api_key, body);
      names.set(contact.id, name);
      if (createdAt) await backdate(account, contact.id, createdAt);
      return contact;
    };
    await add(
      "ann",
      {
        email: "ann@example.com",
        first_name: "Ann",
        last_name: "Lee",
        company: "Acme",
        phone: "+33 1 23",
        country: "FR",
        custom_fields: { plan: "pro", seats: 12, vip: true, renewal: "2020-03-01", code: "50%_off" },
        lists: [listA],
      },
      "2025-01-15T00:00:00.000Z",
    );
    // Custom fields as a CSV import stores them: strings only.
    await add(
      "bob",
      {
        email: "bob@shop.example",
        first_name: "Bob",
        company: "ACME Corp",
        country: "DE",
        custom_fields: { plan: "free", seats: "3", vip: "false", code: "50XYoff" },
        lists: [listB],
      },
      "2025-06-01T00:00:00.000Z",
    );
    await add("carol", {
      email: "Carol@Example.com",
      company: "Beta",
      country: "fr",
      custom_fields: { plan: "Pro", seats: "12.5", renewal: daysAgo(2) },
      lists: [listA, listB],
    });
    await add("dan", { email: "dan@other.test", first_name: "Dan", custom_fields: { plan: "enterprise", seats: "abc", vip: false } }, daysAgo(10));
    await add("frank", { email: "frank_x@example.com", first_name: "Frank" });
    await add("franky", { email: "frankyx@example.com", first_name: "Franky" });

    // Not in any audience: unsubscribed, and suppressed. Both match many conditions below.
    const eve = await add("eve", {
      email: "eve@example.com",
      first_name: "Eve",
      company: "Acme",
      custom_fields: { plan: "pro", seats: 50 },
      lists: [listA],
    });
    expect((await call(`/api/v1/contacts/${eve.id}`, { key: account.api_key, method: "PATCH", body: { status: "unsubscribed" } })).status).toBe(200);
    await add("gus", { email: "gus@example.com", first_name: "Gus", company: "Acme", custom_fields: { plan: "pro", seats: 50 }, lists: [listA] });
    expect((await call("/api/v1/suppressions", { key: account.api_key, body: { email: "GUS@example.com", reason: "complaint" } })).status).toBe(201);
  });

  /** The audience of a segment as a user sees it: count and preview, which must agree for these small audiences. */
  async function audience(conditions: SegmentCondition[], match: "all" | "any" = "all"): Promise<string[]> {
    const segment = await createSegment(account.api_key, { name: "case", match, conditions });
    const counted = await countOf(account.api_key, segment.id);
    const found = (counted.contacts ?? []).map((contact) => names.get(contact.id) ?? contact.email);
    expect(counted.count).toBe(found.length);
    return found.sort();
  }
  const all = ["ann", "bob", "carol", "dan", "frank", "franky"];
  const except = (...names: string[]) => all.filter((name) => !names.includes(name));

  it("text fields: eq and neq without ASCII case, neq including contacts without the field", async () => {
    expect(await audience([{ field: "first_name", op: "eq", value: "ann" }])).toEqual(["ann"]);
    expect(await audience([{ field: "first_name", op: "neq", value: "ANN" }])).toEqual(except("ann"));
    expect(await audience([{ field: "country", op: "in", value: ["fr", "xx"] }])).toEqual(["ann", "carol"]);
    expect(await audience([{ field: "first_name", op: "exists" }])).toEqual(except("carol"));
    expect(await audience([{ field: "first_name", op: "not_exists", value: null }])).toEqual(["carol"]);
  });

  it("text fields: contains, starts_with, ends_with", async () => {
    expect(await audience([{ field: "company", op: "contains", value: "acme" }])).toEqual(["ann", "bob"]);
    expect(await audience([{ field: "company", op: "starts_with", value: "ACME " }])).toEqual(["bob"]);
    expect(await audience([{ field: "last_name", op: "ends_with", value: "EE" }])).toEqual(["ann"]);
    expect(await audience([{ field: "phone", op: "starts_with", value: "+33" }])).toEqual(["ann"]);
  });

  it("email compares the contact's lower-cased key", async () => {
    expect(await audience([{ field: "email", op: "eq", value: "CAROL@example.COM" }])).toEqual(["carol"]);
    expect(await audience([{ field: "email", op: "neq", value: "ann@example.com" }])).toEqual(except("ann"));
    expect(await audience([{ field: "email", op: "in", value: ["ann@example.com", "BOB@shop.example", "nobody@example.com"] }])).toEqual([
      "ann",
      "bob",
    ]);
    expect(await audience([{ field: "email", op: "ends_with", value: "@EXAMPLE.com" }])).toEqual(["ann", "carol", "frank", "franky"]);
  });

  it("LIKE wildcards in a value match literally", async () => {
    // Unescaped, `_x` would match "frankyx" too and "%_" or "50%" would match bob's "50XYoff".
    expect(await audience([{ field: "email", op: "contains", value: "_x" }])).toEqual(["frank"]);
    expect(await audience([{ field: "custom_fields.code", op: "contains", value: "%_" }])).toEqual(["ann"]);
    expect(await audience([{ field: "custom_fields.code", op: "starts_with", value: "50%" }])).toEqual(["ann"]);
    expect(await audience([{ field: "company", op: "contains", value: "%" }])).toEqual([]);
    expect(await audience([{ field: "company", op: "contains", value: "\\" }])).toEqual([]);
  });

  it("status: the count only ever holds subscribed contacts", async () => {
    expect(await audience([{ field: "status", op: "eq", value: "subscribed" }])).toEqual(all);
    expect(await audience([{ field: "status", op: "neq", value: "subscribed" }])).toEqual([]);
    expect(await audience([{ field: "status", op: "in", value: ["unsubscribed", "complained"] }])).toEqual([]);
    // The compiled condition itself selects by status: eve (unsubscribed) and gus (suppressed → unsubscribed).
    const db = dbOf(account);
    const matched = await db
      .select({ id: contacts.id })
      .from(contacts)
      .where(segmentWhere(account.id, { match: "all", conditions: [{ field: "status", op: "in", value: ["unsubscribed", "complained"] }] }))
      .all();
    expect(matched.map((row) => names.get(row.id)).sort()).toEqual(["eve", "gus"]);
  });

  it("created_at: gt, gte, lt, lte on dates and within_days", async () => {
    expect(await audience([{ field: "created_at", op: "lt", value: "2025-03-01" }])).toEqual(["ann"]);
    expect(await audience([{ field: "created_at", op: "lte", value: "2025-06-01T00:00:00Z" }])).toEqual(["ann", "bob"]);
    expect(await audience([{ field: "created_at", op: "gt", value: "2025-06-01T00:00:00Z" }])).toEqual(except("ann", "bob"));
    expect(await audience([{ field: "created_at", op: "gte", value: "2025-06-01T02:00:00+02:00" }])).toEqual(except("ann"));
    expect(await audience([{ field: "created_at", op: "within_days", value: 7 }])).toEqual(["carol", "frank", "franky"]);
    expect(await audience([{ field: "created_at", op: "within_days", value: 30 }])).toEqual(["carol", "dan", "frank", "franky"]);
  });

  it("custom fields: strings compare without case, numbers numerically (numeric strings too), booleans as JSON or strings", async () => {
    expect(await audience([{ field: "custom_fields.plan", op: "eq", value: "PRO" }])).toEqual(["ann", "carol"]);
    expect(await audience([{ field: "custom_fields.plan", op: "neq", value: "pro" }])).toEqual(["bob", "dan", "frank", "franky"]);
    expect(await audience([{ field: "custom_fields.plan", op: "ends_with", value: "RISE" }])).toEqual(["dan"]);
    expect(await audience([{ field: "custom_fields.plan", op: "in", value: ["free", "Enterprise"] }])).toEqual(["bob", "dan"]);

    // seats: ann 12 (number), bob "3", carol "12.5", dan "abc" (not a number: never compared as 0).
    expect(await audience([{ field: "custom_fields.seats", op: "gt", value: 10 }])).toEqual(["ann", "carol"]);
    expect(await audience([{ field: "custom_fields.seats", op: "gte", value: 12.5 }])).toEqual(["carol"]);
    expect(await audience([{ field: "custom_fields.seats", op: "lt", value: 5 }])).toEqual(["bob"]);
    expect(await audience([{ field: "custom_fields.seats", op: "lte", value: 12 }])).toEqual(["ann", "bob"]);
    expect(await audience([{ field: "custom_fields.seats", op: "lt", value: -1 }])).toEqual([]);
    expect(await audience([{ field: "custom_fields.seats", op: "eq", value: 3 }])).toEqual(["bob"]);
    // A string value compares as text: "12" is ann's 12, not carol's "12.5".
    expect(await audience([{ field: "custom_fields.seats", op: "eq", value: "12" }])).toEqual(["ann"]);
    expect(await audience([{ field: "custom_fields.seats", op: "in", value: [12, "3"] }])).toEqual(["ann", "bob"]);

    expect(await audience([{ field: "custom_fields.vip", op: "eq", value: true }])).toEqual(["ann"]);
    expect(await audience([{ field: "custom_fields.vip", op: "eq", value: false }])).toEqual(["bob", "dan"]);
    expect(await audience([{ field: "custom_fields.vip", op: "exists" }])).toEqual(["ann", "bob", "dan"]);
    expect(await audience([{ field: "custom_fields.vip", op: "not_exists" }])).toEqual(["carol", "frank", "franky"]);
  });

  it("custom fields holding dates: comparisons and within_days", async () => {
    expect(await audience([{ field: "custom_fields.renewal", op: "gt", value: "2021-01-01" }])).toEqual(["carol"]);
    expect(await audience([{ field: "custom_fields.renewal", op: "lt", value: "2021-01-01T00:00:00Z" }])).toEqual(["ann"]);
    expect(await audience([{ field: "custom_fields.renewal", op: "within_days", value: 7 }])).toEqual(["carol"]);
    expect(await audience([{ field: "custom_fields.renewal", op: "within_days", value: 1 }])).toEqual([]);
  });

  it("list membership: in and not_in, one id or several", async () => {
    expect(await audience([{ field: "list", op: "in", value: listA }])).toEqual(["ann", "carol"]);
    expect(await audience([{ field: "list", op: "in", value: [listA, listB] }])).toEqual(["ann", "bob", "carol"]);
    expect(await audience([{ field: "list", op: "not_in", value: listA }])).toEqual(["bob", "dan", "frank", "franky"]);
    expect(await audience([{ field: "list", op: "not_in", value: [listA, listB] }])).toEqual(["dan", "frank", "franky"]);
  });

  it("match all and match any", async () => {
    expect(
      await audience([
        { field: "list", op: "in", value: listA },
        { field: "country", op: "eq", value: "fr" },
      ]),
    ).toEqual(["ann", "carol"]);
    expect(
      await audience(
        [
          { field: "first_name", op: "eq", value: "Dan" },
          { field: "list", op: "in", value: listB },
        ],
        "any",
      ),
    ).toEqual(["bob", "carol", "dan"]);
    expect(
      await audience([
        { field: "custom_fields.plan", op: "eq", value: "pro" },
        { field: "custom_fields.seats", op: "gt", value: 12 },
      ]),
    ).toEqual(["carol"]);
  });

  it("injection attempts in values match nothing; in keys they are refused", async () => {
    expect(await audience([{ field: "first_name", op: "eq", value: "' OR 1=1 --" }])).toEqual([]);
    expect(await audience([{ field: "custom_fields.plan", op: "eq", value: "x') OR 1=1 --" }])).toEqual([]);
    expect(await audience([{ field: "company", op: "in", value: ["') OR 1=1 --", "Robert'); DROP TABLE contacts;--"] }])).toEqual([]);

    for (const field of [`custom_fields.plan') OR 1=1 --`, 'custom_fields.plan"', "custom_fields.a.b", "custom_fields.$", "custom_fields."]) {
      const response = await call("/api/v1/segments", {
        key: account.api_key,
        body: { name: "evil", match: "all", conditions: [{ field, op: "exists" }] },
      });
      expect(response.status).toBe(422);
      expect((await json<ErrorBody>(response)).errors).toEqual({
        "conditions.0.field": ["A custom field key is 1 to 64 letters, digits, `_` or `-`"],
      });
    }
    const list = await call("/api/v1/segments", {
      key: account.api_key,
      body: { name: "evil", match: "all", conditions: [{ field: "list", op: "in", value: "x' OR '1'='1" }] },
    });
    expect(list.status).toBe(422);
    expect((await json<ErrorBody>(list)).errors).toEqual({ "conditions.0.value": ["No list x' OR '1'='1 in this account"] });
    // Nothing was dropped or rewritten along the way.
    expect(
      (
        await countOf(
          account.api_key,
          (
            await createSegment(account.api_key, { name: "all", match: "all", conditions: [{ field: "status", op: "eq", value: "subscribed" }] })
          ).id,
        )
      ).count,
    ).toBe(6);
  });

  it("the compiled condition works in COUNT(*) and INSERT … SELECT, with 20 conditions under D1's parameter cap", async () => {
    const conditions: SegmentCondition[] = [
      ...Array.from({ length: 9 }, (): SegmentCondition => ({ field: "custom_fields.seats", op: "gte", value: 1 })),
      ...Array.from({ length: 9 }, (): SegmentCondition => ({ field: "custom_fields.plan", op: "neq", value: "nope" })),
      { field: "list", op: "in", value: [listA, listB] },
      { field: "created_at", op: "within_days", value: 3650 },
    ];
    const segment = await createSegment(account.api_key, { name: "twenty", match: "all", conditions });
    expect(await countOf(account.api_key, segment.id, false)).toEqual({ count: 3 });

    const db = dbOf(account);
    const where = segmentWhere(account.id, segment);
    const counted = await db.select({ total: count() }).from(contacts).where(where).get();
    // eve and gus match too: segmentWhere selects by the conditions alone; the audience rules come on top.
    expect(counted?.total).toBe(5);
    const target = await createList(account.api_key, "materialised");
    const inserted = await statement(
      db,
      sql`INSERT INTO list_members (list_id, contact_id) SELECT ${target.id}, ${contacts.id} FROM ${contacts} WHERE ${where}`,
    ).run();
    expect(inserted.meta.changes).toBe(5);
    const members = await db.select({ id: listMembers.contactId }).from(listMembers).where(eq(listMembers.listId, target.id)).all();
    expect(members.map((row) => names.get(row.id)).sort()).toEqual(["ann", "bob", "carol", "eve", "gus"]);
  });
});

/**
 * A value of exactly `bytes` UTF-8 bytes with upper-case ASCII and characters of 2, 3 and 4 bytes, distinct per
 * length (so one length's value is never inside another's).
 */
function valueOfBytes(bytes: number): string {
  const pieces = ["Q", "é", "日", "😀", "Z"];
  let value = "";
  let size = 0;
  for (let index = 0; ; index++) {
    const piece = pieces[index % pieces.length]!;
    const pieceSize = new TextEncoder().encode(piece).length;
    if (size + pieceSize > bytes - String(bytes).length) break;
    value += piece;
    size += pieceSize;
  }
  value = `${value}${"W".repeat(bytes - String(bytes).length - size)}${bytes}`;
  expect(new TextEncoder().encode(value).length).toBe(bytes);
  return value;
}
/** As a contact stores it: the ASCII letters lower-cased, the other characters as they are. */
const asciiLower = (value: string) => value.replace(/[A-Z]/g, (letter) => letter.toLowerCase());

describe("contains, starts_with and ends_with values of any allowed length", () => {
  // D1 refuses LIKE patterns over 50 bytes: these lengths straddle that limit, in a text field (up to 256
  // characters), a custom field (up to 2,048) and the email address.
  const textLengths = [1, 49, 50, 51, 200];
  const customLengths = [...textLengths, 1000];
  let account: CreatedAccount;
  const names = new Map<string, string>();

  beforeAll(async () => {
    account = await createAccount({ rate_limit_per_minute: 100_000 });
    const add = async (name: string, body: Record<string, unknown>) => names.set((await createContact(account.api_key, body)).id, name);
    for (const bytes of customLengths) {
      const stored = asciiLower(valueOfBytes(bytes));
      for (const [place, value] of [
        ["start", `${stored}~tail`],
        ["end", `head~${stored}`],
        ["middle", `<${stored}>`],
      ] as const) {
        const company = textLengths.includes(bytes) ? { company: value } : {};
        await add(`${place}-${bytes}`, { email: `${place}-${bytes}@example.com`, ...company, custom_fields: { [`f${bytes}`]: value } });
      }
    }
    const longDomain = `${"a".repeat(62)}.${"b".repeat(60)}.${"c".repeat(60)}.example`;
    await add("long-email", { email: `someone@${longDomain}` });
  });

  async function matching(conditions: SegmentCondition[]): Promise<string[]> {
    const segment = await createSegment(account.api_key, { name: "long", match: "all", conditions });
    const counted = await countOf(account.api_key, segment.id);
    const found = (counted.contacts ?? []).map((contact) => names.get(contact.id) ?? contact.email);
    expect(counted.count).toBe(found.length);
    return found.sort();
  }

  for (const bytes of customLengths) {
    it(`${bytes} bytes, unicode included, without ASCII case`, async () => {
      const value = valueOfBytes(bytes);
      const fields = [`custom_fields.f${bytes}`, ...(textLengths.includes(bytes) ? ["company"] : [])];
      for (const field of fields) {
        const scoped = (op: SegmentCondition["op"]): SegmentCondition[] => [
          { field, op, value },
          // The company field holds every length's values: keep each length to its own contacts.
          { field: `custom_fields.f${bytes}`, op: "exists" },
        ];
        expect(await matching(scoped("contains"))).toEqual([`end-${bytes}`, `middle-${bytes}`, `start-${bytes}`]);
        expect(await matching(scoped("starts_with"))).toEqual([`start-${bytes}`]);
        expect(await matching(scoped("ends_with"))).toEqual([`end-${bytes}`]);
      }
    });
  }

  it("non-ASCII letters keep their case, as LIKE had them", async () => {
    expect(await matching([{ field: "custom_fields.f50", op: "contains", value: "É" }])).toEqual([]);
    expect(await matching([{ field: "custom_fields.f50", op: "contains", value: "é" }])).toEqual(["end-50", "middle-50", "start-50"]);
  });

  it("email: a 200-byte ends_with and a long contains", async () => {
    const domain = `${"A".repeat(62)}.${"b".repeat(60)}.${"c".repeat(60)}.EXAMPLE`;
    const address = `SomeOne@${domain}`;
    expect(address.length).toBe(200);
    expect(await matching([{ field: "email", op: "ends_with", value: address }])).toEqual(["long-email"]);
    expect(await matching([{ field: "email", op: "ends_with", value: `x${address.slice(1)}` }])).toEqual([]);
    expect(await matching([{ field: "email", op: "contains", value: domain.slice(5, 160) }])).toEqual(["long-email"]);
    expect(await matching([{ field: "email", op: "starts_with", value: `someone@${domain.slice(0, 120)}` }])).toEqual(["long-email"]);
  });
});

describe("segments API", () => {
  it("creates, reads, lists, changes and deletes a segment; count without preview has no contacts", async () => {
    const account = await createAccount();
    const list = await createList(account.api_key, "Customers");
    await createContact(account.api_key, { email: "a@example.com", custom_fields: { plan: "pro" }, lists: [list.id] });
    await createContact(account.api_key, { email: "b@example.com", custom_fields: { plan: "free" }, lists: [list.id] });

    const segment = await createSegment(account.api_key, {
      name: " Pro customers ",
      match: "all",
      conditions: [
        { field: "list", op: "in", value: list.id },
        { field: "custom_fields.plan", op: "eq", value: "pro" },
      ],
    });
    expect(segment).toMatchObject({
      id: expect.stringMatching(/^seg_/),
      name: "Pro customers",
      match: "all",
      conditions: [
        { field: "list", op: "in", value: list.id },
        { field: "custom_fields.plan", op: "eq", value: "pro" },
      ],
    });
    expect(await json<Segment>(await call(`/api/v1/segments/${segment.id}`, { key: account.api_key }))).toEqual(segment);
    expect(await countOf(account.api_key, segment.id, false)).toEqual({ count: 1 });
    const preview = await countOf(account.api_key, segment.id);
    expect(preview.contacts?.map((contact) => [contact.email, contact.lists, contact.custom_fields])).toEqual([
      ["a@example.com", [list.id], { plan: "pro" }],
    ]);

    const other = await createSegment(account.api_key, {
      name: "Everyone",
      match: "any",
      conditions: [{ field: "email", op: "ends_with", value: "@example.com" }],
    });
    const page = await json<{ data: Segment[]; has_more: boolean; next_cursor: string | null }>(
      await call("/api/v1/segments?limit=1", { key: account.api_key }),
    );
    expect(page).toMatchObject({ data: [{ id: other.id }], has_more: true });
    const rest = await json<{ data: Segment[]; has_more: boolean }>(
      await call(`/api/v1/segments?limit=1&cursor=${page.next_cursor}`, { key: account.api_key }),
    );
    expect(rest).toMatchObject({ data: [{ id: segment.id }], has_more: false });

    const changed = await call(`/api/v1/segments/${segment.id}`, {
      key: account.api_key,
      method: "PATCH",
      body: { match: "any", conditions: [{ field: "custom_fields.plan", op: "in", value: ["pro", "free"] }] },
    });
    expect(changed.status).toBe(200);
    expect(await json<Segment>(changed)).toMatchObject({
      name: "Pro customers",
      match: "any",
      conditions: [{ field: "custom_fields.plan", op: "in", value: ["pro", "free"] }],
    });
    expect(await countOf(account.api_key, segment.id, false)).toEqual({ count: 2 });

    const refused = await call(`/api/v1/segments/${segment.id}`, {
      key: account.api_key,
      method: "PATCH",
      body: { name: "x", conditions: [{ field: "list", op: "in", value: "lst_nope" }] },
    });
    expect(refused.status).toBe(422);
    expect((await json<Segment>(await call(`/api/v1/segments/${segment.id}`, { key: account.api_key }))).name).toBe("Pro customers");

    expect(await json(await call(`/api/v1/segments/${segment.id}`, { key: account.api_key, method: "DELETE" }))).toEqual({
      id: segment.id,
      deleted: true,
    });
    expect((await call(`/api/v1/segments/${segment.id}`, { key: account.api_key })).status).toBe(404);
    expect((await call(`/api/v1/segments/${segment.id}/count`, { key: account.api_key })).status).toBe(404);
  });

  it("lists every bad condition at once as conditions.<i>.field|op|value", async () => {
    const account = await createAccount();
    const response = await call("/api/v1/segments", {
      key: account.api_key,
      body: {
        name: "bad",
        match: "all",
        conditions: [
          { field: "nope", op: "eq", value: "x" },
          { field: "first_name", op: "gt", value: "x" },
          { field: "custom_fields.seats", op: "gt", value: "ten" },
          { field: "first_name", op: "eq", value: 5 },
          { field: 5, op: "eq" },
          { field: "first_name", op: "like", value: "x" },
          { field: "created_at", op: "within_days", value: 0 },
          { field: "status", op: "eq", value: "active" },
          { field: "first_name", op: "exists", value: "x" },
          { field: "email", op: "eq", value: "not an address" },
          { field: "list", op: "eq", value: "lst_x" },
          { field: "first_name", op: "eq", value: "fine" },
        ],
      },
    });
    expect(response.status).toBe(422);
    const body = await json<ErrorBody>(response);
    expect(body.code).toBe("validation_failed");
    expect(Object.keys(body.errors ?? {}).sort()).toEqual(
      [
        "conditions.0.field",
        "conditions.1.op",
        "conditions.2.value",
        "conditions.3.value",
        "conditions.4.field",
        "conditions.5.op",
        "conditions.6.value",
        "conditions.7.value",
        "conditions.8.value",
        "conditions.9.value",
        "conditions.10.op",
      ].sort(),
    );
    expect(body.errors?.["conditions.1.op"]).toEqual(["first_name takes eq, neq, contains, starts_with, ends_with, exists, not_exists, in"]);
    expect(body.errors?.["conditions.5.op"]?.[0]).toMatch(/^Unknown operator; use one of eq, neq/);
    expect(body.errors?.["conditions.0.field"]?.[0]).toMatch(/^Unknown field; use one of email, first_name/);
  });

  it("topic subscriptions: in and not_in, by each contact's choice or the topic's default; unknown topics refused", async () => {
    const account = await createAccount();
    const key = account.api_key;
    const news = await createTopic(key, "News");
    const beta = await createTopic(key, "Beta", false);
    const ann = await createContact(key, { email: "ann@topics.example", topics: { [news.id]: false } });
    const bob = await createContact(key, { email: "bob@topics.example", topics: { [beta.id]: true } });
    const carol = await createContact(key, { email: "carol@topics.example" });
    const names = new Map([
      [ann.id, "ann"],
      [bob.id, "bob"],
      [carol.id, "carol"],
    ]);
    const audience = async (conditions: SegmentCondition[]) => {
      const segment = await createSegment(key, { name: "topics", match: "all", conditions });
      return ((await countOf(key, segment.id)).contacts ?? []).map((contact) => names.get(contact.id)).sort();
    };
    expect(await audience([{ field: "topic", op: "in", value: news.id }])).toEqual(["bob", "carol"]);
    expect(await audience([{ field: "topic", op: "not_in", value: news.id }])).toEqual(["ann"]);
    expect(await audience([{ field: "topic", op: "in", value: beta.id }])).toEqual(["bob"]);
    expect(await audience([{ field: "topic", op: "in", value: [news.id, beta.id] }])).toEqual(["bob", "carol"]);

    const other = await createAccount({ name: "Other" });
    const foreign = await json<{ id: string }>(await call("/api/v1/topics", { key: other.api_key, body: { name: "Theirs" } }));
    const foreignTopic = await call("/api/v1/segments", {
      key,
      body: { name: "bad", match: "all", conditions: [{ field: "topic", op: "in", value: [news.id, foreign.id] }] },
    });
    expect(foreignTopic.status).toBe(422);
    expect((await json<ErrorBody>(foreignTopic)).errors).toEqual({ "conditions.0.value": [`No topic ${foreign.id} in this account`] });
    const badOp = await call("/api/v1/segments", {
      key,
      body: { name: "bad", match: "all", conditions: [{ field: "topic", op: "eq", value: news.id }] },
    });
    expect((await json<ErrorBody>(badOp)).errors).toEqual({ "conditions.0.op": ["topic takes in, not_in"] });
  });

  it("refuses unknown and other accounts' lists, more than 20 conditions, and no conditions", async () => {
    const account = await createAccount();
    const other = await createAccount({ name: "Other" });
    const own = await createList(account.api_key, "Own");
    const foreign = await createList(other.api_key, "Foreign");
    const response = await call("/api/v1/segments", {
      key: account.api_key,
      body: {
        name: "lists",
        match: "any",
        conditions: [
          { field: "list", op: "in", value: [own.id, foreign.id] },
          { field: "list", op: "not_in", value: "lst_missing" },
          { field: "list", op: "in", value: own.id },
        ],
      },
    });
    expect(response.status).toBe(422);
    expect((await json<ErrorBody>(response)).errors).toEqual({
      "conditions.0.value": [`No list ${foreign.id} in this account`],
      "conditions.1.value": ["No list lst_missing in this account"],
    });

    const many = Array.from({ length: 21 }, () => ({ field: "first_name", op: "exists" }));
    const tooMany = await call("/api/v1/segments", { key: account.api_key, body: { name: "many", match: "all", conditions: many } });
    expect(tooMany.status).toBe(422);
    expect(Object.keys((await json<ErrorBody>(tooMany)).errors ?? {})).toEqual(["conditions"]);
    const none = await call("/api/v1/segments", { key: account.api_key, body: { name: "none", match: "all", conditions: [] } });
    expect(Object.keys((await json<ErrorBody>(none)).errors ?? {})).toEqual(["conditions"]);
    expect((await json<{ data: unknown[] }>(await call("/api/v1/segments", { key: account.api_key }))).data).toEqual([]);
  });

  it("counts only subscribed, unsuppressed contacts, and the preview stops at 20", async () => {
    const account = await createAccount();
    const list = await createList(account.api_key, "Big");
    const emails = Array.from({ length: 24 }, (_, i) => `p${String(i).padStart(2, "0")}@example.com`);
    expect((await call(`/api/v1/lists/${list.id}/contacts`, { key: account.api_key, body: { emails } })).status).toBe(200);
    await call("/api/v1/suppressions", { key: account.api_key, body: { email: "p00@example.com", reason: "bounce" } });
    const p01 = await json<{ data: Contact[] }>(await call("/api/v1/contacts?email=p01@example.com", { key: account.api_key }));
    await call(`/api/v1/contacts/${p01.data[0]!.id}`, { key: account.api_key, method: "PATCH", body: { status: "unsubscribed" } });

    const segment = await createSegment(account.api_key, { name: "Big", match: "all", conditions: [{ field: "list", op: "in", value: list.id }] });
    const counted = await countOf(account.api_key, segment.id);
    expect(counted.count).toBe(22);
    expect(counted.contacts).toHaveLength(20);
    expect(counted.contacts?.map((contact) => contact.email)).not.toContain("p00@example.com");
    expect(counted.contacts?.every((contact) => contact.status === "subscribed")).toBe(true);
    expect((await json<{ count: number }>(await call(`/api/v1/segments/${segment.id}/count?preview=0`, { key: account.api_key }))).count).toBe(22);
    const badPreview = await call(`/api/v1/segments/${segment.id}/count?preview=yes`, { key: account.api_key });
    expect(badPreview.status).toBe(422);
  });

  it("answers 404 for another account's segment, on every method", async () => {
    const owner = await createAccount();
    const intruder = await createAccount({ name: "Intruder" });
    const segment = await createSegment(owner.api_key, { name: "Mine", match: "all", conditions: [{ field: "first_name", op: "exists" }] });
    for (const [method, path, body] of [
      ["GET", `/api/v1/segments/${segment.id}`, undefined],
      ["GET", `/api/v1/segments/${segment.id}/count?preview=1`, undefined],
      ["PATCH", `/api/v1/segments/${segment.id}`, { name: "Taken" }],
      ["DELETE", `/api/v1/segments/${segment.id}`, undefined],
    ] as const) {
      const response = await call(path, { key: intruder.api_key, method, body });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(await json<ErrorBody>(response)).toEqual({ code: "not_found", message: "Segment not found" });
    }
    expect(await json<Segment>(await call(`/api/v1/segments/${segment.id}`, { key: owner.api_key }))).toEqual(segment);
  });

  it("needs the contacts scope", async () => {
    const account = await createAccount();
    const sendOnly = await createKey(account.api_key, { name: "send only", scopes: ["send"] });
    const contactsKey = await createKey(account.api_key, { name: "contacts", scopes: ["contacts"] });
    const body = { name: "s", match: "all", conditions: [{ field: "first_name", op: "exists" }] };
    const refused = await call("/api/v1/segments", { key: sendOnly.key, body });
    expect(refused.status).toBe(403);
    expect(await json<ErrorBody>(refused)).toEqual({ code: "scope_missing", message: "This API key lacks the `contacts` scope" });
    const segment = await createSegment(contactsKey.key, body);
    expect((await call(`/api/v1/segments/${segment.id}/count`, { key: sendOnly.key })).status).toBe(403);
    expect((await call(`/api/v1/segments/${segment.id}/count`, { key: contactsKey.key })).status).toBe(200);
  });
});
