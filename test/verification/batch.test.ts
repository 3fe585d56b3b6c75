import { openCtx, sharedDb } from "../../src/db/client";
import { env } from "cloudflare:workers";
import Papa from "papaparse";
import { describe, expect, it } from "vitest";
import { findAccount } from "../../src/domain/accounts/accounts";
import { createVerificationJob } from "../../src/domain/verification/jobs";
import { call, createAccount, d1Of, json } from "../support/helpers";
import { csvDataUri, freshBulkSuffix, sleep, verifyBalance } from "../support/verification";

type Batch = { id: number; name: string; status: string; total: number; created_at: string; updated_at: string };
type BatchStatus = Batch & {
  processed: number;
  progress: number;
  counts: Record<string, number>;
  credits_charged: number;
  completed_at: string | null;
  download_url: string | null;
};

const upload = (apikey: string, body: unknown) => call(`/api/batch/upload?apikey=${apikey}`, { body });
const offsetTimestamp = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00$/;

async function waitForBatch(apikey: string, id: number): Promise<BatchStatus> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    // Paced under the verification API's 5 requests per second.
    await sleep(300);
    const response = await call(`/api/batch/${id}?apikey=${apikey}`);
    expect(response.status).toBe(200);
    const { data } = await json<{ data: BatchStatus }>(response);
    if (data.status === "completed" || data.status === "failed") return data;
    if (Date.now() > deadline) throw new Error(`batch ${id} still ${data.status}`);
  }
}

async function download(apikey: string, id: number) {
  await sleep(250);
  const response = await call(`/api/batch/${id}/download?apikey=${apikey}`);
  expect(response.status).toBe(200);
  expect(response.headers.get("Content-Type")).toBe("text/csv; charset=utf-8");
  const parsed = Papa.parse<Record<string, string>>(await response.text(), { header: true, skipEmptyLines: true });
  expect(parsed.errors).toEqual([]);
  return parsed;
}

describe("POST /api/batch/upload → GET /api/batch/{id} → /download", () => {
  it("reads a CSV with a BOM, CRLF, quoted fields and an 'E-mail Address' column, keeping duplicates", async () => {
    const suffix = freshBulkSuffix();
    const rows = [
      ["Name", "E-mail Address", "Note"],
      ["Doe, Jane", `jane@one.${suffix}`, 'said "hi"'],
      ["Multi\r\nline", `joe@two.${suffix}`, ""],
      ["Dup", `JANE@one.${suffix}`, ""],
      ["Broken", "jane@@one", ""],
      ["Role", `admin@two.${suffix}`, ""],
    ];
    const csv = `\uFEFF${Papa.unparse(rows, { newline: "\r\n", quotes: true })}\r\n`;
    const account = await createAccount({ verify_credits: 10 });
    const response = await upload(account.api_key, { file: csvDataUri(csv, "leads%20may.csv"), remove_duplicates: false, first_row_is_header: true });
    expect(response.status).toBe(200);
    const body = await json<{ data: Batch; message: string }>(response);
    expect(body.data).toEqual({
      id: expect.any(Number),
      name: "leads may.csv",
      status: "pending",
      total: 5,
      created_at: expect.stringMatching(offsetTimestamp),
      updated_at: expect.stringMatching(offsetTimestamp),
    });
    expect(Number.isInteger(body.data.id)).toBe(true);
    expect(body.message).toEqual(expect.any(String));
    // jane, joe, admin: the duplicate and the bad address are free.
    expect(await verifyBalance(account.api_key)).toBe(7);

    const done = await waitForBatch(account.api_key, body.data.id);
    expect(done).toMatchObject({
      status: "completed",
      total: 5,
      processed: 5,
      progress: 100,
      credits_charged: 3,
      counts: { valid: 2, invalid: 1, risky: 1, unknown: 0, duplicates: 1, bad_syntax: 1 },
      completed_at: expect.stringMatching(offsetTimestamp),
      download_url: `/api/batch/${body.data.id}/download`,
    });

    const results = await download(account.api_key, body.data.id);
    expect(results.meta.fields).toEqual([
      "email",
      "status",
      "sub_status",
      "account",
      "domain",
      "quality",
      "score",
      "mx_record",
      "did_you_mean",
      "checked_at",
    ]);
    // One row per file row, in file order; the duplicate repeats the first occurrence's result.
    expect(results.data.map((row) => [row.email, row.status])).toEqual([
      [`jane@one.${suffix}`, "valid"],
      [`joe@two.${suffix}`, "valid"],
      [`JANE@one.${suffix}`, "valid"],
      ["jane@@one", "invalid"],
      [`admin@two.${suffix}`, "do_not_mail"],
    ]);
    expect(results.data[4]).toMatchObject({ sub_status: "role_based", quality: "risky", mx_record: "mx.bulk.verify-test" });
    expect(results.data[2]).toMatchObject({ account: "JANE", domain: `one.${suffix}` });
    expect(results.data[0]!.checked_at).toMatch(offsetTimestamp);
  });

  it("remove_duplicates drops repeats from the results; the header is found without first_row_is_header", async () => {
    const suffix = freshBulkSuffix();
    const csv = ["id;email", `1;ann@a.${suffix}`, `2;bob@b.${suffix}`, `3; ann@a.${suffix} `, `4;Ann@A.${suffix}`, "", `5;cy@c.${suffix}`].join("\n");
    const account = await createAccount({ verify_credits: 10 });
    const response = await upload(account.api_key, { file: csvDataUri(csv), remove_duplicates: true });
    expect(response.status).toBe(200);
    const { data } = await json<{ data: Batch }>(response);
    expect(data).toMatchObject({ name: "list.csv", total: 5 });
    const done = await waitForBatch(account.api_key, data.id);
    expect(done).toMatchObject({ status: "completed", credits_charged: 3, counts: { valid: 3, duplicates: 2 } });
    const results = await download(account.api_key, data.id);
    expect(results.data.map((row) => row.email)).toEqual([`ann@a.${suffix}`, `bob@b.${suffix}`, `cy@c.${suffix}`]);
  });

  it("first_row_is_header false: the first row is an address row, the email column is the first", async () => {
    const suffix = freshBulkSuffix();
    const csv = `email,name\nann@a.${suffix},Ann\n`;
    const account = await createAccount({ verify_credits: 10 });
    const { data } = await json<{ data: Batch }>(await upload(account.api_key, { file: csvDataUri(csv), first_row_is_header: false }));
    expect(data.total).toBe(2);
    await waitForBatch(account.api_key, data.id);
    const results = await download(account.api_key, data.id);
    expect(results.data.map((row) => [row.email, row.status])).toEqual([
      ["email", "invalid"],
      [`ann@a.${suffix}`, "valid"],
    ]);
  });

  it("a plain list without a header uses the first column", async () => {
    const suffix = freshBulkSuffix();
    const account = await createAccount({ verify_credits: 10 });
    const response = await upload(account.api_key, { file: csvDataUri(`ann@a.${suffix}\r\nbob@b.${suffix}\r\n`, "plain.txt", "text/plain") });
    const { data } = await json<{ data: Batch }>(response);
    expect(data).toMatchObject({ total: 2, name: "plain.txt" });
    expect((await waitForBatch(account.api_key, data.id)).counts.valid).toBe(2);
  });
});

describe("POST /api/batch/upload: a bad file is a 422 with the reason, never a 500 or a charge", () => {
  const zip = new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00, 0x06, 0x00]);
  const latin1 = new Uint8Array([0x65, 0x6d, 0x61, 0x69, 0x6c, 0x0a, 0x6a, 0xe9, 0x40, 0x78, 0x2e, 0x63, 0x6f]);
  const cases: [string, unknown, RegExp][] = [
    ["a plain string", "ann@example.com", /not a data URI/],
    ["a URL", "https://example.com/list.csv", /not a data URI/],
    ["a data URI that is not base64", "data:text/csv;name=a.csv,email%0Aann%40example.com", /not base64/],
    ["content that is not base64", "data:text/csv;name=a.csv;base64,@@@not base64@@@", /not valid base64/],
    ["base64 of the wrong length", "data:text/csv;name=a.csv;base64,ZW1haWw", /not valid base64/],
    ["an image", csvDataUri("email\nann@example.com\n", "a.png", "image/png"), /not CSV: the data URI says image\/png/],
    ["a zip (xlsx) file", csvDataUri(zip, "a.xlsx", "application/octet-stream"), /ZIP archive/],
    ["binary content", csvDataUri(new Uint8Array([0x65, 0x00, 0x66, 0x0a])), /binary/],
    ["text that is not UTF-8", csvDataUri(latin1), /not UTF-8/],
    ["an empty file", "data:text/csv;name=a.csv;base64,", /empty/],
    ["only blank lines", csvDataUri("\r\n\r\n  \r\n"), /empty|no rows/],
    ["a header and no rows", csvDataUri("email\r\n"), /header but no rows/],
    ["an unclosed quote", csvDataUri('email\n"ann@example.com\nbob@example.com\n'), /not CSV: .*[Qq]uote/],
  ];
  for (const [name, file, reason] of cases) {
    it(name, async () => {
      const account = await createAccount({ verify_credits: 10 });
      const response = await upload(account.api_key, { file });
      expect(response.status).toBe(422);
      const body = await json<{ code: string; message: string; errors: Record<string, string[]> }>(response);
      expect(body.code).toBe("validation_failed");
      expect(body.errors.file?.[0]).toMatch(reason);
      expect(body.message).toMatch(reason);
      expect(await verifyBalance(account.api_key)).toBe(10);
    });
  }

  it("a missing or non-string file, or a non-boolean flag", async () => {
    const account = await createAccount({ verify_credits: 10 });
    for (const [body, field] of [
      [{}, "file"],
      [{ file: 42 }, "file"],
      [{ file: csvDataUri("email\na@b.co\n"), remove_duplicates: "yes" }, "remove_duplicates"],
    ] as const) {
      const response = await upload(account.api_key, body);
      expect(response.status).toBe(422);
      expect(Object.keys((await json<{ errors: Record<string, string[]> }>(response)).errors)).toContain(field);
      await sleep(220);
    }
  });

  it("more than 50,000 rows", async () => {
    const account = await createAccount({ verify_credits: 10 });
    const csv = Array.from({ length: 50_001 }, (_, i) => `a${i}@b.co`).join("\n");
    const response = await upload(account.api_key, { file: csvDataUri(csv) });
    expect(response.status).toBe(422);
    expect((await json<{ errors: Record<string, string[]> }>(response)).errors.file?.[0]).toMatch(/50001 rows.*at most 50000/);
  });

  it("a 60 MB upload is a 413", async () => {
    const account = await createAccount({ verify_credits: 10 });
    const body = `{"file":"data:text/csv;name=big.csv;base64,${"QUFB".repeat(15 * 1024 * 1024)}"}`;
    const response = await upload(account.api_key, body);
    expect(response.status).toBe(413);
    expect(await json(response)).toMatchObject({ code: "payload_too_large", message: expect.stringContaining("50 MB") });
    expect(await verifyBalance(account.api_key)).toBe(10);
  });

  it("a file the balance cannot pay for is a 402 before any work", async () => {
    const suffix = freshBulkSuffix();
    const account = await createAccount({ verify_credits: 2 });
    const response = await upload(account.api_key, { file: csvDataUri(`a@a.${suffix}\nb@b.${suffix}\nc@c.${suffix}\n`) });
    expect(response.status).toBe(402);
    expect(await json(response)).toMatchObject({ code: "insufficient_credits" });
    expect(await verifyBalance(account.api_key)).toBe(2);
    const jobs = await d1Of(account).prepare("SELECT COUNT(*) AS n FROM verification_jobs WHERE account_id = ?").bind(account.id).first<number>("n");
    expect(jobs).toBe(0);
  });
});

describe("batch ids belong to one account", () => {
  it("another account's batch is a 404 (status and download); a running batch cannot be downloaded yet", async () => {
    const owner = await createAccount({ verify_credits: 10 });
    const row = await findAccount(sharedDb(env), owner.id);
    // Accepted but never enqueued: it stays pending.
    const created = await createVerificationJob(openCtx(env, undefined, owner), {
      account: row!,
      emails: ["ann@acme.verify-test"],
      source: "batch",
      name: "x.csv",
    });
    if (created.kind !== "created") throw new Error(`the job was refused: ${created.kind}`);
    const { job } = created;
    const other = await createAccount({ verify_credits: 10 });
    expect((await call(`/api/batch/${job.seq}?apikey=${other.api_key}`)).status).toBe(404);
    expect((await call(`/api/batch/${job.seq}/download?apikey=${other.api_key}`)).status).toBe(404);

    const mine = await call(`/api/batch/${job.seq}?apikey=${owner.api_key}`);
    expect(await json(mine)).toMatchObject({ data: { id: job.seq, name: "x.csv", status: "pending", progress: 0, download_url: null } });
    const early = await call(`/api/batch/${job.seq}/download?apikey=${owner.api_key}`);
    expect(early.status).toBe(409);
    expect(await json(early)).toMatchObject({ code: "conflict" });

    await sleep(250);
    expect((await call(`/api/batch/999999999?apikey=${owner.api_key}`)).status).toBe(404);
    expect((await call(`/api/batch/abc?apikey=${owner.api_key}`)).status).toBe(422);
    expect((await call(`/api/batch/${job.seq}`)).status).toBe(401);
  });
});
