import { inDatabase, openCtx } from "../db/client";
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
  const ctx = inDatabase(openCtx(env), body.database);
  const importId = body.import_id;
  try {
    const result = await runContactImport(ctx, importId, { deadline: Date.now() + importTuning.invocationBudgetMs });
    if (result.state === "continue") {
      const next: ContactImportMessage = { kind: "contact_import", import_id: importId, offset: result.offset, database: body.database };
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
