// The cron's care of verification jobs whose queue messages were lost.

import { and, asc, eq, lt, sql } from "drizzle-orm";
import type { Ctx } from "../../db/client";
import { verificationJobs } from "../../db/schema";
import { logError, logWarning } from "../../lib/log";
import { failVerificationJob } from "./job-finish";
import { findJob, unfinished } from "./job-rows";
import { inputChunks, readJobInput, sendChunks } from "./jobs";

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
    ctx,
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
