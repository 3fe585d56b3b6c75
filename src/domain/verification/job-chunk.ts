// Verifying one chunk of a job: the VERIFY_QUEUE consumer's work (src/queues/verification.ts).

import { and, eq, sql } from "drizzle-orm";
import { sqlNow, statement, batch, type Ctx } from "../../db/client";
import { verificationJobs } from "../../db/schema";
import { usageStatements } from "../reports/usage";
import type { DnsResolver } from "../dns/doh";
import type { MailboxProber } from "./mailbox";
import { contactResultsStatement } from "./contact-results";
import { recordJobEvent, wakeCampaign } from "./job-finish";
import { findJob, unfinished, zeroCounts, type JobCounts, type StoredResult, type VerificationJob } from "./job-rows";
import type { JobInput, VerificationChunkMessage } from "./jobs";
import { verifyMany } from "./verify";

const RESULT_ROWS_PER_INSERT = 500;

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
