import { createExecutionContext, createMessageBatch, getQueueResult, type QueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { consumeVerifyDeadLetters, consumeVerifyQueue } from "../../src/queues/verify-queue";
import { allAccountRows } from "./databases";
import { call, json } from "./helpers";

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A DNS suffix no other test (or earlier run) has asked about, under the fixture's `*.bulk.verify-test` MX wildcard. */
export const freshBulkSuffix = () => `r${crypto.randomUUID().slice(0, 8)}.bulk.verify-test`;

export async function verifyBalance(key: string): Promise<number> {
  const credits = await json<{ verify: { balance: number } }>(await call("/api/v1/credits", { key }));
  return credits.verify.balance;
}

export async function dohStats(): Promise<Record<string, number>> {
  const stats = await (await fetch(`${env.TEST_DOH_ADMIN_URL}/stats`)).json<{ byName: Record<string, number> }>();
  return stats.byName;
}

/** DoH queries (all record types) for names under `suffix`. */
export async function dohQueriesUnder(suffix: string): Promise<{ total: number; byName: Record<string, number> }> {
  const byName = Object.fromEntries(Object.entries(await dohStats()).filter(([name]) => name.split("/")[0]!.endsWith(suffix)));
  return { total: Object.values(byName).reduce((sum, n) => sum + n, 0), byName };
}

export type JobBody = {
  id: string;
  status: "pending" | "processing" | "completed" | "failed";
  total: number;
  processed: number;
  counts: Record<"valid" | "invalid" | "risky" | "unknown" | "duplicates" | "bad_syntax", number>;
  credits_charged: number;
  error: string | null;
  created_at: string;
  completed_at: string | null;
  results: { data: (Record<string, unknown> & { position: number; email: string })[]; has_more: boolean; next_cursor: string | null };
};

/** Polls GET /api/v1/verify/{id} until the job is finished (the real queue runs it). */
export async function waitForJob(key: string, id: string, timeoutMs = 60_000): Promise<JobBody> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await json<JobBody>(await call(`/api/v1/verify/${id}?limit=1`, { key }));
    if (job.status === "completed" || job.status === "failed") return job;
    if (Date.now() > deadline) throw new Error(`job ${id} still ${job.status} (${job.processed}/${job.total}) after ${timeoutMs} ms`);
    await sleep(250);
  }
}

let deliveries = 0;

/** Runs the verify queue's consumer (or its DLQ consumer) on these bodies, as the queue would. */
export async function deliver(queue: "mailforge-verify" | "mailforge-verify-dlq", bodies: unknown[], attempts = 1): Promise<QueueResult> {
  const batch = createMessageBatch(
    queue,
    bodies.map((body) => ({ id: `verify-${++deliveries}`, timestamp: new Date(), attempts, body })),
  );
  const ctx = createExecutionContext();
  await (queue === "mailforge-verify" ? consumeVerifyQueue(batch, env, ctx) : consumeVerifyDeadLetters(batch, env, ctx));
  return getQueueResult(batch, ctx);
}

// A reference or subject is one account's, so its rows are all in one of the account databases.
export async function ledgerOf(referenceId: string): Promise<{ kind: string; amount: number }[]> {
  return allAccountRows<{ kind: string; amount: number }>(
    "SELECT kind, amount FROM credit_ledger WHERE reference_id = ?1 ORDER BY created_at, kind",
    referenceId,
  );
}

export async function eventsOf(subjectOrKey: string): Promise<{ type: string; data: Record<string, unknown> }[]> {
  const results = await allAccountRows<{ type: string; data: string }>(
    "SELECT type, data FROM events WHERE subject_id = ?1 OR dedupe_key = ?2 ORDER BY created_at",
    subjectOrKey,
    `verification.completed:${subjectOrKey}`,
  );
  return results.map((row) => ({ type: row.type, data: JSON.parse(row.data) as Record<string, unknown> }));
}

/** A `data:` URI the way a browser's FileReader.readAsDataURL makes one, with the name parameter of the spec. */
export function csvDataUri(content: string | Uint8Array, name = "list.csv", mediaType = "text/csv"): string {
  const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content;
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return `data:${mediaType};name=${name};base64,${btoa(binary)}`;
}
