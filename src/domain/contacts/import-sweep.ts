// The cron's care of contact imports whose queue message was lost.
//
// Staleness rule (cron, `sweepStaleContactImports`): every committed chunk bumps `updated_at`, an invocation hands
// over to a fresh message after `invocationBudgetMs`, and a message that keeps failing marks the import failed on
// its last attempt. So an import `pending` or `processing` whose `updated_at` is older than STALE_IMPORT_MS has lost
// its queue message. While it is younger than MAX_IMPORT_AGE_MS a new message is sent from the offset D1 holds (a
// copy racing a message that was only late is `superseded` at its first chunk) and `updated_at` is bumped, so the
// next resume waits another window: at most MAX_IMPORT_AGE_MS / STALE_IMPORT_MS resumes. Older, it is failed, keeping
// the rows imported so far. An import that keeps making progress is never touched, however long it runs.

import { and, asc, eq, inArray, lt } from "drizzle-orm";
import { databaseNameOf, type Ctx } from "../../db/client";
import { contactImports } from "../../db/schema";
import { logError, logWarning } from "../../lib/log";
import { failContactImport, type ContactImportMessage } from "./import";

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
  const database = databaseNameOf(db);
  for (const row of stale) {
    try {
      if (row.createdAt < tooOldBefore) {
        await failContactImport(ctx, row.id, "The import stopped making progress; rows imported so far are kept");
        sweep.failed.push(row.id);
        continue;
      }
      const message: ContactImportMessage = { kind: "contact_import", import_id: row.id, offset: row.inputOffset, database };
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
