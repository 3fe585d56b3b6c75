import { eq } from "drizzle-orm";
import { findInAccountDatabases, inDatabase, openCtx } from "../db/client";
import { contactImports } from "../db/schema";
import { failContactImport, importTuning, runContactImport, type ContactImportMessage } from "../domain/contacts/import";
import { logError } from "../lib/log";

// wrangler.toml gives mailforge-verify max_retries = 3: the 4th delivery is the last before the dead-letter queue.
const LAST_ATTEMPT = 4;

/**
 * One `{kind: "contact_import"}` message of the verify queue: imports chunks for up to `invocationBudgetMs`, then
 * hands over to a new message carrying the offset reached, so a 100,000-row file spans several invocations and
 * never sits in memory. Failures retry with back-off; the last attempt marks the import failed instead of leaving
 * it `processing` forever.
 */
export async function consumeContactImportMessage(message: Message<unknown>, body: ContactImportMessage, env: Env): Promise<void> {
  const importId = body.import_id;
  // The database the message names first, then the others: a message sent before account databases names none (its
  // import is in DB unless its account has moved since). An import in none of them was purged: nothing to do.
  const found = await findInAccountDatabases(
    env,
    body.database,
    (db) => db.select({ accountId: contactImports.accountId }).from(contactImports).where(eq(contactImports.id, importId)).get(),
    (found) => found.accountId,
  );
  if (!found) {
    message.ack();
    return;
  }
  const database = found.database;
  const ctx = inDatabase(openCtx(env), database);
  try {
    const result = await runContactImport(ctx, importId, { deadline: Date.now() + importTuning.invocationBudgetMs });
    if (result.state === "continue") {
      const next: ContactImportMessage = { kind: "contact_import", import_id: importId, offset: result.offset, database };
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
