import { and, asc, desc, eq, gt, inArray, lt, not, sql } from "drizzle-orm";
import { z } from "zod";
import { sqlNow, statement, type AccountDb, batch, type Ctx } from "../../db/client";
import { verificationJobs, verificationResults } from "../../db/schema";
import { newId } from "../../lib/ids";
import { logError, logWarning } from "../../lib/log";
import type { Account } from "../accounts/accounts";
import { usageStatements } from "../reports/usage";
import { availableCredits, chargedGuard, chargeStatements, refundedGuard, refundStatements, wasApplied } from "../credits/ledger";
import type { DnsResolver } from "../dns/doh";
import { eventStatement, type EventInput } from "../events/events";
import { dispatchEvents, recordEvents } from "../webhooks/dispatch";
import type { MailboxProber } from "./mailbox";
import type { VerificationResult } from "./status";
import { contactResultsStatement } from "./contact-results";
import { checkSyntax, dedupeKey, type SyntaxCheck } from "./syntax";
import { verifyMany } from "./verify";

// Bulk verification jobs: accepted (priced, charged, input stored in R2) in one request, verified in chunks by the
// VERIFY_QUEUE consumer, finished by the chunk that brings `processed` to `total`, failed (and refunded) from the DLQ.
// A job whose chunk messages were lost is resumed, or failed and refunded, by the cron: see STALE_JOB_MS.

export const MAX_JOB_ADDRESSES = 50_000;
/**
 * Distinct addresses per queue message. 500 keeps a chunk's D1 writes (one json_each INSERT per 500 rows, well under
 * D1's 2 MB value limit) and its DNS work (a few dozen domains, 20 at a time) far inside one invocation's limits,
 * while a 50,000-address job is still only ~100 messages (one `sendBatch` per 100).
 */
export const CHUNK_SIZE = 500;
const QUEUE_SEND_BATCH_MAX = 100;
const RESULT_ROWS_PER_INSERT = 500;

export const JOB_STATUSES = ["pending", "processing", "completed", "failed"] as const;

export const JOB_COUNT_KEYS = ["valid", "invalid", "risky", "unknown", "duplicates", "bad_syntax"] as const;
/**
 * valid + invalid + risky + unknown = distinct addresses verified so far (bad syntax counts as invalid too);
 * duplicates = inputs beyond the first of their dedupeKey; bad_syntax = distinct inputs that failed checkSyntax.
 */
export type JobCounts = Record<(typeof JOB_COUNT_KEYS)[number], number>;

export type VerificationJob = typeof verificationJobs.$inferSelect;

/** What a job verifies, stored in R2 once at acceptance; chunk messages carry only the job id and a slice of it. */
export const jobInputSchema = z.object({
  version: z.literal(1),
  /** Also write a result row for every duplicate input (standalone batches with remove_duplicates false). */
  include_duplicates: z.boolean(),
  /** Distinct addresses as given, grouped by domain so a domain's DNS is asked by one chunk. */
  emails: z.array(z.string()),
  /** positions[i]: every input position (0-based) of emails[i], the first occurrence first. */
  positions: z.array(z.array(z.number().int().nonnegative()).min(1)),
  /** With include_duplicates only: repeats[i] holds the input text at positions[i][1…], as written in the file. */
  repeats: z.array(z.array(z.string())).optional(),
});
export type JobInput = z.infer<typeof jobInputSchema>;

export const verificationChunkSchema = z.object({
  kind: z.literal("verification_chunk"),
  job_id: z.string().min(1),
  /** Slice [offset, offset + count) of the job input's distinct addresses. */
  offset: z.number().int().nonnegative(),
  count: z.number().int().positive().max(CHUNK_SIZE),
});
export type VerificationChunkMessage = z.infer<typeof verificationChunkSchema>;

export type JobPlan = {
  total: number;
  distinct: number;
  duplicates: number;
  badSyntax: number;
  /** What the job costs: distinct addresses with valid syntax (duplicates and bad syntax are free). */
  chargeable: number;
  input: JobInput;
  chunks: { offset: number; count: number }[];
};

/**
 * Prices and slices a job without any I/O: duplicates (by dedupeKey) and bad syntax (checkSyntax) are known before
 * a single lookup, so a job the balance cannot pay for is refused before any work.
 */
export function planVerificationJob(emails: readonly string[], options: { includeDuplicates?: boolean } = {}): JobPlan {
  const byKey = new Map<string, number>();
  const distinct: { email: string; positions: number[]; repeats: string[]; domain: string }[] = [];
  let badSyntax = 0;
  emails.forEach((email, position) => {
    const key = dedupeKey(email);
    const seen = byKey.get(key);
    if (seen !== undefined) {
      distinct[seen]!.positions.push(position);
      distinct[seen]!.repeats.push(email);
      return;
    }
    byKey.set(key, distinct.length);
    const syntax = checkSyntax(email);
    if (!syntax.valid) badSyntax += 1;
    distinct.push({ email, positions: [position], repeats: [], domain: chunkDomain(syntax) });
  });
  // Grouping by domain keeps each domain's lookups in one chunk (Array#sort is stable: input order within a domain),
  // so concurrent chunks do not ask the same names before the D1 cache has them.
  distinct.sort((a, b) => (a.domain < b.domain ? -1 : a.domain > b.domain ? 1 : 0));

  const includeDuplicates = options.includeDuplicates ?? false;
  return {
    total: emails.length,
    distinct: distinct.length,
    duplicates: emails.length - distinct.length,
    badSyntax,
    chargeable: distinct.length - badSyntax,
    input: {
      version: 1,
      include_duplicates: includeDuplicates,
      emails: distinct.map((entry) => entry.email),
      positions: distinct.map((entry) => entry.positions),
      ...(includeDuplicates ? { repeats: distinct.map((entry) => entry.repeats) } : {}),
    },
    chunks: cutChunks(distinct.map((entry) => entry.domain)),
  };
}

// Bad syntax sorts first under "": those rows need no DNS and share chunks with nothing that does.
const chunkDomain = (syntax: SyntaxCheck) => (syntax.valid ? syntax.domain : "");

/**
 * The chunks `planVerificationJob` cut for this input, computed again from the stored addresses (which are in chunk
 * order): the sweep needs them to find the chunks whose message was lost, and a chunk's boundaries must be the
 * original ones, since its first result row is what makes a redelivery a no-op.
 */
export function inputChunks(input: JobInput): JobPlan["chunks"] {
  return cutChunks(input.emails.map((email) => chunkDomain(checkSyntax(email))));
}

/** Chunks of at most CHUNK_SIZE that end at a domain boundary unless one domain alone is larger than a chunk. */
function cutChunks(domains: readonly string[]): { offset: number; count: number }[] {
  const chunks: { offset: number; count: number }[] = [];
  let start = 0;
  let i = 0;
  while (i < domains.length) {
    let end = i;
    while (end < domains.length && domains[end] === domains[i]) end++;
    if (i > start && end - start > CHUNK_SIZE) {
      chunks.push({ offset: start, count: i - start });
      start = i;
    }
    while (end - start > CHUNK_SIZE) {
      chunks.push({ offset: start, count: CHUNK_SIZE });
      start += CHUNK_SIZE;
    }
    i = end;
  }
  if (domains.length > start) chunks.push({ offset: start, count: domains.length - start });
  return chunks;
}

export const inputObjectKey = (jobId: string) => `verification-jobs/${jobId}/input.json`;

const zeroCounts = (): JobCounts => ({ valid: 0, invalid: 0, risky: 0, unknown: 0, duplicates: 0, bad_syntax: 0 });

export function jobCounts(job: Pick<VerificationJob, "counts">): JobCounts {
  const counts = zeroCounts();
  for (const key of JOB_COUNT_KEYS) counts[key] = Number(job.counts[key] ?? 0);
  return counts;
}

/** The balance cannot pay: `needed` credits, `available` at the time of the check. */
export type InsufficientCredits = { kind: "insufficient_credits"; needed: number; available: number };

const unfinished = inArray(verificationJobs.status, ["pending", "processing"]);

export type NewJob = {
  account: Account;
  emails: readonly string[];
  source: VerificationJob["source"];
  name?: string | null;
  includeDuplicates?: boolean;
  /** The campaign whose fan-out waits for the job (its pre-send checks). */
  campaignId?: string;
};

/**
 * Accepts a job: refuses it when the balance cannot pay for it, stores its input in R2, then charges and inserts
 * the job in ONE D1 batch (the job row is guarded by the ledger entry, so a short balance writes nothing).
 * The caller enqueues the returned chunks (see `enqueueVerificationJob`).
 */
export async function createVerificationJob(
  ctx: Ctx,
  request: NewJob,
): Promise<InsufficientCredits | { kind: "created"; job: VerificationJob; plan: JobPlan }> {
  const { env, db } = ctx;
  const { account } = request;
  const plan = planVerificationJob(request.emails, { includeDuplicates: request.includeDuplicates });
  if (plan.chargeable > account.verifyBalance) return { kind: "insufficient_credits", needed: plan.chargeable, available: account.verifyBalance };

  const id = newId("vjob");
  const inputKey = inputObjectKey(id);
  await env.BLOBS.put(inputKey, JSON.stringify(plan.input), { httpMetadata: { contentType: "application/json" } });

  const guard = plan.chargeable > 0 ? chargedGuard("verify", id) : undefined;
  const counts: JobCounts = { ...zeroCounts(), duplicates: plan.duplicates };
  const written = await batch(db, [
    ...(plan.chargeable > 0
      ? chargeStatements(db, { accountId: account.id, balance: "verify", amount: plan.chargeable, referenceId: id, note: "verification job" })
      : []),
    // `seq` (the standalone API's batch id) is the next number, taken inside the insert so two jobs never share one.
    statement(
      db,
      sql`INSERT INTO verification_jobs (id, seq, account_id, source, name, campaign_id, status, total, processed, chargeable, credits_charged, counts, input_key)
        SELECT ${id}, COALESCE((SELECT MAX(seq) FROM verification_jobs), 0) + 1, ${account.id}, ${request.source}, ${request.name ?? null},
          ${request.campaignId ?? null}, 'pending', ${plan.total}, 0, ${plan.chargeable}, ${plan.chargeable}, ${JSON.stringify(counts)}, ${inputKey}
        WHERE ${guard ?? sql`true`}`,
    ),
  ]);
  if (plan.chargeable > 0 && !wasApplied(written[0]!)) {
    // The balance changed between the check above and the batch; nothing was written but the input.
    await env.BLOBS.delete(inputKey);
    return { kind: "insufficient_credits", needed: plan.chargeable, available: await availableCredits(db, account.id, "verify") };
  }
  const job = await findJob(db, { id });
  if (!job) throw new Error(`verification job ${id} was not written`);
  return { kind: "created", job, plan };
}

/**
 * Sends the job's chunks. If the queue refuses them the job would never run, so it is failed (and refunded) at once
 * and the client should retry.
 */
export async function enqueueVerificationJob(ctx: Ctx, job: VerificationJob, chunks: JobPlan["chunks"]): Promise<"queued" | "queue_unavailable"> {
  const { env } = ctx;
  try {
    await sendChunks(env, job.id, chunks);
    return "queued";
  } catch (error) {
    logError("verification job could not be queued; failing and refunding it", {
      job_id: job.id,
      error: error instanceof Error ? error.message : String(error),
    });
    await failVerificationJob(ctx, job.id, "The job could not be queued");
    return "queue_unavailable";
  }
}

async function sendChunks(env: Env, jobId: string, chunks: JobPlan["chunks"]): Promise<void> {
  const messages = chunks.map(
    (chunk): MessageSendRequest<VerificationChunkMessage> => ({
      body: { kind: "verification_chunk", job_id: jobId, offset: chunk.offset, count: chunk.count },
      contentType: "json",
    }),
  );
  for (let i = 0; i < messages.length; i += QUEUE_SEND_BATCH_MAX) {
    await env.VERIFY_QUEUE.sendBatch(messages.slice(i, i + QUEUE_SEND_BATCH_MAX));
  }
}

/** The job's input, or undefined when the object is gone from R2. */
export async function readJobInput(env: Env, job: VerificationJob): Promise<JobInput | undefined> {
  if (!job.inputKey) return undefined;
  const object = await env.BLOBS.get(job.inputKey);
  return object ? jobInputSchema.parse(await object.json()) : undefined;
}

export async function findJob(db: AccountDb, where: { id: string } | { seq: number }, accountId?: string): Promise<VerificationJob | undefined> {
  const match = "id" in where ? eq(verificationJobs.id, where.id) : eq(verificationJobs.seq, where.seq);
  return db
    .select()
    .from(verificationJobs)
    .where(accountId ? and(match, eq(verificationJobs.accountId, accountId)) : match)
    .get();
}

/** The account's most recent jobs, newest first (the dashboard's list). */
export async function listJobs(db: AccountDb, accountId: string, limit: number): Promise<VerificationJob[]> {
  return db
    .select()
    .from(verificationJobs)
    .where(eq(verificationJobs.accountId, accountId))
    .orderBy(desc(verificationJobs.createdAt), desc(verificationJobs.id))
    .limit(limit)
    .all();
}

/** A stored result: the engine's result, when it was checked, and for a duplicate row the position it repeats. */
export type StoredResult = VerificationResult & { checked_at: string; duplicate_of?: number };
export type ResultRow = { position: number; result: StoredResult };

/** Results in input order after `afterPosition` (exclusive), `limit` of them. */
export async function listJobResults(db: AccountDb, jobId: string, afterPosition: number, limit: number): Promise<ResultRow[]> {
  const rows = await db
    .select({ position: verificationResults.position, detail: verificationResults.detail })
    .from(verificationResults)
    .where(and(eq(verificationResults.jobId, jobId), gt(verificationResults.position, afterPosition)))
    .orderBy(asc(verificationResults.position))
    .limit(limit)
    .all();
  return rows.map((row) => ({ position: row.position, result: row.detail as StoredResult }));
}

export type ChunkDeps = {
  resolver: DnsResolver;
  /** Asks the chunk's mailboxes over SMTP (one prober request per chunk); absent when mailbox checks are off. */
  prober?: MailboxProber;
  /** Reads (and may cache, per queue batch) the job's input from R2. */
  loadInput: (job: VerificationJob) => Promise<JobInput>;
  now?: () => Date;
};

export type ChunkOutcome = "processed" | "already_processed" | "job_finished" | "job_missing";

/**
 * Verifies one chunk. Safe under at-least-once delivery: the counter update and the result rows are one D1
 * transaction, the update only applies while the chunk's first result row does not exist yet (the row that
 * transaction writes), and rows are keyed (job_id, position) with INSERT OR IGNORE, so a redelivered or
 * concurrently duplicated chunk writes nothing twice. The chunk that brings `processed` to `total` completes the job.
 */
export async function processVerificationChunk(ctx: Ctx, chunk: VerificationChunkMessage, deps: ChunkDeps): Promise<ChunkOutcome> {
  const { env, db } = ctx;
  const job = await findJob(db, { id: chunk.job_id });
  if (!job) return "job_missing";
  if (job.status === "completed") {
    // A redelivery after the completing batch: make sure the event it owed was recorded.
    await recordJobEvent(ctx, job);
    return "job_finished";
  }
  if (job.status === "failed") return "job_finished";

  const input = await deps.loadInput(job);
  const end = chunk.offset + chunk.count;
  if (end > input.emails.length) throw new Error(`chunk ${chunk.offset}+${chunk.count} is outside job ${job.id} (${input.emails.length} distinct)`);
  const emails = input.emails.slice(chunk.offset, end);
  const positions = input.positions.slice(chunk.offset, end);
  const repeatTexts = input.repeats?.slice(chunk.offset, end);

  const results = await verifyMany(emails, { resolver: deps.resolver, prober: deps.prober, accountId: job.accountId });
  const checkedAt = (deps.now?.() ?? new Date()).toISOString();
  const delta = zeroCounts();
  let processed = 0;
  const rows: { position: number; email: string; result: string; status: string; detail: StoredResult }[] = [];
  results.forEach((result, i) => {
    const [first, ...repeats] = positions[i]!;
    delta[result.result] += 1;
    if (result.status === "invalid_syntax") delta.bad_syntax += 1;
    processed += 1 + repeats.length;
    const detail: StoredResult = { ...result, checked_at: checkedAt };
    rows.push({ position: first!, email: result.email, result: result.result, status: result.status, detail });
    if (input.include_duplicates) {
      repeats.forEach((position, r) => {
        // The row shows the address as that row wrote it (case, spaces) with the result of its first occurrence.
        const email = repeatTexts?.[i]?.[r]?.trim() ?? result.email;
        const account = email.includes("@") ? email.slice(0, email.lastIndexOf("@")) : result.account;
        rows.push({ position, email, result: result.result, status: result.status, detail: { ...detail, email, account, duplicate_of: first! } });
      });
    }
  });
  const marker = positions[0]![0]!;

  const inserts: D1PreparedStatement[] = [];
  for (let i = 0; i < rows.length; i += RESULT_ROWS_PER_INSERT) {
    inserts.push(
      statement(
        db,
        sql`INSERT OR IGNORE INTO verification_results (job_id, position, email, result, status, detail)
          SELECT ${job.id}, value ->> '$.position', value ->> '$.email', value ->> '$.result', value ->> '$.status', value -> '$.detail'
          FROM json_each(${JSON.stringify(rows.slice(i, i + RESULT_ROWS_PER_INSERT))})
          WHERE EXISTS (SELECT 1 FROM verification_jobs WHERE id = ${job.id} AND status = 'processing')`,
      ),
    );
  }
  // Counted only when the update below counts the chunk, as the usage is.
  const chunkCounted = sql`EXISTS (SELECT 1 FROM verification_jobs WHERE id = ${job.id} AND status = 'processing')
    AND NOT EXISTS (SELECT 1 FROM verification_results WHERE job_id = ${job.id} AND position = ${marker})`;
  const onContacts = contactResultsStatement(db, job.accountId, results, checkedAt, chunkCounted);
  const add = (key: keyof JobCounts) => sql`'$.${sql.raw(key)}', COALESCE(counts ->> '$.${sql.raw(key)}', 0) + ${delta[key]}`;
  const written = await batch(db, [
    statement(
      db,
      db
        .update(verificationJobs)
        .set({
          status: "processing",
          processed: sql`processed + ${processed}`,
          counts: sql`json_set(counts, ${add("valid")}, ${add("invalid")}, ${add("risky")}, ${add("unknown")}, ${add("bad_syntax")})`,
          updatedAt: sqlNow,
        })
        .where(
          and(
            eq(verificationJobs.id, job.id),
            unfinished,
            sql`NOT EXISTS (SELECT 1 FROM verification_results WHERE job_id = ${job.id} AND position = ${marker})`,
          ),
        ),
    ),
    // The addresses this chunk verified (a repeated row is not verified again), counted only when the update above
    // counted the chunk: the job is processing and the chunk's first result row is not written yet.
    ...usageStatements(db, job.accountId, { verifications: results.length }, { guard: chunkCounted }),
    ...(onContacts ? [onContacts] : []),
    ...inserts,
    statement(
      db,
      db
        .update(verificationJobs)
        .set({ status: "completed", completedAt: sqlNow, updatedAt: sqlNow })
        .where(and(eq(verificationJobs.id, job.id), eq(verificationJobs.status, "processing"), sql`processed >= total`)),
    ),
  ]);
  const counted = written[0]!.meta.changes === 1;
  const completed = written.at(-1)!.meta.changes === 1;
  if (completed) {
    const finished = await findJob(db, { id: job.id });
    if (finished) await recordJobEvent(ctx, finished);
    if (job.campaignId) await wakeCampaign(env, job.campaignId);
    // Nothing reads the input of a finished job (chunks stop at its status); a failed delete only leaves an object.
    if (job.inputKey) await env.BLOBS.delete(job.inputKey).catch(() => undefined);
  }
  return counted ? "processed" : "already_processed";
}

/**
 * Fails a job whose chunk reached the dead-letter queue, once: it stops further chunks (their writes are guarded
 * by the job's status), keeps the results already written, refunds the addresses it did not verify and emits
 * `verification.completed` with status `failed`. Running it again changes nothing.
 */
export async function failVerificationJob(ctx: Ctx, jobId: string, reason: string): Promise<VerificationJob | undefined> {
  const { env, db } = ctx;
  await db
    .update(verificationJobs)
    .set({ status: "failed", error: reason, completedAt: sqlNow, updatedAt: sqlNow })
    .where(and(eq(verificationJobs.id, jobId), unfinished))
    .run();
  const job = await findJob(db, { id: jobId });
  if (job?.status !== "failed") return job;
  // The input is never read again; an upload can be tens of megabytes.
  if (job.inputKey) await env.BLOBS.delete(job.inputKey);

  // Counters are frozen once the job is failed, so the refund is the same on every run.
  const counts = jobCounts(job);
  const verified = counts.valid + counts.invalid + counts.risky + counts.unknown - counts.bad_syntax;
  const refund = Math.max(0, job.chargeable - verified);
  const settled: VerificationJob = { ...job, creditsCharged: job.chargeable - refund };
  const event = completionEvent(settled);
  await batch(db, [
    ...(refund > 0
      ? [
          statement(
            db,
            db
              .update(verificationJobs)
              .set({ creditsCharged: settled.creditsCharged })
              .where(and(eq(verificationJobs.id, job.id), not(refundedGuard("verify", job.id)))),
          ),
          ...refundStatements(db, {
            accountId: job.accountId,
            balance: "verify",
            amount: refund,
            referenceId: job.id,
            note: "verification job failed",
          }),
        ]
      : []),
    eventStatement(db, event),
  ]);
  await dispatchEvents(ctx, job.accountId, [event.dedupeKey]);
  if (job.campaignId) await wakeCampaign(env, job.campaignId);
  return settled;
}

/**
 * A campaign's fan-out waits for its checks: tell its progress object they are done. Never throws: the object polls
 * the job too, only later.
 */
async function wakeCampaign(env: Env, campaignId: string): Promise<void> {
  await env.CAMPAIGN_PROGRESS.getByName(campaignId)
    .wake()
    .catch((error: unknown) =>
      logWarning("verification: waking the campaign after its checks failed", { campaign_id: campaignId, error: String(error) }),
    );
}

/** What GET /verify/{id} and the `verification.completed` event both say about a job. */
export function jobSummary(job: VerificationJob) {
  return {
    status: job.status,
    total: job.total,
    processed: job.processed,
    counts: jobCounts(job),
    credits_charged: job.creditsCharged,
    error: job.error,
    created_at: job.createdAt,
    completed_at: job.completedAt,
  };
}

function completionEvent(job: VerificationJob): EventInput {
  return {
    accountId: job.accountId,
    type: "verification.completed",
    subjectId: job.id,
    dedupeKey: `verification.completed:${job.id}`,
    data: { verification_id: job.id, kind: "bulk", batch_id: job.seq, source: job.source, name: job.name, ...jobSummary(job) },
  };
}

/** Writes the job's event (a no-op when already written) and hands it to the webhooks. */
async function recordJobEvent(ctx: Ctx, job: VerificationJob): Promise<void> {
  await recordEvents(ctx, [completionEvent(job)]);
}

/**
 * Staleness rule for the cron. Every committed chunk bumps a job's `updated_at`, and a chunk that keeps throwing
 * reaches the dead-letter queue (which fails the job) within about two minutes, so a job `pending` or `processing`
 * whose `updated_at` is older than STALE_JOB_MS has lost queue messages. While the job is younger than
 * MAX_JOB_AGE_MS, the chunks without their first result row are enqueued again (a copy of a chunk that was only
 * late writes nothing twice) and `updated_at` is bumped, so the next resume waits another window: at most
 * MAX_JOB_AGE_MS / STALE_JOB_MS resumes. A stale job older than that is failed and refunded for the addresses it
 * did not verify. A job that keeps making progress is never touched, however long it runs.
 */
export const STALE_JOB_MS = 15 * 60_000;
export const MAX_JOB_AGE_MS = 2 * 60 * 60_000;
const SWEEP_JOBS_MAX = 50;

export type JobSweep = { resumed: string[]; failed: string[] };

/** Cron: resumes or fails verification jobs that stopped making progress (see STALE_JOB_MS). */
export async function sweepStaleVerificationJobs(ctx: Ctx, now = new Date()): Promise<JobSweep> {
  const { db } = ctx;
  const staleBefore = new Date(now.getTime() - STALE_JOB_MS).toISOString();
  const tooOldBefore = new Date(now.getTime() - MAX_JOB_AGE_MS).toISOString();
  const stale = await db
    .select({ id: verificationJobs.id, createdAt: verificationJobs.createdAt })
    .from(verificationJobs)
    .where(and(unfinished, lt(verificationJobs.updatedAt, staleBefore)))
    .orderBy(asc(verificationJobs.updatedAt))
    .limit(SWEEP_JOBS_MAX)
    .all();
  const sweep: JobSweep = { resumed: [], failed: [] };
  for (const row of stale) {
    try {
      if (row.createdAt < tooOldBefore) {
        await failVerificationJob(ctx, row.id, "The job stopped making progress; addresses not verified were refunded");
        sweep.failed.push(row.id);
      } else if (await resumeVerificationJob(ctx, row.id, staleBefore, now)) {
        sweep.resumed.push(row.id);
      } else {
        sweep.failed.push(row.id);
      }
    } catch (error) {
      // One job's trouble (R2, the queue) must not keep the others stuck.
      logError("stale verification job could not be swept", { job_id: row.id, error: error instanceof Error ? error.message : String(error) });
    }
  }
  if (sweep.resumed.length > 0 || sweep.failed.length > 0) logWarning("verification: stale jobs swept", { ...sweep });
  return sweep;
}

/** Enqueues the chunks of a stale job that have no result yet; false when the job had to be failed instead. */
async function resumeVerificationJob(ctx: Ctx, jobId: string, staleBefore: string, now: Date): Promise<boolean> {
  const { env, db } = ctx;
  const job = await findJob(db, { id: jobId });
  if (!job || (job.status !== "pending" && job.status !== "processing")) return true;
  const input = await readJobInput(env, job);
  if (!input) {
    await failVerificationJob(ctx, job.id, "The job's input is no longer in storage; addresses not verified were refunded");
    return false;
  }
  const chunks = inputChunks(input);
  // A chunk is done once the result row of its first address exists: the row its own transaction writes.
  const markers = chunks.map((chunk) => input.positions[chunk.offset]![0]!);
  const unstarted = await db.all<{ position: number }>(
    sql`SELECT value AS position FROM json_each(${JSON.stringify(markers)})
      WHERE NOT EXISTS (SELECT 1 FROM verification_results WHERE job_id = ${job.id} AND position = json_each.value)`,
  );
  const missing = new Set(unstarted.map((row) => row.position));
  await sendChunks(
    env,
    job.id,
    chunks.filter((_, i) => missing.has(markers[i]!)),
  );
  await db
    .update(verificationJobs)
    .set({ updatedAt: now.toISOString() })
    .where(and(eq(verificationJobs.id, job.id), lt(verificationJobs.updatedAt, staleBefore), unfinished))
    .run();
  return true;
}
