// Runs: one per (automation, event id), each executed by one Cloudflare Workflows instance whose id is the run id.
// D1 keeps what the API shows: the run's status and what each step did. This module owns those two tables.

import { and, asc, eq, inArray, sql } from "drizzle-orm";
import { databaseNameOf, sqlNow, statement, type AccountDb, batch, type Ctx, type DatabaseName } from "../../db/client";
import { automationRunSteps, automationRuns } from "../../db/schema";
import { newId } from "../../lib/ids";
import { logError } from "../../lib/log";
import { keysetPage } from "../pagination";
import type { ContactAddress } from "../contacts/email";
import { saveContact, type ContactTextField, type CustomFieldsPatch } from "../contacts/contacts";
import { eventStatement } from "../events/events";
import { owned } from "../owned";
import { dispatchEvents } from "../webhooks/dispatch";
import { refused, type Refusal } from "../refusal";
import type { AutomationRow } from "./automations";
import type { Step } from "./steps";

export type RunRow = typeof automationRuns.$inferSelect;
export type RunStepRow = typeof automationRunSteps.$inferSelect;
export type RunStatus = RunRow["status"];
/** A run's instance parameters: its id and the account database its rows are in (runs started before account databases name none: DB). */
export type WorkflowParams = { runId: string; database?: DatabaseName };

export type TriggerInput = {
  address: ContactAddress;
  fields: Partial<Record<ContactTextField, string | null>>;
  customFields?: CustomFieldsPatch;
  eventId?: string;
};

/**
 * Starts the automation for a contact (created or updated as POST /contacts does), once per event id: the run row
 * is inserted only if no run of this automation has that event id (the unique index decides under concurrency), and
 * only the request that inserted it starts the workflow. The others get the existing run with `created: false`.
 */
export async function triggerRun(
  ctx: Ctx,
  automation: AutomationRow,
  input: TriggerInput,
): Promise<{ kind: "triggered"; run: RunRow; created: boolean } | Refusal> {
  const { env, db } = ctx;
  if (automation.status !== "active") return refused("automation_paused", "This automation is paused; set its status to active to trigger it");
  const saved = await saveContact(db, automation.accountId, {
    address: input.address,
    fields: input.fields,
    ...(input.customFields ? { customFields: input.customFields } : {}),
    listIds: [],
  });
  if (saved.kind === "invalid") return refused("validation_failed", "The request is invalid", { errors: saved.errors });
  const runId = newId("run");
  const eventId = input.eventId ?? runId;
  const [inserted] = await db
    .insert(automationRuns)
    .values({
      id: runId,
      accountId: automation.accountId,
      automationId: automation.id,
      contactId: saved.contact.id,
      email: saved.contact.email,
      eventId,
      status: "running",
      steps: automation.steps,
      input: { email: input.address.email, ...input.fields, ...(input.customFields ? { custom_fields: input.customFields } : {}) },
    })
    .onConflictDoNothing({ target: [automationRuns.automationId, automationRuns.eventId] })
    .returning();
  if (!inserted) {
    const existing = await db
      .select()
      .from(automationRuns)
      .where(and(eq(automationRuns.automationId, automation.id), eq(automationRuns.eventId, eventId)))
      .get();
    if (!existing) return refused("conflict", "A run for this event id is being started; retry the request");
    return { kind: "triggered", run: existing, created: false };
  }
  try {
    await env.AUTOMATION_WORKFLOW.create({ id: runId, params: { runId, database: databaseNameOf(db) } satisfies WorkflowParams });
  } catch (error) {
    // No instance, no run: removing the row lets the caller's retry (same event id) start it again.
    logError("starting an automation run failed", { run_id: runId, error: String(error) });
    await db.delete(automationRuns).where(eq(automationRuns.id, runId));
    return refused("upstream_unavailable", "The run could not be started; retry the request (the same event_id is safe)");
  }
  return { kind: "triggered", run: inserted, created: true };
}

export async function findRun(db: AccountDb, accountId: string, runId: string): Promise<{ run: RunRow; steps: RunStepRow[] } | undefined> {
  const [runs, steps] = await db.batch([
    db
      .select()
      .from(automationRuns)
      .where(owned(automationRuns, accountId, runId)),
    db.select().from(automationRunSteps).where(eq(automationRunSteps.runId, runId)).orderBy(asc(automationRunSteps.index)),
  ]);
  const run = runs[0];
  return run ? { run, steps } : undefined;
}

/** The run as the workflow reads it (no account check: the workflow was started for it). */
export async function loadRun(db: AccountDb, runId: string): Promise<RunRow | undefined> {
  return db.select().from(automationRuns).where(eq(automationRuns.id, runId)).get();
}

export async function listRuns(db: AccountDb, accountId: string, automationId: string, page: { cursor?: string; limit: number }): Promise<RunRow[]> {
  const keyset = keysetPage(automationRuns, page.cursor);
  return db
    .select()
    .from(automationRuns)
    .where(and(eq(automationRuns.accountId, accountId), eq(automationRuns.automationId, automationId), keyset.where))
    .orderBy(...keyset.orderBy)
    .limit(page.limit + 1)
    .all();
}

/** A step starts: its row says running (a retried step starts again), and the run says waiting during a wait. */
export async function recordStepStart(db: AccountDb, runId: string, index: number, step: Step): Promise<void> {
  const runStatus = step.type === "wait" ? "waiting" : "running";
  await batch(db, [
    statement(
      db,
      sql`INSERT INTO automation_run_steps (run_id, step_index, type, status, detail, started_at) VALUES (${runId}, ${index}, ${step.type}, 'running', '{}', ${sqlNow})
        ON CONFLICT (run_id, step_index) DO UPDATE SET status = 'running', started_at = COALESCE(started_at, excluded.started_at)`,
    ),
    statement(
      db,
      sql`UPDATE automation_runs SET status = ${runStatus}, updated_at = ${sqlNow} WHERE id = ${runId} AND status IN ('running', 'waiting')`,
    ),
  ]);
}

export async function recordStepFinish(
  db: AccountDb,
  runId: string,
  index: number,
  status: "completed" | "skipped" | "failed",
  detail: Record<string, unknown>,
): Promise<void> {
  await batch(db, [
    statement(
      db,
      sql`UPDATE automation_run_steps SET status = ${status}, detail = ${JSON.stringify(detail)}, finished_at = ${sqlNow}
        WHERE run_id = ${runId} AND step_index = ${index}`,
    ),
    statement(db, sql`UPDATE automation_runs SET status = 'running', updated_at = ${sqlNow} WHERE id = ${runId} AND status = 'waiting'`),
  ]);
}

/** The step that was running when the run failed says so, with the reason. */
export async function markRunningStepFailed(db: AccountDb, runId: string, message: string): Promise<void> {
  await statement(
    db,
    sql`UPDATE automation_run_steps SET status = 'failed', detail = ${JSON.stringify({ error: message })}, finished_at = ${sqlNow}
      WHERE run_id = ${runId} AND status = 'running'`,
  ).run();
}

/**
 * Ends a run that is still under way (completed, failed or cancelled) and emits `automation.completed` with its
 * final status, in one batch: the event is written only by the call that ended the run, so it is emitted once.
 */
export async function finishRun(ctx: Ctx, runId: string, status: "completed" | "failed" | "cancelled", error?: string): Promise<boolean> {
  const { db } = ctx;
  const [ended] = await db
    .update(automationRuns)
    .set({ status, error: error ?? null, completedAt: sqlNow, updatedAt: sqlNow })
    .where(and(eq(automationRuns.id, runId), inArray(automationRuns.status, ["running", "waiting"])))
    .returning();
  if (!ended) return false;
  const event = {
    accountId: ended.accountId,
    type: "automation.completed" as const,
    subjectId: ended.id,
    dedupeKey: `automation.completed:${ended.id}`,
    data: {
      run_id: ended.id,
      automation_id: ended.automationId,
      email: ended.email,
      contact_id: ended.contactId,
      status,
      event_id: ended.eventId,
      ...(error ? { error } : {}),
    },
  };
  await batch(db, [eventStatement(db, event)]);
  await dispatchEvents(ctx, ended.accountId, [event.dedupeKey]);
  return true;
}

/** Stops a run: its status first (the workflow checks it before every step), then the Workflows instance. */
export async function cancelRun(ctx: Ctx, accountId: string, runId: string): Promise<RunRow | undefined> {
  const { env, db } = ctx;
  const found = await findRun(db, accountId, runId);
  if (!found) return undefined;
  if (await finishRun(ctx, runId, "cancelled")) {
    try {
      const instance = await env.AUTOMATION_WORKFLOW.get(runId);
      await instance.terminate();
    } catch (error) {
      // The run is cancelled in D1 either way: the workflow stops at its next step when it sees it.
      logError("terminating an automation run failed", { run_id: runId, error: String(error) });
    }
  }
  return (await findRun(db, accountId, runId))?.run;
}
