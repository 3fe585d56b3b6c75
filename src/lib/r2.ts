import { chunk } from "./chunk";
import { logError } from "./log";

/** R2's delete() takes at most 1,000 keys. */
const KEYS_PER_R2_DELETE = 1000;

/**
 * Deletes the R2 objects of rows already deleted from D1, 1,000 keys a call. Nothing would ever name these keys
 * again, so a failed call logs its keys under `what` (the log line is what is left of them) before it throws.
 */
export async function deleteOrphanedObjects(bucket: R2Bucket, keys: string[], what: string): Promise<void> {
  for (const part of chunk(keys, KEYS_PER_R2_DELETE)) {
    try {
      await bucket.delete(part);
    } catch (error) {
      logError(what, { keys: part, error: error instanceof Error ? error.message : String(error) });
      throw error;
    }
  }
}
