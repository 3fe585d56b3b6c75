// A verification job as stored, and how it is read: its row, its counters, its result rows, and the summary that
// GET /verify/{id} and its `verification.completed` event both give. Every other job module reads jobs through here.

import { and, asc, desc, eq, gt, inArray } from "drizzle-orm";
import type { AccountDb } from "../../db/client";
import { verificationJobs, verificationResults } from "../../db/schema";
import type { VerificationResult } from "./status";

export const JOB_STATUSES = ["pending", "processing", "completed", "failed"] as const;

export const JOB_COUNT_KEYS = ["valid", "invalid", "risky", "unknown", "duplicates", "bad_syntax"] as const;
/**
 * valid + invalid + risky + unknown = distinct addresses verified so far (bad syntax counts as invalid too);
 * duplicates = inputs beyond the first of their dedupeKey; bad_syntax = distinct inputs that failed checkSyntax.
 */
export type JobCounts = Record<(typeof JOB_COUNT_KEYS)[number], number>;

export type VerificationJob = typeof verificationJobs.$inferSelect;

export const zeroCounts = (): JobCounts => ({ valid: 0, invalid: 0, risky: 0, unknown: 0, duplicates: 0, bad_syntax: 0 });

export function jobCounts(job: Pick<VerificationJob, "counts">): JobCounts {
  const counts = zeroCounts();
  for (const key of JOB_COUNT_KEYS) counts[key] = Number(job.counts[key] ?? 0);
  return counts;
}

/** A job still running: its chunks write, and the sweep looks after it. */
export const unfinished = inArray(verificationJobs.status, ["pending", "processing"]);

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
