// What the API and the dashboard do with a contact import: accept a file (checked whole, stored in R2, its first
// chunk queued for import.ts) and show an import's progress and first row errors.

import { asc, eq } from "drizzle-orm";
import { databaseNameOf, type AccountDb, type Ctx } from "../../db/client";
import { contactImportErrors, contactImports } from "../../db/schema";
import type { FieldErrors } from "../../errors";
import { csvBytesProblem } from "../../lib/csv-upload";
import { newId } from "../../lib/ids";
import { logError } from "../../lib/log";
import type { Account } from "../accounts/accounts";
import { availableCredits } from "../credits/ledger";
import { owned } from "../owned";
import type { InsufficientCredits } from "../verification/jobs";
import { csvRecords } from "./csv";
import { failContactImport, IMPORT_ERRORS_KEPT, importObjectKey, type ContactImport, type ContactImportMessage } from "./import";
import { guessMapping, HEADER_MAX_BYTES, readHeader, resolveColumns, type ImportMapping } from "./import-columns";
import { listExists } from "./lists";

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
  account: Pick<Account, "id">,
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
  if (input.verify) {
    const available = await availableCredits(db, accountId, "verify");
    if (available < total) return { kind: "insufficient_credits", needed: total, available };
  }
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
  const message: ContactImportMessage = { kind: "contact_import", import_id: id, offset: header.dataStart, database: databaseNameOf(db) };
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
