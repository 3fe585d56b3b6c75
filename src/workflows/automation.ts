// One run of an automation as a Cloudflare Workflows instance (instance id = run id): each step is a durable
// `step.do` (its result is kept, so a restarted instance does not redo finished steps), each wait a `step.sleep` /
// `step.sleepUntil` that can last up to 365 days. The run row in D1 says what the API shows.

import { inDatabase, openCtx } from "../db/client";
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";
import { executeStep, PermanentStepError, stepFailureMessage, type StepResult } from "../domain/automations/execute";
import { finishRun, loadRun, markRunningStepFailed, recordStepFinish, recordStepStart, type WorkflowParams } from "../domain/automations/runs";
import { stepsSchema } from "../domain/automations/steps";

// A failing step (an outage, a webhook answering 5xx) is tried 5 times (waits of 30 s, 1, 2, 4 min) before the run fails.
const retries = { retries: { limit: 4, delay: "30 seconds", backoff: "exponential" }, timeout: "2 minutes" } as const;

export class AutomationWorkflow extends WorkflowEntrypoint<Env, WorkflowParams> {
  override async run(event: Readonly<WorkflowEvent<WorkflowParams>>, step: WorkflowStep): Promise<{ status: string }> {
    const { runId, database = "DB" } = event.payload;
    const ctx = inDatabase(openCtx(this.env, this.ctx), database);
    // Step results must be serialisable: the steps and each step's result travel as JSON text.
    // Every callback's failure reaches the run's error: a fault of ours (a D1 error quoting its SQL) is logged and
    // shown as an internal error (stepFailureMessage); a PermanentStepError ends the run without more tries.
    const guarded =
      <T>(what: string, work: () => Promise<T>) =>
      async (): Promise<T> => {
        try {
          return await work();
        } catch (error) {
          if (error instanceof PermanentStepError) throw new NonRetryableError(error.message);
          throw new Error(stepFailureMessage(error, { runId, what }));
        }
      };
    // Step results must be serialisable: the steps and each step's result travel as JSON text.
    const snapshot = await step.do(
      "load run",
      guarded("Loading the run", async () => {
        const run = await loadRun(ctx.db, runId);
        return run ? JSON.stringify(run.steps) : "";
      }),
    );
    if (!snapshot) return { status: "missing" };
    const steps = stepsSchema.parse(JSON.parse(snapshot));
    try {
      for (const [index, current] of steps.entries()) {
        const what = `Step ${index} (${current.type})`;
        // A run cancelled through the API (if terminating the instance did not reach it) stops before its next step.
        const live = await step.do(
          `check ${index}`,
          guarded(what, async () => (await loadRun(ctx.db, runId))?.status ?? "missing"),
        );
        if (live !== "running" && live !== "waiting") return { status: live };
        await step.do(
          `start ${index}`,
          guarded(what, () => recordStepStart(ctx.db, runId, index, current)),
        );
        if (current.type === "wait") {
          if (current.seconds !== undefined) await step.sleep(`wait ${index}`, current.seconds * 1000);
          else await step.sleepUntil(`wait ${index}`, new Date(current.until!));
          await step.do(
            `finish ${index}`,
            guarded(what, () => recordStepFinish(ctx.db, runId, index, "completed", {})),
          );
          continue;
        }
        const outcome = await step.do(
          `${current.type} ${index}`,
          retries,
          guarded(what, async () => {
            const run = await loadRun(ctx.db, runId);
            if (!run) throw new PermanentStepError("The run no longer exists");
            return JSON.stringify(await executeStep(ctx, run, index, current));
          }),
        );
        const result = JSON.parse(outcome) as StepResult;
        await step.do(
          `finish ${index}`,
          guarded(what, () => recordStepFinish(ctx.db, runId, index, result.status, result.detail)),
        );
        if (result.stop) break;
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      await step.do("failed", async () => {
        await markRunningStepFailed(ctx.db, runId, message);
        await finishRun(ctx, runId, "failed", message);
      });
      return { status: "failed" };
    }
    await step.do("completed", () => finishRun(ctx, runId, "completed"));
    return { status: "completed" };
  }
}
