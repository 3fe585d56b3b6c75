import { logError } from "./log";

export type ScheduledTask = (env: Env, controller: ScheduledController) => Promise<void>;

/**
 * Runs every cron task to its end even when others fail. A rejection handed to `ctx.waitUntil` is reported nowhere
 * we look, so each failure is logged with its task's name instead, and one task's failure never cuts another short.
 */
export async function runScheduledTasks(tasks: Record<string, ScheduledTask>, env: Env, controller: ScheduledController): Promise<void> {
  await Promise.all(
    Object.entries(tasks).map(async ([name, task]) => {
      try {
        await task(env, controller);
      } catch (error) {
        logError("scheduled task failed", { task: name, cron: controller.cron, error: error instanceof Error ? error.message : String(error) });
      }
    }),
  );
}
