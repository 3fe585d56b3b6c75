import { eq } from "drizzle-orm";
import { databaseNameOf, findInAccountDatabases, openCtx } from "../db/client";
import { contactImports } from "../db/schema";
import { contactImportMessageSchema, failContactImport, importTuning, runContactImport, type ContactImportMessage } from "../domain/contacts/import";
import { logError } from "../lib/log";

// wrangler.toml gives mailforge-verify max_retries = 3: the 4th delivery is the last before the dead-letter queue.
const LAST_ATTEMPT = 4;

/**
 * One `{kind: "contact_import"}` message of the verify queue: imports chunks for up to `invocationBudgetMs`, then
 * hands over to a new message carrying the offset reached, so a 100,000-row file spans several invocations and
 * never sits in memory. Failures retry with back-off; the last attempt marks the import failed instead of leaving
 * it `processing` forever.
 */
export async function consumeContactImportMessage(message: Message<unknown>, env: Env): Promise<void> {
  const parsed = contactImportMessageSchema.safeParse(message.body);
  if (!parsed.success) {
    logError("malformed contact import message", { message_id: message.id, issues: parsed.error.issues });
    // Retried into the dead-letter queue, where it stays visible.
    message.retry();
    return;
  }
  const importId = parsed.data.import_id;
  // The import's database: the one the message names, or (an older message, or the account moved since) wherever the
  // import is. An import in none of them was purged or never committed: nothing to do.
  const found = await findInAccountDatabases(env, parsed.data.database, (db) =>
    db.select({ id: contactImports.id }).from(contactImports).where(eq(contactImports.id, importId)).get(),
  );
  if (!found) {
    message.ack();
    return;
  }
  const ctx = openCtx(env, undefined, { database: databaseNameOf(found.db) });
  try {
    const result = await runContactImport(ctx, importId, { deadline: Date.now() + importTuning.invocationBudgetMs });
    if (result.state === "continue") {
      const next: ContactImportMessage = { kind: "contact_import", import_id: importId, offset: result.offset, database: databaseNameOf(ctx.db) };
      await env.VERIFY_QUEUE.send(next);
    }
    message.ack();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    logError("contact import chunk failed", { import_id: importId, attempt: message.attempts, error: reason });
    if (message.attempts >= LAST_ATTEMPT) {
      await failContactImport(ctx, importId, "The import stopped after repeated errors; rows imported so far are kept");
      message.ack();
    } else {
      message.retry({ delaySeconds: 10 * 2 ** (message.attempts - 1) });
    }
  }
}
