// Bulk verification jobs: accepted (priced, charged, input stored in R2) in one request (this module), verified in
// chunks by the VERIFY_QUEUE consumer (job-chunk.ts), finished by the chunk that brings `processed` to `total`, failed
// (and refunded) from the DLQ (job-finish.ts). A job whose chunk messages were lost is resumed, or failed and
// refunded, by the cron (job-sweep.ts). Rows are read through job-rows.ts.

import { sql } from "drizzle-orm";
import { z } from "zod";
import { statement, batch, databaseNameOf, type Ctx } from "../../db/client";
import { newId } from "../../lib/ids";
import { logError } from "../../lib/log";
import type { Account } from "../accounts/accounts";
import { availableCredits, chargedGuard, chargeStatements, wasApplied } from "../credits/ledger";
import { failVerificationJob } from "./job-finish";
import { findJob, zeroCounts, type JobCounts, type VerificationJob } from "./job-rows";
import { checkSyntax, dedupeKey, type SyntaxCheck } from "./syntax";

export const MAX_JOB_ADDRESSES = 50_000;
/**
 * Distinct addresses per queue message. 500 keeps a chunk's D1 writes (one json_each INSERT per 500 rows, well under
 * D1's 2 MB value limit) and its DNS work (a few dozen domains, 20 at a time) far inside one invocation's limits,
 * while a 50,000-address job is still only ~100 messages (one `sendBatch` per 100).
 */
export const CHUNK_SIZE = 500;
const QUEUE_SEND_BATCH_MAX = 100;

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
  /** The account database the job's rows are in; messages sent before account databases name none: DB. */
  database: z.string().max(64).default("DB"),
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

/** The balance cannot pay: `needed` credits, `available` at the time of the check. */
export type InsufficientCredits = { kind: "insufficient_credits"; needed: number; available: number };

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
  if (plan.chargeable > 0) {
    const available = await availableCredits(db, account.id, "verify");
    if (plan.chargeable > available) return { kind: "insufficient_credits", needed: plan.chargeable, available };
  }

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
  try {
    await sendChunks(ctx, job.id, chunks);
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

/** The chunks as queue messages, `QUEUE_SEND_BATCH_MAX` per sendBatch: at acceptance, and again for those the sweep finds lost. */
export async function sendChunks({ env, db }: Pick<Ctx, "env" | "db">, jobId: string, chunks: JobPlan["chunks"]): Promise<void> {
  const database = databaseNameOf(db);
  const messages = chunks.map(
    (chunk): MessageSendRequest<VerificationChunkMessage> => ({
      body: { kind: "verification_chunk", job_id: jobId, offset: chunk.offset, count: chunk.count, database },
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
