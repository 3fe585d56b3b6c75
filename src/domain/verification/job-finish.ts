// How a job ends. The chunk that brings `processed` to `total` completes it (job-chunk.ts); a chunk that reached the
// dead-letter queue, a queue that refused its chunks or the sweep fails it here, refunding what it did not verify.
// Either way its `verification.completed` event is written once, and a campaign waiting on the job is woken.

import { and, eq, not } from "drizzle-orm";
import { sqlNow, statement, batch, type Ctx } from "../../db/client";
import { verificationJobs } from "../../db/schema";
import { logWarning } from "../../lib/log";
import { refundedGuard, refundStatements } from "../credits/ledger";
import { eventStatement, type EventInput } from "../events/events";
import { dispatchEvents, recordEvents } from "../webhooks/dispatch";
import { findJob, jobCounts, jobSummary, unfinished, type VerificationJob } from "./job-rows";

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
export async function wakeCampaign(env: Env, campaignId: string): Promise<void> {
  await env.CAMPAIGN_PROGRESS.getByName(campaignId)
    .wake()
    .catch((error: unknown) =>
      logWarning("verification: waking the campaign after its checks failed", { campaign_id: campaignId, error: String(error) }),
    );
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
export async function recordJobEvent(ctx: Ctx, job: VerificationJob): Promise<void> {
  await recordEvents(ctx, [completionEvent(job)]);
}
