import { openCtx, sharedDb } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { findAccount } from "../../src/domain/accounts/accounts";
import { importObjectKey, runContactImport } from "../../src/domain/contacts/import";
import { recheckDomains } from "../../src/domain/domains/domains";
import { CHUNK_SIZE, createVerificationJob, inputChunks, planVerificationJob } from "../../src/domain/verification/jobs";
import worker from "../../src/index";
import { runScheduledTasks } from "../../src/lib/scheduled";
import { waitForImport } from "../support/contacts";
import { call, createAccount, d1Of, json, type CreatedAccount } from "../support/helpers";
import { publishRecords, uniqueDomain, type Domain } from "../support/sending";
import { deliver, freshBulkSuffix, verifyBalance, waitForJob } from "../support/verification";

// The cron's sweeps, run through the Worker's real scheduled handler against real D1, R2 and queues. A queue message
// is "lost" by never sending it (the job or import is set up without the API) and time is moved by back-dating rows.

const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

async function runCron(): Promise<void> {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ cron: "*/15 * * * *" }), env, ctx);
  await waitOnExecutionContext(ctx);
}

/** The structured error lines (src/lib/log.ts) written while `run` ran. */
async function errorLogsDuring(run: () => Promise<void>): Promise<Record<string, unknown>[]> {
  const spy = vi.spyOn(console, "error");
  try {
    await run();
    return spy.mock.calls.flatMap(([line]) => {
      try {
        return [JSON.parse(String(line)) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  } finally {
    spy.mockRestore();
  }
}

/** A bulk job of `count` addresses, accepted and charged but whose chunk messages never reached the queue. */
async function lostVerificationJob(account: CreatedAccount, count: number) {
  const suffix = freshBulkSuffix();
  const emails = Array.from({ length: count }, (_, i) => `user${i}@d${i % 3}.${suffix}`);
  const row = await findAccount(sharedDb(env), account.id);
  const created = await createVerificationJob(openCtx(env, undefined, account), { account: row!, emails, source: "api" });
  if (created.kind !== "created") throw new Error(`the job was refused: ${created.kind}`);
  return { job: created.job, plan: created.plan };
}

const backdateJob = (account: CreatedAccount, id: string, updatedMinutesAgo: number, createdMinutesAgo = updatedMinutesAgo) =>
  d1Of(account)
    .prepare("UPDATE verification_jobs SET updated_at = ?2, created_at = ?3 WHERE id = ?1")
    .bind(id, minutesAgo(updatedMinutesAgo), minutesAgo(createdMinutesAgo))
    .run();

describe("cron: verification jobs whose queue messages were lost", () => {
  it("resumes a stale job: the chunk whose message was lost runs, and the job completes with every address counted once", async () => {
    const account = await createAccount({ verify_credits: 1000 });
    const { job, plan } = await lostVerificationJob(account, CHUNK_SIZE + 40);
    expect(plan.chunks).toHaveLength(2);
    // The first chunk was delivered and committed; the second message was lost.
    const [first] = plan.chunks;
    await deliver("mailforge-verify", [{ kind: "verification_chunk", job_id: job.id, database: account.database, ...first }]);
    await backdateJob(account, job.id, 20);

    // Not stale yet after 5 minutes: the cron leaves it alone.
    await d1Of(account).prepare("UPDATE verification_jobs SET updated_at = ?2 WHERE id = ?1").bind(job.id, minutesAgo(5)).run();
    await runCron();
    const untouched = await d1Of(account)
      .prepare("SELECT status, processed, updated_at FROM verification_jobs WHERE id = ?")
      .bind(job.id)
      .first<{ updated_at: string }>();
    expect(untouched).toMatchObject({ status: "processing", processed: first!.count });
    expect(Date.parse(untouched!.updated_at)).toBeLessThan(Date.now() - 4 * 60_000);

    await backdateJob(account, job.id, 20);
    await runCron();
    const done = await waitForJob(account.api_key, job.id);
    expect(done).toMatchObject({ status: "completed", total: CHUNK_SIZE + 40, processed: CHUNK_SIZE + 40, credits_charged: CHUNK_SIZE + 40 });
    const { valid, invalid, risky, unknown } = done.counts;
    expect(valid + invalid + risky + unknown).toBe(CHUNK_SIZE + 40);
    const rows = await d1Of(account).prepare("SELECT count(*) AS n FROM verification_results WHERE job_id = ?").bind(job.id).first<{ n: number }>();
    expect(rows?.n).toBe(CHUNK_SIZE + 40);
    expect(await verifyBalance(account.api_key)).toBe(1000 - (CHUNK_SIZE + 40));
  }, 60_000);

  it("finds a job's chunks again from its stored input, exactly as they were planned", () => {
    const emails = [
      ...Array.from({ length: CHUNK_SIZE + 7 }, (_, i) => `big${i}@large.example`),
      ...Array.from({ length: 30 }, (_, i) => `x${i}@small${i % 4}.example`),
      "not an address",
      "@nobody",
    ];
    const plan = planVerificationJob(emails.reverse());
    expect(plan.chunks.length).toBeGreaterThan(2);
    expect(inputChunks(plan.input)).toEqual(plan.chunks);
  });

  it("leaves the sweeps of a database alone while an account moves from or to it, and catches up the run after", async () => {
    const account = await createAccount({ verify_credits: 1000 });
    const { job } = await lostVerificationJob(account, 5);
    await backdateJob(account, job.id, 20, 180);
    // another account of the same database being moved (as the move's pause marks it in the directory)
    const mover = await createAccount();
    const into = mover.database === account.database ? "ACCOUNT_DB_9" : account.database;
    await env.DB.prepare("UPDATE accounts SET moving_to = ? WHERE id = ?").bind(into, mover.id).run();
    const status = async () => (await json<{ status: string }>(await call(`/api/v1/verify/${job.id}?limit=1`, { key: account.api_key }))).status;
    const before = await status();
    expect(before).not.toBe("failed");
    try {
      await runCron();
      expect(await status()).toBe(before);
    } finally {
      await env.DB.prepare("UPDATE accounts SET moving_to = NULL WHERE id = ?").bind(mover.id).run();
    }
    await runCron();
    expect(await status()).toBe("failed");
  }, 60_000);

  it("fails a job still stuck past its age limit and refunds the addresses it did not verify", async () => {
    const account = await createAccount({ verify_credits: 1000 });
    const { job, plan } = await lostVerificationJob(account, CHUNK_SIZE + 40);
    const [first, second] = plan.chunks;
    await deliver("mailforge-verify", [{ kind: "verification_chunk", job_id: job.id, database: account.database, ...first }]);
    expect(await verifyBalance(account.api_key)).toBe(1000 - (CHUNK_SIZE + 40));
    // Resumed again and again for three hours without the second chunk ever committing.
    await backdateJob(account, job.id, 20, 180);

    await runCron();
    const failed = await json<{ status: string; processed: number; credits_charged: number; error: string }>(
      await call(`/api/v1/verify/${job.id}?limit=1`, { key: account.api_key }),
    );
    expect(failed).toMatchObject({
      status: "failed",
      processed: first!.count,
      credits_charged: first!.count,
      error: expect.stringContaining("stopped making progress"),
    });
    expect(await verifyBalance(account.api_key)).toBe(1000 - first!.count);
    const refunds = await d1Of(account).prepare("SELECT amount FROM credit_ledger WHERE reference_id = ? AND kind = 'refund'").bind(job.id).all();
    expect(refunds.results).toEqual([{ amount: second!.count }]);

    // Another cron run refunds nothing more.
    await backdateJob(account, job.id, 20, 180);
    await runCron();
    expect(await verifyBalance(account.api_key)).toBe(1000 - first!.count);
  }, 60_000);
});

describe("cron: contact imports whose queue message was lost", () => {
  // Set up without the API so no queue message exists: the one that should carry the import on is "lost".
  async function stagedImport(rows: number) {
    const account = await createAccount();
    const csv = `email,name\n${Array.from({ length: rows }, (_, i) => `p${i}@example.com,Name ${i}`).join("\n")}\n`;
    const id = `imp_cron${crypto.randomUUID().replaceAll("-", "")}`;
    const key = importObjectKey(account.id, id);
    await env.BLOBS.put(key, csv);
    await d1Of(account)
      .prepare(
        `INSERT INTO contact_imports (id, account_id, status, mapping, input_key, input_offset, total) VALUES (?, ?, 'pending', '{"email":"email","first_name":"name"}', ?, ?, ?)`,
      )
      .bind(id, account.id, key, csv.indexOf("\n") + 1, rows)
      .run();
    return { account, id };
  }
  const backdateImport = (account: CreatedAccount, id: string, updatedMinutesAgo: number, createdMinutesAgo = updatedMinutesAgo) =>
    d1Of(account)
      .prepare("UPDATE contact_imports SET updated_at = ?2, created_at = ?3 WHERE id = ?1")
      .bind(id, minutesAgo(updatedMinutesAgo), minutesAgo(createdMinutesAgo))
      .run();

  it("resumes a stale import from the offset it reached, counting every row once", async () => {
    const { account, id } = await stagedImport(30);
    // One chunk committed, then the invocation ran out of time and its hand-over message was lost.
    expect(await runContactImport(openCtx(env, undefined, account), id, { deadline: 0, tuning: { rowsPerChunk: 10 } })).toMatchObject({
      state: "continue",
    });
    await backdateImport(account, id, 20);

    await runCron();
    const done = await waitForImport(account.api_key, id);
    expect(done).toMatchObject({ status: "completed", total: 30, processed: 30, created: 30, updated: 0, failed: 0 });
    const count = await d1Of(account).prepare("SELECT count(*) AS n FROM contacts WHERE account_id = ?").bind(account.id).first<{ n: number }>();
    expect(count?.n).toBe(30);
  }, 30_000);

  it("fails an import still stuck past its age limit, keeping the rows imported so far", async () => {
    const { account, id } = await stagedImport(30);
    await runContactImport(openCtx(env, undefined, account), id, { deadline: 0, tuning: { rowsPerChunk: 10 } });
    await backdateImport(account, id, 20, 180);

    await runCron();
    const body = await json<{ status: string; processed: number; error: string }>(
      await call(`/api/v1/contacts/import/${id}`, { key: account.api_key }),
    );
    expect(body).toMatchObject({ status: "failed", processed: 10, error: expect.stringContaining("stopped making progress") });
    expect(await env.BLOBS.head(importObjectKey(account.id, id))).toBeNull();
  });
  it("an import the queue refuses is failed at once with a 503, not left pending for the cron", async () => {
    const account = await createAccount();
    // The test shares the Worker's env, so the route sees this refusing queue.
    const refusing = vi.spyOn(env.VERIFY_QUEUE, "send").mockRejectedValue(new Error("queue unavailable"));
    try {
      const response = await call("/api/v1/contacts/import", {
        key: account.api_key,
        body: { file: `data:text/csv;base64,${btoa("email\nann@example.com\n")}` },
      });
      expect(response.status).toBe(503);
      expect(response.headers.get("retry-after")).toBe("5");
      expect(await json(response)).toMatchObject({ code: "upstream_unavailable" });
    } finally {
      refusing.mockRestore();
    }
    const row = await d1Of(account)
      .prepare("SELECT status, error, input_key FROM contact_imports WHERE account_id = ?")
      .bind(account.id)
      .first<{ input_key: string }>();
    expect(row).toMatchObject({ status: "failed", error: "The import could not be queued" });
    expect(await env.BLOBS.head(row!.input_key)).toBeNull();
  });
});

describe("cron: isolation", () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  async function servfail(name: string) {
    const response = await fetch(`${env.TEST_DOH_ADMIN_URL}/zone/${encodeURIComponent(name)}`, {
      method: "PUT",
      body: JSON.stringify({ $servfail: true }),
    });
    expect(response.status).toBe(200);
  }

  async function addDomain(key: string, label: string): Promise<Domain> {
    const response = await call("/api/v1/domains", { key, body: { name: uniqueDomain(label) } });
    expect(response.status).toBe(201);
    return json<Domain>(response);
  }

  it("recheckDomains goes on past a domain whose DNS fails and one whose write fails, and logs the failure", async () => {
    const account = await createAccount();
    const dnsDown = await addDomain(account.api_key, "servfail");
    const writeFails = await addDomain(account.api_key, "writefail");
    const healthy = await addDomain(account.api_key, "healthy");
    for (const domain of [dnsDown, writeFails, healthy]) await publishRecords(domain);
    // Its own records fail; the return path's MX (BOUNCE_DOMAIN) is shared by every domain of the run.
    for (const record of dnsDown.records.filter((candidate) => candidate.type === "TXT")) await servfail(record.name);
    // A D1 write that fails for this one domain only.
    await env.DB.prepare(
      `CREATE TRIGGER cron_test_write_fails BEFORE UPDATE ON domains WHEN OLD.id = '${writeFails.id}' BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`,
    ).run();
    cleanups.push(() => env.DB.prepare("DROP TRIGGER IF EXISTS cron_test_write_fails").run());

    const errors = await errorLogsDuring(() => recheckDomains(openCtx(env)));
    expect(errors).toContainEqual(
      expect.objectContaining({ message: "domain re-check failed", domain_id: writeFails.id, error: expect.stringContaining("disk I/O error") }),
    );

    const fetch = async (id: string) =>
      json<Domain & { last_checked_at: string | null }>(await call(`/api/v1/domains/${id}`, { key: account.api_key }));
    expect(await fetch(healthy.id)).toMatchObject({ status: "verified" });
    expect(await fetch(dnsDown.id)).toMatchObject({ status: "pending", last_checked_at: expect.any(String) });
    expect(await fetch(writeFails.id)).toMatchObject({ status: "pending", last_checked_at: null });
  });

  it("a task that throws is logged by name and does not stop the other tasks of the scheduled handler", async () => {
    const account = await createAccount();
    const domain = await addDomain(account.api_key, "corrupt");
    // recheckDomains cannot even read its domains: a row whose JSON column does not parse.
    await env.DB.prepare("UPDATE domains SET records = '{not json' WHERE id = ?").bind(domain.id).run();
    cleanups.push(() => env.DB.prepare("DELETE FROM domains WHERE id = ?").bind(domain.id).run());
    const verifier = await createAccount({ verify_credits: 100 });
    const { job } = await lostVerificationJob(verifier, 5);
    await backdateJob(verifier, job.id, 20);

    const errors = await errorLogsDuring(runCron);
    expect(errors).toContainEqual(expect.objectContaining({ message: "scheduled task failed", task: "recheckDomains", cron: "*/15 * * * *" }));
    // The verification sweep ran all the same.
    expect(await waitForJob(verifier.api_key, job.id)).toMatchObject({ status: "completed", processed: 5 });
  }, 30_000);

  it("runScheduledTasks runs every task even when one throws synchronously or rejects", async () => {
    const ran: string[] = [];
    const errors = await errorLogsDuring(() =>
      runScheduledTasks(
        {
          throws: () => {
            throw new Error("boom");
          },
          rejects: async () => {
            await Promise.resolve();
            throw new Error("later boom");
          },
          works: async () => void ran.push("works"),
        },
        openCtx(env),
        createScheduledController({ cron: "* * * * *" }),
      ),
    );
    expect(ran).toEqual(["works"]);
    expect(errors).toEqual([
      expect.objectContaining({ message: "scheduled task failed", task: "throws", error: "boom" }),
      expect.objectContaining({ message: "scheduled task failed", task: "rejects", error: "later boom" }),
    ]);
  });
});
