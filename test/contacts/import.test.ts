import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import { addMembersByKeySql, addToListsSql, contactUpsertSql } from "../../src/domain/contacts/contacts";
import { importObjectKey, importTuning, runContactImport } from "../../src/domain/contacts/import";
import { call, createAccount, d1Of, json, type CreatedAccount } from "../support/helpers";
import {
  createContact,
  createList,
  createTopic,
  dataUri,
  postMultipart,
  waitForImport,
  type Contact,
  type ContactImport,
  type ErrorBody,
} from "../support/contacts";

async function contactByEmail(key: string, email: string): Promise<Contact | undefined> {
  const page = await json<{ data: Contact[] }>(await call(`/api/v1/contacts?email=${encodeURIComponent(email)}`, { key }));
  return page.data[0];
}

describe("CSV import through the queue", () => {
  it("imports a multipart CSV with a BOM, CRLF, quoted fields and a mapping, reporting bad rows", async () => {
    const account = await createAccount();
    const list = await createList(account.api_key, "Imported");
    await call("/api/v1/suppressions", { key: account.api_key, body: { email: "suppressed@example.com" } });
    const csv =
      "\uFEFFE-mail,First,Last,Plan,Ignored\r\n" +
      'ann@example.com,Ann,"Lee, Jr.",pro,x\r\n' +
      '"bob@Example.COM","Bob ""The Builder""",,free,x\r\n' +
      "not-an-email,Nope,,,x\r\n" +
      ",Empty,,,x\r\n" +
      "\r\n" +
      '"carl@example.com","Carl","multi\r\nline",,x\r\n' +
      "suppressed@EXAMPLE.com,Sue,,,x\r\n" +
      "ann@example.com,,Lee,enterprise,x";
    const response = await postMultipart("/api/v1/contacts/import", account.api_key, {
      file: new File([csv], "contacts.csv", { type: "text/csv" }),
      mapping: JSON.stringify({ email: "E-mail", first_name: "First", last_name: "Last", "custom_fields.plan": "Plan" }),
      list_id: list.id,
    });
    expect(response.status).toBe(202);
    const accepted = await json<ContactImport>(response);
    expect(accepted).toMatchObject({ id: expect.stringMatching(/^imp_/), status: "pending", total: 7, processed: 0, list_id: list.id });

    const done = await waitForImport(account.api_key, accepted.id);
    expect(done).toMatchObject({ status: "completed", total: 7, processed: 7, created: 4, updated: 1, failed: 2, error: null });
    expect(done.errors).toEqual([
      { row: 4, message: "Invalid email address (missing_at)" },
      { row: 5, message: "The email cell is empty" },
    ]);

    const ann = await contactByEmail(account.api_key, "ann@example.com");
    // The second row for ann updated the first: an empty First cell kept "Ann".
    expect(ann).toMatchObject({ first_name: "Ann", last_name: "Lee", custom_fields: { plan: "enterprise" }, lists: [list.id] });
    expect(await contactByEmail(account.api_key, "bob@example.com")).toMatchObject({
      email: "bob@Example.COM",
      first_name: 'Bob "The Builder"',
      last_name: null,
    });
    expect(await contactByEmail(account.api_key, "carl@example.com")).toMatchObject({ last_name: "multi\r\nline" });
    expect(await contactByEmail(account.api_key, "suppressed@EXAMPLE.com")).toMatchObject({ status: "unsubscribed" });
    const listed = await json<{ contact_count: number }>(await call(`/api/v1/lists/${list.id}`, { key: account.api_key }));
    expect(listed.contact_count).toBe(4);
    // The file is not kept once imported.
    expect(await env.BLOBS.get(importObjectKey(account.id, accepted.id))).toBeNull();
  });

  it("imports a JSON data URI, semicolon-separated, with header names guessed; updates existing contacts without erasing", async () => {
    const account = await createAccount();
    const existing = await createContact(account.api_key, { email: "old@example.com", first_name: "Old", company: "Keep Co" });
    const csv = "Email Address;First Name;Company\nold@example.com;Renamed;\nnew@example.com;New;Acme\n";
    const response = await call("/api/v1/contacts/import", { key: account.api_key, body: { file: dataUri(csv) } });
    expect(response.status).toBe(202);
    const done = await waitForImport(account.api_key, (await json<ContactImport>(response)).id);
    expect(done).toMatchObject({ status: "completed", total: 2, created: 1, updated: 1, failed: 0, errors: [] });
    expect(await contactByEmail(account.api_key, "old@example.com")).toMatchObject({ id: existing.id, first_name: "Renamed", company: "Keep Co" });
    expect(await contactByEmail(account.api_key, "new@example.com")).toMatchObject({ first_name: "New", company: "Acme", status: "subscribed" });
  });

  it("subscribes contacts to the topics a `topics` column names (by name or id); an unknown topic fails its row", async () => {
    const account = await createAccount();
    const key = account.api_key;
    const news = await createTopic(key, "News");
    const beta = await createTopic(key, "Beta", false);
    const kept = await createContact(key, { email: "kept@example.com", topics: { [news.id]: false } });
    const csv = `email,topics\nann@example.com,beta\nbob@example.com,"${beta.id}; News"\nkept@example.com,\neve@example.com,Gamma\n`;
    const response = await call("/api/v1/contacts/import", { key, body: { file: dataUri(csv) } });
    expect(response.status).toBe(202);
    const done = await waitForImport(key, (await json<ContactImport>(response)).id);
    expect(done).toMatchObject({
      status: "completed",
      created: 2,
      updated: 1,
      failed: 1,
      errors: [{ row: 5, message: "1 of the topics named is not a topic of this account (GET /topics lists them)" }],
    });
    expect((await contactByEmail(key, "ann@example.com"))?.topics).toEqual({ [news.id]: true, [beta.id]: true });
    expect((await contactByEmail(key, "bob@example.com"))?.topics).toEqual({ [news.id]: true, [beta.id]: true });
    // An empty cell subscribes to nothing and unsubscribes from nothing.
    expect((await contactByEmail(key, kept.email))?.topics).toEqual({ [news.id]: false, [beta.id]: false });
  });

  it("verify: true checks the imported addresses (1 credit each) and keeps each result on its contact; too few credits is a 402", async () => {
    const poor = await createAccount({ verify_credits: 1 });
    const csv = "email\njane@acme.verify-test\nbob@nomx.verify-test\n";
    const refused = await call("/api/v1/contacts/import", { key: poor.api_key, body: { file: dataUri(csv), verify: true } });
    expect(refused.status).toBe(402);
    expect(await json(refused)).toMatchObject({ code: "insufficient_credits", message: expect.stringContaining("2 verification credits") });
    expect((await json<{ data: unknown[] }>(await call("/api/v1/contacts", { key: poor.api_key }))).data).toEqual([]);

    const account = await createAccount({ verify_credits: 10 });
    const key = account.api_key;
    const response = await call("/api/v1/contacts/import", { key, body: { file: dataUri(csv), verify: true } });
    expect(response.status).toBe(202);
    expect(await waitForImport(key, (await json<ContactImport>(response)).id)).toMatchObject({ status: "completed", created: 2, failed: 0 });
    const checked = await vi.waitFor(
      async () => {
        const bob = await contactByEmail(key, "bob@nomx.verify-test");
        const jane = await contactByEmail(key, "jane@acme.verify-test");
        expect(bob?.verification).toMatchObject({ result: "invalid", status: "no_mx" });
        expect(jane?.verification).toMatchObject({ result: expect.any(String) });
        return { bob, jane };
      },
      { timeout: 10_000, interval: 200 },
    );
    expect(checked.jane?.verification?.result).not.toBe("invalid");
    const me = await json<{ balances: { verify: { balance: number } } }>(await call("/api/v1/me", { key }));
    expect(me.balances.verify.balance).toBe(8);
  });

  it("imports 5,000 rows in several chunks and counts each row once", async () => {
    const account = await createAccount();
    const rows = Array.from({ length: 5000 }, (_, i) => `user${i}@example.com,User ${i}`);
    rows[1234] = "broken,Row";
    const response = await postMultipart("/api/v1/contacts/import", account.api_key, {
      file: new File([`email,first_name\n${rows.join("\n")}\n`], "big.csv"),
    });
    expect(response.status).toBe(202);
    const done = await waitForImport(account.api_key, (await json<ContactImport>(response)).id, 60_000);
    expect(done).toMatchObject({ status: "completed", total: 5000, processed: 5000, created: 4999, updated: 0, failed: 1 });
    expect(done.errors).toEqual([{ row: 1236, message: "Invalid email address (missing_at)" }]);
    const count = await d1Of(account).prepare("SELECT count(*) AS n FROM contacts WHERE account_id = ?").bind(account.id).first<{ n: number }>();
    expect(count?.n).toBe(4999);
  }, 90_000);

  it("keeps the first 100 row errors and counts the rest", async () => {
    const account = await createAccount();
    const rows = Array.from({ length: 150 }, (_, i) => `bad${i}`);
    const response = await call("/api/v1/contacts/import", { key: account.api_key, body: { file: dataUri(`email\n${rows.join("\n")}`) } });
    const done = await waitForImport(account.api_key, (await json<ContactImport>(response)).id);
    expect(done).toMatchObject({ status: "completed", failed: 150, created: 0 });
    expect(done.errors).toHaveLength(100);
    expect(done.errors[99]).toEqual({ row: 101, message: "Invalid email address (missing_at)" });
  });

  it("another account cannot read the import (404)", async () => {
    const account = await createAccount();
    const other = await createAccount();
    const response = await call("/api/v1/contacts/import", { key: account.api_key, body: { file: dataUri("email\na@example.com\n") } });
    const { id } = await json<ContactImport>(response);
    expect((await call(`/api/v1/contacts/import/${id}`, { key: other.api_key })).status).toBe(404);
    await waitForImport(account.api_key, id);
  });
});

describe("import requests that are refused at once", () => {
  const refusals: [string, () => Record<string, unknown>, string][] = [
    ["a header without an email column", () => ({ file: dataUri("name,phone\nAnn,1\n") }), "mapping.email"],
    [
      "a mapping to a missing column",
      () => ({ file: dataUri("email\na@x.com\n"), mapping: { email: "email", first_name: "Given" } }),
      "mapping.first_name",
    ],
    ["an unknown mapping target", () => ({ file: dataUri("email\na@x.com\n"), mapping: { email: "email", nickname: "email" } }), "mapping.nickname"],
    ["a header with no rows", () => ({ file: dataUri("email\n") }), "file"],
    ["an empty file", () => ({ file: "data:text/csv;base64," }), "file"],
    ["an .xlsx workbook", () => ({ file: dataUri(new Uint8Array([0x50, 0x4b, 0x03, 0x04, 1, 2, 3])) }), "file"],
    ["a Latin-1 file", () => ({ file: dataUri(new Uint8Array([...new TextEncoder().encode("email,name\na@x.com,Ren"), 0xe9, 0x0a])) }), "file"],
    ["a file that is not a data URI", () => ({ file: "email\na@x.com" }), "file"],
    ["base64 that is not", () => ({ file: "data:text/csv;base64,@@@@" }), "file"],
    ["an unknown field", () => ({ file: dataUri("email\na@x.com\n"), delimiter: ";" }), "body"],
    ["an unknown list", () => ({ file: dataUri("email\na@x.com\n"), list_id: "lst_nope" }), "list_id"],
  ];

  it.each(refusals)("refuses %s with 422", async (_name, body, field) => {
    const account = await createAccount();
    const response = await call("/api/v1/contacts/import", { key: account.api_key, body: body() });
    expect(response.status).toBe(422);
    const error = await json<ErrorBody>(response);
    expect(error.code).toBe("validation_failed");
    expect(Object.keys(error.errors ?? {})).toContain(field);
  });

  it("refuses another account's list, a multipart body without a file, and a bad mapping field", async () => {
    const account = await createAccount();
    const other = await createAccount();
    const foreign = await createList(other.api_key);
    const listResponse = await call("/api/v1/contacts/import", {
      key: account.api_key,
      body: { file: dataUri("email\na@x.com\n"), list_id: foreign.id },
    });
    expect(listResponse.status).toBe(422);
    const noFile = await postMultipart("/api/v1/contacts/import", account.api_key, { mapping: "{}" });
    expect(noFile.status).toBe(422);
    // Keyed by where the field came from, as query parameters are (`query.…`).
    expect(Object.keys((await json<ErrorBody>(noFile)).errors ?? {})).toContain("form.file");
    const badMapping = await postMultipart("/api/v1/contacts/import", account.api_key, {
      file: new File(["email\na@x.com\n"], "a.csv"),
      mapping: "{not json",
    });
    expect(badMapping.status).toBe(422);
    expect(Object.keys((await json<ErrorBody>(badMapping)).errors ?? {})).toContain("mapping");
    const plain = await call("/api/v1/contacts/import", { key: account.api_key, headers: { "Content-Type": "text/plain" }, body: "email\na@x.com" });
    expect(plain.status).toBe(422);
  });

  it("answers a malformed multipart body with 422 and the error shape, as every other invalid body", async () => {
    const account = await createAccount();
    const bodies = [
      // The boundary named in the header never appears in the body.
      { contentType: "multipart/form-data; boundary=abc", body: '--xyz\r\nContent-Disposition: form-data; name="file"\r\n\r\nemail\r\n--xyz--\r\n' },
      // No boundary at all.
      { contentType: "multipart/form-data", body: "email\na@x.com\n" },
      // A part that is cut off before its closing delimiter.
      {
        contentType: "multipart/form-data; boundary=abc",
        body: '--abc\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nemail\r\na@x',
      },
    ];
    for (const { contentType, body } of bodies) {
      const response = await call("/api/v1/contacts/import", { key: account.api_key, headers: { "Content-Type": contentType }, body });
      expect(response.status, contentType).toBe(422);
      expect(response.headers.get("X-Request-Id")).toBeTruthy();
      const error = await json<ErrorBody>(response);
      expect(error).toEqual({ code: "validation_failed", message: expect.stringContaining("form"), errors: { body: [expect.any(String)] } });
    }
  });
});

// An import set up without the API, so no queue message races the direct calls of the tests that use it.
async function stagedImport(csv: string, owner?: CreatedAccount) {
  const account = owner ?? (await createAccount());
  const id = `imp_test${crypto.randomUUID().replaceAll("-", "")}`;
  const key = importObjectKey(account.id, id);
  await env.BLOBS.put(key, csv);
  const headerEnd = csv.indexOf("\n") + 1;
  await d1Of(account)
    .prepare(
      `INSERT INTO contact_imports (id, account_id, status, mapping, input_key, input_offset, total) VALUES (?, ?, 'pending', '{"email":"email","first_name":"name"}', ?, ?, ?)`,
    )
    .bind(id, account.id, key, headerEnd, csv.trim().split("\n").length - 1)
    .run();
  return { account, id };
}

describe("the import consumer resumes", () => {
  it("chunk by chunk across invocations, and a stale or repeated run changes nothing", async () => {
    const rows = Array.from({ length: 23 }, (_, i) => `p${i}@example.com,Name ${i}`);
    rows[10] = "nope,Bad";
    const { account, id } = await stagedImport(`email,name\n${rows.join("\n")}\n`);
    const tuning = { rowsPerChunk: 4, rowsPerStatement: 3, windowBytes: 128 };
    const states: string[] = [];
    for (let i = 0; i < 20; i++) {
      // A deadline in the past: one chunk per call, as if every invocation ran out of time.
      const result = await runContactImport(openCtx(env, undefined, account), id, { deadline: 0, tuning });
      states.push(result.state);
      if (result.state !== "continue") break;
    }
    expect(states.at(-1)).toBe("completed");
    expect(states.filter((state) => state === "continue").length).toBeGreaterThanOrEqual(5);
    const row = await d1Of(account).prepare("SELECT status, processed, created, updated, failed FROM contact_imports WHERE id = ?").bind(id).first();
    expect(row).toEqual({ status: "completed", processed: 23, created: 22, updated: 0, failed: 1 });
    expect(await runContactImport(openCtx(env, undefined, account), id, { deadline: 0, tuning })).toEqual({
      state: "completed",
      rowsRead: 0,
      rowsWritten: 0,
    });
    const again = await d1Of(account).prepare("SELECT processed, created FROM contact_imports WHERE id = ?").bind(id).first();
    expect(again).toEqual({ processed: 23, created: 22 });
    const errors = await d1Of(account).prepare("SELECT row, message FROM contact_import_errors WHERE import_id = ?").bind(id).all();
    expect(errors.results).toEqual([{ row: 12, message: "Invalid email address (missing_at)" }]);
    const count = await d1Of(account).prepare("SELECT count(*) AS n FROM contacts WHERE account_id = ?").bind(account.id).first<{ n: number }>();
    expect(count?.n).toBe(22);
  });

  it("two deliveries of the same chunk: one commits, the other is superseded without counting twice", async () => {
    const { account, id } = await stagedImport("email,name\na@example.com,A\nb@example.com,B\nc@example.com,C\n");
    const tuning = { rowsPerChunk: 2 };
    const [first, second] = await Promise.all([
      runContactImport(openCtx(env, undefined, account), id, { deadline: 0, tuning }),
      runContactImport(openCtx(env, undefined, account), id, { deadline: 0, tuning }),
    ]);
    expect([first.state, second.state].sort()).toEqual(["continue", "superseded"]);
    expect(await runContactImport(openCtx(env, undefined, account), id, { deadline: Date.now() + 10_000, tuning })).toMatchObject({
      state: "completed",
    });
    const row = await d1Of(account).prepare("SELECT processed, created, updated FROM contact_imports WHERE id = ?").bind(id).first();
    expect(row).toEqual({ processed: 3, created: 3, updated: 0 });
  });

  it("writes 8 D1 rows per new contact added to a list and 1 per update, and reads a bounded number per row", async () => {
    // Guards what D1 bills: every index on contacts or list_members adds to rows_written, and a join that scans the
    // account's contacts per row (instead of probing an index) multiplies rows_read with the size of the account.
    const rows = (prefix: string) => Array.from({ length: 1000 }, (_, i) => `${prefix}${i}@example.com,Name ${i}`).join("\n");
    const first = await stagedImport(`email,name\n${rows("w")}\n`);
    const list = await createList(first.account.api_key);
    const joinAccount = async (id: string) =>
      d1Of(first.account).prepare("UPDATE contact_imports SET account_id = ?, list_id = ? WHERE id = ?").bind(first.account.id, list.id, id).run();
    await joinAccount(first.id);
    const created = await runContactImport(openCtx(env, undefined, first.account), first.id, { deadline: Date.now() + 30_000 });
    // contacts: row + 4 index entries (primary key, account+email_key, account+created_at, account+lower(email_key));
    // list_members: row + 2 (primary key, contact_id); plus the chunk's progress update: the import's row and its
    // (status, updated_at) index entry, which the cron's sweep reads.
    expect(created).toMatchObject({ state: "completed", rowsWritten: 1000 * (5 + 3) + 2 });

    // The same addresses again (updates, memberships already there), then new ones into an account of 2,000.
    const again = await stagedImport(`email,name\n${rows("w")}\n`, first.account);
    await joinAccount(again.id);
    const updated = await runContactImport(openCtx(env, undefined, first.account), again.id, { deadline: Date.now() + 30_000 });
    expect(updated).toMatchObject({ state: "completed", rowsWritten: 1000 + 2 });
  });

  it("finds contacts by key through the index in every statement that takes a list of addresses", async () => {
    // A join from json_each to contacts may be planned as a scan of the account's contacts per address (it was:
    // 1 s per 500 rows in an account of 10,000); `IN (SELECT value FROM json_each(…))` probes the index instead.
    const plans: string[] = [];
    for (const query of [
      addMembersByKeySql("acc_x", "lst_x", ["a@example.com"]),
      addToListsSql("acc_x", "a@example.com", ["lst_x"]),
      contactUpsertSql("acc_x", [], { columns: ["first_name"], onExisting: "keep_blank" }),
    ]) {
      const { sql, params } = new SQLiteAsyncDialect().sqlToQuery(query);
      const plan = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .bind(...params)
        .all<{ detail: string }>();
      plans.push(plan.results.map((step) => step.detail).join("; "));
    }
    const byKey = /SEARCH c USING INDEX contacts_account_email \(account_id=\? AND email_key=\?\)/;
    for (const plan of plans) expect(plan).not.toMatch(/SCAN c\b|SEARCH c USING INDEX \w+ \(account_id=\?\)/);
    expect(plans[0]).toMatch(byKey);
    expect(plans[1]).toMatch(byKey);
    expect(plans[2]).toMatch(/SEARCH s USING COVERING INDEX sqlite_autoindex_suppressions_1 \(account_id=\? AND email=\?\)/);
  });
});

describe("the import consumer on the real queue", () => {
  it("hands over to a new message when an invocation runs out of time, and finishes with exact counts", async () => {
    // The test shares the Worker's module instance and env, so the tuning and the queue binding seen here are its.
    const sends = vi.spyOn(env.VERIFY_QUEUE, "send");
    const saved = { ...importTuning };
    Object.assign(importTuning, { rowsPerChunk: 100, invocationBudgetMs: 0 });
    try {
      const account = await createAccount();
      const rows = Array.from({ length: 450 }, (_, i) => `q${i}@example.com,Q${i}`);
      const response = await call("/api/v1/contacts/import", {
        key: account.api_key,
        body: { file: dataUri(`email,first_name\n${rows.join("\n")}\n`) },
      });
      const { id } = await json<ContactImport>(response);
      const done = await waitForImport(account.api_key, id, 60_000);
      expect(done).toMatchObject({ status: "completed", total: 450, processed: 450, created: 450, updated: 0, failed: 0 });
      const messages = sends.mock.calls
        .map(([body]) => body as { kind: string; import_id: string; offset: number; database?: string })
        .filter((body) => body.import_id === id);
      // The upload's message, then one per chunk of 100 that ran out of time.
      expect(messages.length).toBe(5);
      expect(messages.every((body) => body.kind === "contact_import")).toBe(true);
      // Each names the account database the import is in, so the consumer goes straight to it.
      expect(messages.every((body) => body.database === account.database)).toBe(true);
      const offsets = messages.map((body) => body.offset);
      expect([...offsets].sort((a, b) => a - b)).toEqual(offsets);
    } finally {
      Object.assign(importTuning, saved);
      sends.mockRestore();
    }
  }, 90_000);

  it("runs an import whose message names no database (one sent before account databases) from wherever the import is", async () => {
    const { account, id } = await stagedImport("email,name\nold1@example.com,A\nold2@example.com,B\n");
    await env.VERIFY_QUEUE.send({ kind: "contact_import", import_id: id, offset: "email,name\n".length });
    expect(await waitForImport(account.api_key, id, 30_000)).toMatchObject({ status: "completed", processed: 2, created: 2 });
  }, 40_000);
});
