// Contact imports: a CSV accepted by the API (header and mapping checked, rows counted, file stored in R2), then
// imported by the verify-queue consumer in chunks. Each chunk is one D1 batch: the contact upserts, the list
// memberships, the row errors and the import's progress (byte offset and counters) commit together, and the
// progress update only applies if the offset is still where the chunk started. So a redelivered or duplicated
// message can neither skip rows nor count them twice, and a crash resumes from the last committed chunk.
//
// Staleness rule (cron, `sweepStaleContactImports`): every committed chunk bumps `updated_at`, an invocation hands
// over to a fresh message after `invocationBudgetMs`, and a message that keeps failing marks the import failed on
// its last attempt. So an import `pending` or `processing` whose `updated_at` is older than STALE_IMPORT_MS has lost
// its queue message. While it is younger than MAX_IMPORT_AGE_MS a new message is sent from the offset D1 holds (a
// copy racing a message that was only late is `superseded` at its first chunk) and `updated_at` is bumped, so the
// next resume waits another window: at most MAX_IMPORT_AGE_MS / STALE_IMPORT_MS resumes. Older, it is failed, keeping
// the rows imported so far. An import that keeps making progress is never touched, however long it runs.

import { and, asc, eq, inArray, lt, sql, type SQL } from "drizzle-orm";
import { z } from "zod";
import { inJsonArray, sqlNow, statement, type AccountDb, batch, type Ctx } from "../../db/client";
import { contactImportErrors, contactImports, contacts } from "../../db/schema";
import { addFieldError, type FieldErrors } from "../../errors";
import { chunk } from "../../lib/chunk";
import { csvBytesProblem } from "../../lib/csv-upload";
import { newId } from "../../lib/ids";
import { logError, logWarning } from "../../lib/log";
import {
  CONTACT_TEXT_MAX_LENGTH,
  CUSTOM_FIELD_KEY_MAX_LENGTH,
  CUSTOM_FIELDS_MAX_KEYS,
  contactTextFields,
  contactUpsertSql,
  customFieldsProblem,
  addMembersByKeySql,
  type ContactTextField,
  type ContactUpsert,
  type CustomFields,
} from "./contacts";
import { bomLength, csvRecords, detectDelimiter, type CsvRecord } from "./csv";
import { contactAddress } from "./email";
import { listExists } from "./lists";
import { allTopics } from "../topics/topics";
import { findAccount, type Account } from "../accounts/accounts";
import { enqueueVerificationJob, type InsufficientCredits } from "../verification/jobs";
import { createContactChecks } from "./verify";
import { owned } from "../owned";

export type ContactImport = typeof contactImports.$inferSelect;
export type ImportMapping = Record<string, string>;

export const contactImportMessageSchema = z.object({
  kind: z.literal("contact_import"),
  import_id: z.string().min(1),
  /** Byte offset the import had reached when the message was sent (informational: D1 holds the truth). */
  offset: z.number().int().nonnegative(),
});
export type ContactImportMessage = z.infer<typeof contactImportMessageSchema>;

const CUSTOM_FIELD_PREFIX = "custom_fields.";
/** The header must fit in this many bytes; it is re-read by every chunk. */
const HEADER_MAX_BYTES = 64 * 1024;
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

/** Which column of the file feeds which contact field. */
export type ImportColumns = {
  email: number;
  text: [ContactTextField, number][];
  custom: [string, number][];
  /** A column naming topics (names or ids, separated by `;`, `|` or `,`) to subscribe each contact to. */
  topics?: number;
};

const simplify = (name: string) => name.toLowerCase().replace(/[^a-z0-9]/g, "");

// Header names recognised when no mapping is sent, compared after `simplify` ("E-mail" → "email").
const headerAliases: Record<"email" | ContactTextField | "topics", string[]> = {
  email: ["email", "emailaddress", "mail"],
  first_name: ["firstname", "first", "givenname", "forename"],
  last_name: ["lastname", "last", "surname", "familyname"],
  company: ["company", "companyname", "organization", "organisation"],
  phone: ["phone", "phonenumber", "mobile", "telephone"],
  country: ["country", "countrycode"],
  topics: ["topics", "subscriptions"],
};

/** The mapping used when the request sends none: recognised header names only, other columns are not imported. */
export function guessMapping(header: string[]): ImportMapping {
  const mapping: ImportMapping = {};
  for (const [target, aliases] of Object.entries(headerAliases)) {
    const column = header.find((name) => aliases.includes(simplify(name)));
    if (column !== undefined) mapping[target] = column;
  }
  return mapping;
}

/** Resolves a mapping (`{field: header name}`) against the header: exact name first, then ignoring case. */
export function resolveColumns(header: string[], mapping: ImportMapping): ImportColumns | { errors: FieldErrors } {
  const errors: FieldErrors = {};
  const columns: ImportColumns = { email: -1, text: [], custom: [] };
  for (const [target, name] of Object.entries(mapping)) {
    const path = `mapping.${target}`;
    let index = header.indexOf(name.trim());
    if (index === -1) index = header.findIndex((column) => column.toLowerCase() === name.trim().toLowerCase());
    if (index === -1) {
      addFieldError(errors, path, `The file's header has no column "${name}" (columns: ${header.map((column) => `"${column}"`).join(", ")})`);
      continue;
    }
    if (target === "email") columns.email = index;
    else if (target === "topics") columns.topics = index;
    else if ((contactTextFields as readonly string[]).includes(target)) columns.text.push([target as ContactTextField, index]);
    else if (target.startsWith(CUSTOM_FIELD_PREFIX) && target.length > CUSTOM_FIELD_PREFIX.length) {
      const key = target.slice(CUSTOM_FIELD_PREFIX.length);
      if (key.length > CUSTOM_FIELD_KEY_MAX_LENGTH)
        addFieldError(errors, path, `Custom field names are at most ${CUSTOM_FIELD_KEY_MAX_LENGTH} characters`);
      else columns.custom.push([key, index]);
    } else {
      addFieldError(errors, path, `Unknown field; map to email, ${contactTextFields.join(", ")}, topics or custom_fields.<name>`);
    }
  }
  if (columns.custom.length > CUSTOM_FIELDS_MAX_KEYS)
    addFieldError(errors, "mapping", `At most ${CUSTOM_FIELDS_MAX_KEYS} custom fields can be mapped`);
  if (columns.email === -1 && !errors["mapping.email"]) {
    addFieldError(
      errors,
      "mapping.email",
      Object.keys(mapping).length === 0 || !("email" in mapping)
        ? `No email column: name one "email" or send mapping.email (columns: ${header.map((column) => `"${column}"`).join(", ")})`
        : "Map a column to email",
    );
  }
  return Object.keys(errors).length > 0 ? { errors } : columns;
}

type Header = { names: string[]; delimiter: number; dataStart: number };

/** The header record of a file (from its first bytes), or why there is none. */
export function readHeader(head: Uint8Array, atEnd: boolean): Header | { error: string } {
  const start = bomLength(head);
  const delimiter = detectDelimiter(head, start);
  const first = csvRecords(head, { start, delimiter, atEnd }).next();
  if (first.done) {
    return {
      error: atEnd
        ? "The file is empty: it needs a header row and at least one contact"
        : `The header row is longer than ${HEADER_MAX_BYTES / 1024} KB`,
    };
  }
  return { names: first.value.fields.map((name) => name.trim()), delimiter, dataStart: first.value.end };
}

type RowOutcome = { upsert: ContactUpsert; topicIds: string[] } | { error: string };

/** The account's topics by id and by name (without case), for the `topics` column. */
export type TopicLookup = Map<string, string>;

/** One record as a contact to upsert (and the topics it subscribes to), or the reason it cannot be imported. Empty cells are "no data". */
export function importRow(record: CsvRecord, columns: ImportColumns, topics: TopicLookup = new Map()): RowOutcome {
  if (record.unterminatedQuote) return { error: "A quoted field is never closed, so the rest of the file was read as this row" };
  const cell = (index: number) => (record.fields[index] ?? "").trim();
  const email = cell(columns.email);
  if (email === "") return { error: "The email cell is empty" };
  const address = contactAddress(email);
  if ("error" in address) return { error: address.error };

  const fields: ContactUpsert["fields"] = {};
  for (const [field, index] of columns.text) {
    const value = cell(index);
    if (value.length > CONTACT_TEXT_MAX_LENGTH) return { error: `${field} is longer than ${CONTACT_TEXT_MAX_LENGTH} characters` };
    if (value !== "") fields[field] = value;
  }
  const custom: CustomFields = {};
  for (const [key, index] of columns.custom) {
    const value = cell(index);
    if (value !== "") custom[key] = value;
  }
  const problem = customFieldsProblem(custom);
  if (problem) return { error: problem };
  const named =
    columns.topics === undefined
      ? []
      : cell(columns.topics)
          .split(/[;|,]/)
          .map((name) => name.trim())
          .filter(Boolean);
  const unknown = named.filter((name) => !topics.has(name.toLowerCase()));
  // Row errors never echo a cell (it may hold personal data): the count says enough to find it.
  if (unknown.length > 0) return { error: `${unknown.length} of the topics named is not a topic of this account (GET /topics lists them)` };
  return {
    upsert: { id: newId("con"), address, fields, ...(columns.custom.length > 0 ? { customFields: custom } : {}) },
    topicIds: [...new Set(named.map((name) => topics.get(name.toLowerCase())!))],
  };
}

export const importObjectKey = (accountId: string, importId: string) => `contact-imports/${accountId}/${importId}.csv`;

export type CreateImportOutcome =
  | { kind: "created"; contactImport: ContactImport }
  /** The file, its header, the mapping or the list cannot be imported; nothing was stored. */
  | { kind: "invalid"; message: string; errors: FieldErrors }
  /** `verify: true` and fewer verification credits than the file has rows; nothing was stored. */
  | InsufficientCredits
  /** The queue refused the first chunk's message; the import was failed and the client may retry. */
  | { kind: "queue_unavailable" };

const fileProblem = (problem: string): CreateImportOutcome => ({
  kind: "invalid",
  message: "The file cannot be imported",
  errors: { file: [problem] },
});

/**
 * Accepts an import: checks the header, the mapping and the list, counts the records (so `total` is known from
 * the start), stores the file in R2 and queues the first chunk. Problems with the file as a whole are refused now;
 * problems with single rows are reported per row by the import.
 */
export async function createContactImport(
  ctx: Ctx,
  account: Pick<Account, "id" | "verifyBalance">,
  input: { bytes: Uint8Array; mapping?: ImportMapping; listId?: string; verify?: boolean },
): Promise<CreateImportOutcome> {
  const { env, db } = ctx;
  const accountId = account.id;
  const { bytes } = input;
  if (bytes.length === 0) return fileProblem("The file is empty");
  const problem = csvBytesProblem(bytes);
  if (problem) return fileProblem(problem);
  const header = readHeader(bytes.subarray(0, HEADER_MAX_BYTES), bytes.length <= HEADER_MAX_BYTES);
  if ("error" in header) return fileProblem(header.error);
  const mapping = input.mapping ?? guessMapping(header.names);
  const columns = resolveColumns(header.names, mapping);
  if ("errors" in columns) return { kind: "invalid", message: "The mapping does not fit the file", errors: columns.errors };

  let total = 0;
  const records = csvRecords(bytes, { start: header.dataStart, delimiter: header.delimiter, atEnd: true });
  while (!records.next().done) total++;
  if (total === 0) return fileProblem("The file has a header but no rows to import");

  // Checked against every row up front (fresh results are reused, so fewer may be charged): an import does not stop
  // half way for want of credits, and the answer says how many are needed before anything is stored.
  if (input.verify && account.verifyBalance < total) return { kind: "insufficient_credits", needed: total, available: account.verifyBalance };
  if (input.listId && !(await listExists(db, accountId, input.listId))) {
    return { kind: "invalid", message: "The request is invalid", errors: { list_id: ["No list with this id in your account"] } };
  }

  const id = newId("imp");
  const inputKey = importObjectKey(accountId, id);
  await env.BLOBS.put(inputKey, bytes, { httpMetadata: { contentType: "text/csv" } });
  const created = await db
    .insert(contactImports)
    .values({
      id,
      accountId,
      listId: input.listId ?? null,
      status: "pending",
      mapping,
      inputKey,
      inputOffset: header.dataStart,
      total,
      verify: input.verify ?? false,
    })
    .returning()
    .get();
  const message: ContactImportMessage = { kind: "contact_import", import_id: id, offset: header.dataStart };
  try {
    await env.VERIFY_QUEUE.send(message);
  } catch (error) {
    // Left pending, the import would only start once the cron found it; the client can retry now instead.
    logError("contact import could not be queued; failing it", { import_id: id, error: error instanceof Error ? error.message : String(error) });
    await failContactImport(ctx, id, "The import could not be queued");
    return { kind: "queue_unavailable" };
  }
  return { kind: "created", contactImport: created };
}

export async function findContactImport(db: AccountDb, accountId: string, importId: string) {
  const [rows, errors] = await db.batch([
    db
      .select()
      .from(contactImports)
      .where(owned(contactImports, accountId, importId)),
    db
      .select({ row: contactImportErrors.row, message: contactImportErrors.message })
      .from(contactImportErrors)
      .where(eq(contactImportErrors.importId, importId))
      .orderBy(asc(contactImportErrors.row))
      .limit(IMPORT_ERRORS_KEPT),
  ]);
  const found = rows[0];
  return found && { ...found, errors };
}

export function serializeContactImport(row: ContactImport & { errors: { row: number; message: string }[] }) {
  return {
    id: row.id,
    status: row.status,
    list_id: row.listId,
    total: row.total,
    processed: row.processed,
    created: row.created,
    updated: row.updated,
    failed: row.failed,
    error: row.error,
    errors: row.errors,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

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

export const STALE_IMPORT_MS = 15 * 60_000;
export const MAX_IMPORT_AGE_MS = 2 * 60 * 60_000;
const SWEEP_IMPORTS_MAX = 50;

/** Cron: resumes or fails imports that stopped making progress (see the staleness rule at the top). */
export async function sweepStaleContactImports(ctx: Ctx, now = new Date()): Promise<{ resumed: string[]; failed: string[] }> {
  const { env, db } = ctx;
  const staleBefore = new Date(now.getTime() - STALE_IMPORT_MS).toISOString();
  const tooOldBefore = new Date(now.getTime() - MAX_IMPORT_AGE_MS).toISOString();
  const unfinished = inArray(contactImports.status, ["pending", "processing"]);
  const stale = await db
    .select({ id: contactImports.id, createdAt: contactImports.createdAt, inputOffset: contactImports.inputOffset })
    .from(contactImports)
    .where(and(unfinished, lt(contactImports.updatedAt, staleBefore)))
    .orderBy(asc(contactImports.updatedAt))
    .limit(SWEEP_IMPORTS_MAX)
    .all();
  const sweep = { resumed: [] as string[], failed: [] as string[] };
  for (const row of stale) {
    try {
      if (row.createdAt < tooOldBefore) {
        await failContactImport(ctx, row.id, "The import stopped making progress; rows imported so far are kept");
        sweep.failed.push(row.id);
        continue;
      }
      const message: ContactImportMessage = { kind: "contact_import", import_id: row.id, offset: row.inputOffset };
      await env.VERIFY_QUEUE.send(message);
      await db
        .update(contactImports)
        .set({ updatedAt: now.toISOString() })
        .where(and(eq(contactImports.id, row.id), lt(contactImports.updatedAt, staleBefore), unfinished))
        .run();
      sweep.resumed.push(row.id);
    } catch (error) {
      // One import's trouble must not keep the others stuck.
      logError("stale contact import could not be swept", { import_id: row.id, error: error instanceof Error ? error.message : String(error) });
    }
  }
  if (sweep.resumed.length > 0 || sweep.failed.length > 0) logWarning("contacts: stale imports swept", sweep);
  return sweep;
}
