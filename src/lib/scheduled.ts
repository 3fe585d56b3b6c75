import type { Ctx } from "../db/client";
import { logError } from "./log";

/** A cron task, given the run's context (src/index.ts runs a sweep of accounts' rows once per account database). */
export type ScheduledTask = (ctx: Ctx, controller: ScheduledController) => Promise<void>;

/**
 * Runs every cron task to its end even when others fail. A rejection handed to `ctx.waitUntil` is reported nowhere
 * we look, so each failure is logged with its task's name instead, and one task's failure never cuts another short.
 */
export async function runScheduledTasks(tasks: Record<string, ScheduledTask>, ctx: Ctx, controller: ScheduledController): Promise<void> {
  await Promise.all(
    Object.entries(tasks).map(async ([name, task]) => {
      try {
        await task(ctx, controller);
      } catch (error) {
        logError("scheduled task failed", { task: name, cron: controller.cron, error: error instanceof Error ? error.message : String(error) });
      }
    }),
  );
}
