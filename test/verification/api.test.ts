import { openCtx, sharedDb } from "../../src/db/client";
import { env } from "cloudflare:workers";
import Papa from "papaparse";
import { describe, expect, it } from "vitest";
import { dedupeKey } from "../../src/domain/verification";
import { createVerificationJob, planVerificationJob, CHUNK_SIZE } from "../../src/domain/verification/jobs";
import { findAccount } from "../../src/domain/accounts/accounts";
import { accountIn, allAccountRows } from "../support/databases";
import { call, createAccount, createKey, d1Of, json } from "../support/helpers";
import { deliver, dohQueriesUnder, eventsOf, freshBulkSuffix, ledgerOf, verifyBalance, waitForJob, type JobBody } from "../support/verification";

const verify = (key: string, body: unknown) => call("/api/v1/verify", { key, body });

describe("POST /api/v1/verify {email}: one address, synchronously", () => {
  it("answers the engine's result and charges 1 verification credit", async () => {
    const account = await createAccount({ verify_credits: 5 });
    const response = await verify(account.api_key, { email: "Jane.Doe@acme.verify-test" });
    expect(response.status).toBe(200);
    const body = await json(response);
    expect(body).toMatchObject({
      email: "Jane.Doe@acme.verify-test",
      result: "valid",
      status: "valid",
      sub_status: null,
      mx_found: true,
      mx_record: "mx1.acme.verify-test",
      disposable: false,
      role_based: false,
      free_provider: false,
      credits_charged: 1,
    });
    expect(Date.parse(String(body.checked_at))).not.toBeNaN();
    expect(await verifyBalance(account.api_key)).toBe(4);
    expect(await ledgerOf(response.headers.get("X-Request-Id")!)).toEqual([{ kind: "charge", amount: -1 }]);
  });

  it("bad syntax is free, needs no credit and asks no DNS", async () => {
    const account = await createAccount({ verify_credits: 0 });
    const response = await verify(account.api_key, { email: "jane.doe@@acme.verify-test" });
    expect(response.status).toBe(200);
    expect(await json(response)).toMatchObject({ result: "invalid", status: "invalid_syntax", credits_charged: 0 });
    expect(await verifyBalance(account.api_key)).toBe(0);
  });

  it("402 when the balance is 0, before any lookup", async () => {
    const account = await createAccount({ verify_credits: 0 });
    const email = `jane@zero.${freshBulkSuffix()}`;
    const response = await verify(account.api_key, { email });
    expect(response.status).toBe(402);
    expect(await json(response)).toMatchObject({ code: "insufficient_credits" });
    expect((await dohQueriesUnder(email.split("@")[1]!)).total).toBe(0);
  });

  it("emits verification.completed only when asked to (emit_event)", async () => {
    const account = await createAccount({ verify_credits: 5 });
    const quiet = await verify(account.api_key, { email: "jane@acme.verify-test" });
    expect(await eventsOf(quiet.headers.get("X-Request-Id")!)).toEqual([]);
    const loud = await verify(account.api_key, { email: "jane@acme.verify-test", emit_event: true });
    const [event] = await eventsOf(loud.headers.get("X-Request-Id")!);
    expect(event).toMatchObject({
      type: "verification.completed",
      data: { kind: "single", verification_id: loud.headers.get("X-Request-Id"), email: "jane@acme.verify-test", result: "valid", total: 1 },
    });
  });

  it("needs the verify scope", async () => {
    const account = await createAccount();
    const sendOnly = await createKey(account.api_key, { name: "send only", scopes: ["send"] });
    expect((await verify(sendOnly.key, { email: "jane@acme.verify-test" })).status).toBe(403);
    const verifyOnly = await createKey(account.api_key, { name: "verify only", scopes: ["verify"] });
    expect((await verify(verifyOnly.key, { email: "jane@acme.verify-test" })).status).toBe(200);
    expect((await verify(`sk_live_${"x".repeat(32)}`, { email: "jane@acme.verify-test" })).status).toBe(401);
  });
});

describe("POST /api/v1/verify: bad input is a 422, never a 500 or a charge", () => {
  const cases: [string, unknown, string][] = [
    ["a number", { email: 42 }, "email"],
    ["an empty address", { email: "" }, "email"],
    ["a blank address", { email: "   " }, "email"],
    ["null", { email: null }, "email"],
    ["neither field", {}, "email"],
    ["both fields", { email: "a@b.co", emails: ["a@b.co"] }, "email"],
    ["an empty list", { emails: [] }, "emails"],
    ["a list with a number", { emails: ["a@b.co", 7] }, "emails.1"],
    ["a list with an empty address", { emails: ["a@b.co", ""] }, "emails.1"],
    ["an unknown field", { email: "a@b.co", callback: "x" }, "body"],
  ];
  for (const [name, body, field] of cases) {
    it(`${name}`, async () => {
      const account = await createAccount({ verify_credits: 10 });
      const response = await verify(account.api_key, body);
      expect(response.status).toBe(422);
      const error = await json<{ code: string; errors: Record<string, string[]> }>(response);
      expect(error.code).toBe("validation_failed");
      expect(Object.keys(error.errors)).toContain(field);
      expect(await verifyBalance(account.api_key)).toBe(10);
    });
  }

  it("more than 50,000 addresses", async () => {
    const account = await createAccount({ verify_credits: 10 });
    const emails = Array.from({ length: 50_001 }, (_, i) => `a${i}@b.co`);
    const response = await verify(account.api_key, { emails });
    expect(response.status).toBe(422);
    expect(Object.keys((await json<{ errors: Record<string, string[]> }>(response)).errors)).toEqual(["emails"]);
  });

  it("a body that is not JSON", async () => {
    const account = await createAccount();
    expect((await verify(account.api_key, '{"email": ')).status).toBe(422);
  });
});

/** `count` addresses over `domains` domains under a fresh suffix, with ~5% duplicates and ~2% bad syntax, shuffled. */
function bulkInput(count: number, domains: number) {
  const suffix = freshBulkSuffix();
  const unique = Math.round(count * 0.93);
  const emails: string[] = [];
  for (let i = 0; i < unique; i++) emails.push(`user${i}@d${i % domains}.${suffix}`);
  // Duplicates differ in case only: the dedupe key lower-cases the whole address.
  for (let i = 0; i < Math.round(count * 0.05); i++) emails.push(emails[(i * 7) % unique]!.toUpperCase());
  while (emails.length < count) emails.push(`broken${emails.length}@@${suffix}`);
  // A fixed shuffle, so duplicates are spread through the input.
  for (let i = emails.length - 1; i > 0; i--) {
    const j = (i * 7919) % (i + 1);
    [emails[i], emails[j]] = [emails[j]!, emails[i]!];
  }
  return { suffix, emails };
}

async function allResults(key: string, id: string): Promise<JobBody["results"]["data"]> {
  const rows: JobBody["results"]["data"] = [];
  let cursor: string | null = null;
  do {
    const page: JobBody = await json<JobBody>(await call(`/api/v1/verify/${id}?limit=1000${cursor ? `&cursor=${cursor}` : ""}`, { key }));
    rows.push(...page.results.data);
    cursor = page.results.next_cursor;
    expect(page.results.has_more).toBe(cursor !== null);
  } while (cursor);
  return rows;
}

describe("bulk jobs through the real queue", () => {
  it("completes the job of an account in ACCOUNT_DB_1, whose rows the chunk messages lead the consumer to", async () => {
    const { emails } = bulkInput(40, 4);
    const chargeable = new Set(emails.map(dedupeKey).filter((key) => !key.includes("@@"))).size;
    const account = await accountIn("ACCOUNT_DB_1", { verify_credits: 100 });
    const accepted = await verify(account.api_key, { emails });
    expect(accepted.status).toBe(202);
    const { id } = await json<{ id: string }>(accepted);

    expect(await waitForJob(account.api_key, id)).toMatchObject({ status: "completed", total: 40, processed: 40, credits_charged: chargeable });
    expect(await verifyBalance(account.api_key)).toBe(100 - chargeable);
    expect(await eventsOf(id)).toEqual([expect.objectContaining({ type: "verification.completed" })]);
  });

  it("verifies 3,000 addresses over 100 domains: charged = total − duplicates − bad syntax, one DoH query per domain", async () => {
    const { suffix, emails } = bulkInput(3000, 100);
    const distinct = new Set(emails.map(dedupeKey));
    const badSyntax = [...distinct].filter((key) => key.includes("@@")).length;
    const duplicates = emails.length - distinct.size;
    const chargeable = distinct.size - badSyntax;
    expect(duplicates).toBe(150);
    expect(badSyntax).toBe(60);

    const account = await createAccount({ verify_credits: 5000 });
    const accepted = await verify(account.api_key, { emails });
    expect(accepted.status).toBe(202);
    const body = await json<{ id: string; status: string; total: number; credits_charged: number }>(accepted);
    expect(body).toEqual({ id: expect.stringMatching(/^vjob_/), status: "pending", total: 3000, credits_charged: chargeable });
    expect(accepted.headers.get("Location")).toBe(`/api/v1/verify/${body.id}`);
    // Charged at acceptance, before any chunk ran.
    expect(await verifyBalance(account.api_key)).toBe(5000 - chargeable);

    const job = await waitForJob(account.api_key, body.id);
    expect(job).toMatchObject({
      status: "completed",
      total: 3000,
      processed: 3000,
      credits_charged: chargeable,
      counts: { valid: chargeable, invalid: badSyntax, risky: 0, unknown: 0, duplicates, bad_syntax: badSyntax },
      error: null,
    });
    expect(Date.parse(job.completed_at!)).toBeGreaterThanOrEqual(Date.parse(job.created_at));
    expect(await verifyBalance(account.api_key)).toBe(5000 - chargeable);
    expect(await ledgerOf(body.id)).toEqual([{ kind: "charge", amount: -chargeable }]);

    // Every distinct input once, in input order, each at the position of its first occurrence.
    const results = await allResults(account.api_key, body.id);
    expect(results).toHaveLength(distinct.size);
    const firstPosition = new Map<string, number>();
    emails.forEach((email, i) => {
      if (!firstPosition.has(dedupeKey(email))) firstPosition.set(dedupeKey(email), i);
    });
    expect(results.map((row) => row.position)).toEqual([...firstPosition.values()]);
    expect(results.every((row) => emails[row.position]!.trim() === row.email)).toBe(true);
    expect(results.find((row) => String(row.email).includes("@@"))).toMatchObject({ result: "invalid", status: "invalid_syntax" });

    // DNS: at most one query per distinct domain and record type; the wildcard has MX, so exactly one MX each.
    const doh = await dohQueriesUnder(suffix);
    expect(doh.total).toBeLessThanOrEqual(100 * 3);
    expect(Object.keys(doh.byName).filter((name) => name.endsWith("/MX"))).toHaveLength(100);
    expect(Math.max(...Object.values(doh.byName))).toBe(1);

    // CSV: one row per distinct input, all fields.
    const csv = await call(`/api/v1/verify/${body.id}?format=csv`, { key: account.api_key });
    expect(csv.status).toBe(200);
    expect(csv.headers.get("Content-Type")).toBe("text/csv; charset=utf-8");
    const parsed = Papa.parse<Record<string, string>>(await csv.text(), { header: true, skipEmptyLines: true });
    expect(parsed.errors).toEqual([]);
    expect(parsed.data).toHaveLength(distinct.size);
    expect(parsed.meta.fields).toEqual([
      "position",
      "email",
      "normalized",
      "account",
      "domain",
      "result",
      "status",
      "sub_status",
      "mx_found",
      "mx_record",
      "disposable",
      "role_based",
      "free_provider",
      "did_you_mean",
      "score",
      "quality",
      "syntax_valid",
      "checked_at",
    ]);
    expect(new Set(parsed.data.map((row) => dedupeKey(row.email!))).size).toBe(distinct.size);

    // The finished job emitted verification.completed once.
    const events = await eventsOf(body.id);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: "verification.completed",
      data: { verification_id: body.id, kind: "bulk", status: "completed", total: 3000 },
    });
  }, 120_000);

  it("refuses a job the balance cannot pay for with 402 before any work; duplicates and bad syntax do not count", async () => {
    const suffix = freshBulkSuffix();
    const account = await createAccount({ verify_credits: 10 });
    const eleven = Array.from({ length: 11 }, (_, i) => `u${i}@d${i}.${suffix}`);
    const refused = await verify(account.api_key, { emails: eleven });
    expect(refused.status).toBe(402);
    expect(await json(refused)).toMatchObject({ code: "insufficient_credits", message: expect.stringContaining("needs 11, 10 available") });
    expect(await verifyBalance(account.api_key)).toBe(10);
    const jobs = await d1Of(account).prepare("SELECT COUNT(*) AS n FROM verification_jobs WHERE account_id = ?").bind(account.id).first<number>("n");
    expect(jobs).toBe(0);
    expect((await dohQueriesUnder(suffix)).total).toBe(0);

    // Ten distinct, plus a duplicate and a bad address: exactly the balance.
    const accepted = await verify(account.api_key, { emails: [...eleven.slice(0, 10), eleven[0]!.toUpperCase(), "not-an-address"] });
    expect(accepted.status).toBe(202);
    expect(await json(accepted)).toMatchObject({ total: 12, credits_charged: 10 });
    expect(await verifyBalance(account.api_key)).toBe(0);
  });

  it("concurrent jobs and checks never spend more than the balance", async () => {
    const suffix = freshBulkSuffix();
    const account = await createAccount({ verify_credits: 10 });
    const job = (n: number) => verify(account.api_key, { emails: Array.from({ length: 8 }, (_, i) => `u${n}-${i}@d${i}.${suffix}`) });
    const statuses = (await Promise.all([job(1), job(2), job(3)])).map((response) => response.status).sort();
    expect(statuses).toEqual([202, 402, 402]);
    const singles = await Promise.all(Array.from({ length: 4 }, () => verify(account.api_key, { email: `jane@single.${suffix}` })));
    expect(singles.map((response) => response.status).sort()).toEqual([200, 200, 402, 402]);
    expect(await verifyBalance(account.api_key)).toBe(0);
  });

  it("a job of only bad syntax costs nothing and still completes", async () => {
    const account = await createAccount({ verify_credits: 0 });
    const accepted = await verify(account.api_key, { emails: ["nope", "nope", "still@@nope"] });
    expect(accepted.status).toBe(202);
    const { id } = await json<{ id: string }>(accepted);
    const job = await waitForJob(account.api_key, id);
    expect(job).toMatchObject({ status: "completed", processed: 3, credits_charged: 0, counts: { invalid: 2, bad_syntax: 2, duplicates: 1 } });
  });

  it("another account's job is a 404, and so is an unknown id", async () => {
    const owner = await createAccount({ verify_credits: 10 });
    const { id } = await json<{ id: string }>(await verify(owner.api_key, { emails: ["nope"] }));
    const other = await createAccount();
    expect((await call(`/api/v1/verify/${id}`, { key: other.api_key })).status).toBe(404);
    expect((await call(`/api/v1/verify/${id}?format=csv`, { key: other.api_key })).status).toBe(404);
    expect((await call("/api/v1/verify/vjob_missing", { key: owner.api_key })).status).toBe(404);
    expect((await call(`/api/v1/verify/${id}?cursor=garbage`, { key: owner.api_key })).status).toBe(422);
  });
});

describe("chunks under at-least-once delivery and the dead-letter queue", () => {
  /** A job accepted but not enqueued, so the test delivers its chunks itself. */
  async function acceptedJob(emails: string[], credits = 10_000) {
    const account = await createAccount({ verify_credits: credits });
    const row = await findAccount(sharedDb(env), account.id);
    const created = await createVerificationJob(openCtx(env, undefined, account), { account: row!, emails, source: "api" });
    if (created.kind !== "created") throw new Error(`the job was refused: ${created.kind}`);
    const { job, plan } = created;
    const chunks = plan.chunks.map((chunk) => ({ kind: "verification_chunk", job_id: job.id, database: account.database, ...chunk }));
    return { account, job, plan, chunks };
  }

  async function jobRow(id: string) {
    const [row] = await allAccountRows<{ status: string; processed: number; counts: string; credits_charged: number }>(
      "SELECT status, processed, counts, credits_charged FROM verification_jobs WHERE id = ?",
      id,
    );
    return row;
  }

  const resultCount = async (id: string) =>
    (await allAccountRows<{ n: number }>("SELECT COUNT(*) AS n FROM verification_results WHERE job_id = ?", id)).reduce((sum, row) => sum + row.n, 0);

  it("plans chunks of at most 500 that keep a domain together", () => {
    const emails = [
      ...Array.from({ length: 300 }, (_, i) => `a${i}@one.example`),
      ...Array.from({ length: 300 }, (_, i) => `b${i}@two.example`),
      ...Array.from({ length: 1200 }, (_, i) => `c${i}@big.example`),
    ];
    const plan = planVerificationJob(emails);
    expect(plan.chunks.every((chunk) => chunk.count <= CHUNK_SIZE)).toBe(true);
    expect(plan.chunks.reduce((sum, chunk) => sum + chunk.count, 0)).toBe(1800);
    const domainsOf = plan.chunks.map(
      (chunk) => new Set(plan.input.emails.slice(chunk.offset, chunk.offset + chunk.count).map((e) => e.split("@")[1])),
    );
    // one.example and two.example (300 each) never share a chunk, and neither is split.
    expect(domainsOf.filter((domains) => domains.has("one.example"))).toHaveLength(1);
    expect(domainsOf.filter((domains) => domains.has("two.example"))).toHaveLength(1);
  });

  it("a redelivered chunk writes nothing twice and does not count twice", async () => {
    const suffix = freshBulkSuffix();
    const emails = [...Array.from({ length: 700 }, (_, i) => `u${i}@d${i % 7}.${suffix}`), `u1@D1.${suffix.toUpperCase()}`];
    const { account, job, chunks } = await acceptedJob(emails);
    expect(chunks.length).toBe(2);

    expect((await deliver("mailforge-verify", [chunks[0]])).explicitAcks).toHaveLength(1);
    const afterFirst = await jobRow(job.id);
    expect(afterFirst!.status).toBe("processing");
    // The same chunk twice in one batch, then again: nothing changes.
    await deliver("mailforge-verify", [chunks[0], chunks[0]], 2);
    expect(await jobRow(job.id)).toEqual(afterFirst);

    await deliver("mailforge-verify", [chunks[1]]);
    const done = await jobRow(job.id);
    expect(done).toMatchObject({ status: "completed", processed: 701, credits_charged: 700 });
    expect(JSON.parse(done!.counts)).toEqual({ valid: 700, invalid: 0, risky: 0, unknown: 0, duplicates: 1, bad_syntax: 0 });
    expect(await resultCount(job.id)).toBe(700);

    await deliver("mailforge-verify", chunks, 3);
    expect(await jobRow(job.id)).toEqual(done);
    expect(await resultCount(job.id)).toBe(700);
    expect(await eventsOf(job.id)).toHaveLength(1);
    expect(await verifyBalance(account.api_key)).toBe(10_000 - 700);
  });

  it("a chunk in the DLQ fails the job once and refunds only what was not verified", async () => {
    const suffix = freshBulkSuffix();
    const emails = [
      ...Array.from({ length: 300 }, (_, i) => `a${i}@one.${suffix}`),
      ...Array.from({ length: 300 }, (_, i) => `b${i}@two.${suffix}`),
      "bad@@address",
    ];
    const { account, job, chunks } = await acceptedJob(emails, 1000);
    expect(chunks).toHaveLength(2);
    expect(await verifyBalance(account.api_key)).toBe(400);

    const verified = chunks.find((chunk) => chunk.offset === 0)!; // the bad address and one domain
    const dead = chunks.find((chunk) => chunk.offset !== 0)!;
    await deliver("mailforge-verify", [verified]);
    const result = await deliver("mailforge-verify-dlq", [dead, dead], 4);
    expect(result.explicitAcks).toHaveLength(2);

    const failed = await json<JobBody>(await call(`/api/v1/verify/${job.id}`, { key: account.api_key }));
    expect(failed).toMatchObject({ status: "failed", error: expect.stringContaining("could not be verified"), credits_charged: 300 });
    expect(failed.completed_at).not.toBeNull();
    expect(await ledgerOf(job.id)).toEqual([
      { kind: "charge", amount: -600 },
      { kind: "refund", amount: 300 },
    ]);
    expect(await verifyBalance(account.api_key)).toBe(700);

    // Later deliveries of the dead chunk (or the DLQ again) change nothing.
    await deliver("mailforge-verify", [dead], 2);
    await deliver("mailforge-verify-dlq", [dead]);
    expect(await verifyBalance(account.api_key)).toBe(700);
    expect(await resultCount(job.id)).toBe(301);
    const events = await eventsOf(job.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ kind: "bulk", status: "failed", credits_charged: 300 });
  });

  it("retries a chunk whose input cannot be read", async () => {
    const { job, chunks } = await acceptedJob(["jane@acme.verify-test"]);
    await env.BLOBS.delete(job.inputKey!);
    const result = await deliver("mailforge-verify", chunks, 2);
    expect(result.retryMessages).toHaveLength(1);
    expect(result.explicitAcks).toEqual([]);
    expect((await jobRow(job.id))!.status).toBe("pending");
  });
});
