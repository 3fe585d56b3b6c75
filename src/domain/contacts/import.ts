// Contact imports: a CSV accepted by the API (header and mapping checked, rows counted, file stored in R2), then
// imported by the verify-queue consumer in chunks. Each chunk is one D1 batch: the contact upserts, the list
// memberships, the row errors and the import's progress (byte offset and counters) commit together, and the
// progress update only applies if the offset is still where the chunk started. So a redelivered or duplicated
// message can neither skip rows nor count them twice, and a crash resumes from the last committed chunk.
//
// The file is read as contacts by import-columns.ts; import-accept.ts accepts it, import-sweep.ts resumes or fails an
// import whose message was lost.

import { and, eq, sql, type SQL } from "drizzle-orm";
import { z } from "zod";
import { inJsonArray, sqlNow, statement, batch, type Ctx } from "../../db/client";
import { contactImports, contacts } from "../../db/schema";
import { chunk } from "../../lib/chunk";
import { logWarning } from "../../lib/log";
import { findAccount } from "../accounts/accounts";
import { allTopics } from "../topics/topics";
import { enqueueVerificationJob } from "../verification/jobs";
import { addMembersByKeySql, contactUpsertSql, type ContactUpsert } from "./contacts";
import { csvRecords, type CsvRecord } from "./csv";
import { HEADER_MAX_BYTES, importRow, readHeader, resolveColumns, type TopicLookup } from "./import-columns";
import { createContactChecks } from "./verify";

export type ContactImport = typeof contactImports.$inferSelect;

export const contactImportMessageSchema = z.object({
  kind: z.literal("contact_import"),
  import_id: z.string().min(1),
  /** Byte offset the import had reached when the message was sent (informational: D1 holds the truth). */
  offset: z.number().int().nonnegative(),
  /** The account database the import's rows are in; messages sent before account databases name none: DB. */
  database: z.string().max(64).default("DB"),
});
export type ContactImportMessage = z.infer<typeof contactImportMessageSchema>;

/** Errors kept per import (all failures are counted). */
export const IMPORT_ERRORS_KEPT = 100;

export const importTuning = {
  /** Records per chunk: one D1 batch, one transaction. */
  rowsPerChunk: 2_000,
  /** Rows per INSERT … SELECT statement (each statement's rows travel as one bound JSON parameter). */
  rowsPerStatement: 500,
  /** R2 range read per chunk; a single record larger than this fails the import. */
  windowBytes: 1024 * 1024,
  /** Wall time a queue invocation spends before handing over to a fresh message. */
  invocationBudgetMs: 20_000,
};

export const importObjectKey = (accountId: string, importId: string) => `contact-imports/${accountId}/${importId}.csv`;

export type ImportRunResult =
  | { state: "failed" | "missing" }
  /** D1's rows_read and rows_written (table rows and index entries) of this invocation's chunks: what D1 bills. */
  | ({ state: "completed" } & D1Usage)
  /** Another delivery of the same import committed this chunk first; this one stops. */
  | { state: "superseded" }
  /** Out of time for this invocation: continue from `offset` with a new message. */
  | ({ state: "continue"; offset: number } & D1Usage);

type D1Usage = { rowsRead: number; rowsWritten: number };

/** Marks an import failed (a file-level problem, or a chunk that kept failing) and drops its file. */
export async function failContactImport(ctx: Ctx, importId: string, reason: string): Promise<void> {
  const { env, db } = ctx;
  const row = await db
    .update(contactImports)
    .set({ status: "failed", error: reason, updatedAt: sql`${sqlNow}` })
    .where(and(eq(contactImports.id, importId), sql`${contactImports.status} IN ('pending', 'processing')`))
    .returning({ inputKey: contactImports.inputKey })
    .get();
  if (row) await env.BLOBS.delete(row.inputKey);
}

/**
 * `verify: true`: the chunk's addresses without a fresh result become one verification job (1 credit each; results go
 * onto the contacts as every check's do). Started once the chunk is committed, so a redelivered chunk, which commits
 * nothing, starts none. Credits spent since the import was accepted are reported as a row error, not a failed import.
 */
async function verifyChunk(ctx: Ctx, job: ContactImport, upserts: ContactUpsert[], firstRow: number): Promise<void> {
  const { db } = ctx;
  const account = await findAccount(ctx.shared, job.accountId);
  if (!account) return;
  const where = and(
    eq(contacts.accountId, job.accountId),
    inJsonArray(
      contacts.emailKey,
      upserts.map((upsert) => upsert.address.key),
    ),
  )!;
  const checks = await createContactChecks(ctx, account, where, { source: "contacts", name: `Contact import ${job.id}` });
  if (checks.kind === "created") {
    if ((await enqueueVerificationJob(ctx, checks.job, checks.plan.chunks)) === "queue_unavailable") {
      logWarning("contact import: a verification job could not be queued; the sweep resumes it", { import_id: job.id, job_id: checks.job.id });
    }
    return;
  }
  if (checks.kind === "insufficient_credits") {
    await statement(
      db,
      sql`INSERT INTO contact_import_errors (import_id, row, message) VALUES (${job.id}, ${firstRow},
        ${`Not verified: the rows from here needed ${checks.needed} verification credits, ${checks.available} were left`})
        ON CONFLICT (import_id, row) DO NOTHING`,
    ).run();
  }
}

/**
 * Imports chunks of one import until it is done or `deadline` (epoch ms) has passed. Resumes from the offset D1
 * holds, whatever offset the message carried, so a retried message picks up after the last committed chunk.
 */
export async function runContactImport(
  ctx: Ctx,
  importId: string,
  options: { deadline: number; tuning?: Partial<typeof importTuning> },
): Promise<ImportRunResult> {
  const { env, db } = ctx;
  const tuning = { ...importTuning, ...options.tuning };
  const job = await db.select().from(contactImports).where(eq(contactImports.id, importId)).get();
  if (!job) return { state: "missing" };
  if (job.status === "completed" || job.status === "failed") {
    // A crash between the last commit and the delete would otherwise leave the file behind.
    await env.BLOBS.delete(job.inputKey);
    return job.status === "completed" ? { state: "completed", rowsRead: 0, rowsWritten: 0 } : { state: "failed" };
  }

  const stored = await env.BLOBS.head(job.inputKey);
  const head = stored && (await env.BLOBS.get(job.inputKey, { range: { offset: 0, length: Math.min(HEADER_MAX_BYTES, stored.size) } }));
  if (!stored || !head) {
    await failContactImport(ctx, importId, "The uploaded file is no longer in storage");
    return { state: "failed" };
  }
  const size = stored.size;
  const header = readHeader(new Uint8Array(await head.arrayBuffer()), size <= HEADER_MAX_BYTES);
  const columns = "error" in header ? undefined : resolveColumns(header.names, job.mapping);
  if ("error" in header || !columns || "errors" in columns) {
    // Checked at upload, so only a file changed in storage gets here.
    await failContactImport(ctx, importId, "The file's header no longer matches the mapping");
    return { state: "failed" };
  }
  if (job.status === "pending") {
    await db
      .update(contactImports)
      .set({ status: "processing", updatedAt: sql`${sqlNow}` })
      .where(and(eq(contactImports.id, importId), eq(contactImports.status, "pending")))
      .run();
  }

  const topics: TopicLookup = new Map(
    columns.topics === undefined
      ? []
      : (await allTopics(db, job.accountId)).flatMap((topic) => [
          [topic.id.toLowerCase(), topic.id],
          [topic.name.toLowerCase(), topic.id],
        ]),
  );

  let { inputOffset: offset, processed, failed } = job;
  const usage: D1Usage = { rowsRead: 0, rowsWritten: 0 };
  for (;;) {
    const length = Math.min(tuning.windowBytes, size - offset);
    const atEnd = offset + length >= size;
    let bytes = new Uint8Array(0);
    if (length > 0) {
      const window = await env.BLOBS.get(job.inputKey, { range: { offset, length } });
      if (!window) {
        await failContactImport(ctx, importId, "The uploaded file is no longer in storage");
        return { state: "failed" };
      }
      bytes = new Uint8Array(await window.arrayBuffer());
    }

    const records: CsvRecord[] = [];
    let exhausted = true;
    for (const record of csvRecords(bytes, { start: 0, delimiter: header.delimiter, atEnd })) {
      records.push(record);
      if (records.length >= tuning.rowsPerChunk) {
        exhausted = false;
        break;
      }
    }
    if (records.length === 0 && !atEnd) {
      await failContactImport(ctx, importId, `Row ${processed + 2} is larger than ${Math.round(tuning.windowBytes / 1024)} KB`);
      return { state: "failed" };
    }
    const done = atEnd && exhausted;
    const nextOffset = done ? size : offset + records.at(-1)!.end;

    const upserts: ContactUpsert[] = [];
    const subscriptions: [string, string][] = [];
    const errors: { row: number; message: string }[] = [];
    records.forEach((record, index) => {
      const outcome = importRow(record, columns, topics);
      // Row numbers as a spreadsheet shows them: the header is row 1.
      if ("error" in outcome) errors.push({ row: processed + index + 2, message: outcome.error });
      else {
        upserts.push(outcome.upsert);
        for (const topicId of outcome.topicIds) subscriptions.push([outcome.upsert.address.key, topicId]);
      }
    });

    const textColumns = columns.text.map(([field]) => field);
    const slices = chunk(upserts, tuning.rowsPerStatement);
    const statements: D1PreparedStatement[] = slices.map((rows) =>
      statement(db, contactUpsertSql(job.accountId, rows, { columns: textColumns, onExisting: "keep_blank" })),
    );
    if (job.listId) {
      for (const rows of slices) {
        const keys = rows.map((upsert) => upsert.address.key);
        statements.push(statement(db, addMembersByKeySql(job.accountId, job.listId, keys)));
      }
    }
    // After the upserts, in the same transaction: the contacts exist. A topic cell subscribes; it never unsubscribes.
    for (const pairs of chunk(subscriptions, tuning.rowsPerStatement)) {
      statements.push(
        statement(
          db,
          // The pairs are materialised first so that each address is one lookup in contacts_account_email: joined to
          // json_each directly, SQLite scanned the account's contacts for every pair.
          sql`WITH p AS MATERIALIZED (SELECT value ->> '$[0]' AS email_key, value ->> '$[1]' AS topic_id FROM json_each(${JSON.stringify(pairs)}))
            INSERT INTO contact_topics (contact_id, topic_id, account_id, subscribed, updated_at)
            SELECT c.id, p.topic_id, ${job.accountId}, 1, ${sqlNow}
            FROM p JOIN contacts AS c ON c.account_id = ${job.accountId} AND c.email_key = p.email_key
            WHERE 1
            ON CONFLICT (contact_id, topic_id) DO UPDATE SET subscribed = 1, updated_at = excluded.updated_at`,
        ),
      );
    }
    const kept = errors.slice(0, Math.max(0, IMPORT_ERRORS_KEPT - failed));
    if (kept.length > 0) {
      statements.push(
        statement(
          db,
          sql`INSERT INTO contact_import_errors (import_id, row, message)
            SELECT ${importId}, e.value ->> 'row', e.value ->> 'message' FROM json_each(${JSON.stringify(kept)}) AS e
            WHERE true ON CONFLICT (import_id, row) DO NOTHING`,
        ),
      );
    }
    statements.push(
      statement(db, progressSql(importId, { from: offset, to: nextOffset, records: records.length, upserts, failures: errors.length, done })),
    );
    const results = await batch(db, statements);
    if (results.at(-1)?.meta.changes === 0) return { state: "superseded" };
    for (const { meta } of results) {
      usage.rowsRead += meta.rows_read;
      usage.rowsWritten += meta.rows_written;
    }

    if (job.verify && upserts.length > 0) await verifyChunk(ctx, job, upserts, processed + 2);
    offset = nextOffset;
    processed += records.length;
    failed += errors.length;
    if (done) {
      await env.BLOBS.delete(job.inputKey);
      return { state: "completed", ...usage };
    }
    if (Date.now() >= options.deadline) return { state: "continue", offset, ...usage };
  }
}

/**
 * The chunk's progress, applied only if the import is still at the chunk's start offset. Contacts created by the
 * chunk are those whose freshly minted id now exists (an existing address keeps its id), counted inside the batch.
 */
function progressSql(
  importId: string,
  chunk: { from: number; to: number; records: number; upserts: ContactUpsert[]; failures: number; done: boolean },
): SQL {
  const minted = JSON.stringify(chunk.upserts.map((upsert) => upsert.id));
  const createdCount = sql`(SELECT count(*) FROM contacts WHERE id IN (SELECT value FROM json_each(${minted})))`;
  return sql`UPDATE contact_imports SET
      input_offset = ${chunk.to},
      processed = processed + ${chunk.records},
      created = created + ${createdCount},
      updated = updated + ${chunk.upserts.length} - ${createdCount},
      failed = failed + ${chunk.failures},
      status = ${chunk.done ? "completed" : "processing"},
      updated_at = ${sqlNow}
    WHERE id = ${importId} AND input_offset = ${chunk.from} AND status = 'processing'`;
}
