import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

export const automationStatuses = ["active", "paused"] as const;

// An automation: ordered steps run per contact by one Workflows instance per run. `private_path` is the
// unguessable part of its no-key trigger URL ({SITE_URL}/hooks/automations/<path>); rotating it replaces the value.
export const automations = sqliteTable(
  "automations",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    status: text("status", { enum: automationStatuses }).notNull().default("active"),
    steps: text("steps", { mode: "json" }).$type<unknown[]>().notNull(),
    redirectUrl: text("redirect_url"),
    privatePath: text("private_path").notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("automations_account").on(t.accountId, t.createdAt), uniqueIndex("automations_private_path").on(t.privatePath)],
);

export const automationRunStatuses = ["running", "waiting", "completed", "failed", "cancelled"] as const;

// One run of an automation for one contact; its id is the Workflows instance id. `event_id` (the caller's, or the
// run id when none was given) is unique per automation, so a retried trigger finds its run instead of starting one.
export const automationRuns = sqliteTable(
  "automation_runs",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    automationId: text("automation_id").notNull(),
    contactId: text("contact_id").notNull(),
    email: text("email").notNull(),
    eventId: text("event_id").notNull(),
    status: text("status", { enum: automationRunStatuses }).notNull().default("running"),
    // The steps as they were when the run started, so editing the automation does not change a run under way.
    steps: text("steps", { mode: "json" }).$type<unknown[]>().notNull(),
    input: text("input", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    error: text("error"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
    completedAt: text("completed_at"),
  },
  (t) => [
    uniqueIndex("automation_runs_event").on(t.automationId, t.eventId),
    index("automation_runs_account").on(t.accountId, t.createdAt),
    index("automation_runs_automation").on(t.automationId, t.createdAt),
  ],
);

export const runStepStatuses = ["running", "completed", "skipped", "failed"] as const;

// What each step of a run did (start, finish, result), written by the workflow as it goes.
export const automationRunSteps = sqliteTable(
  "automation_run_steps",
  {
    runId: text("run_id").notNull(),
    index: integer("step_index").notNull(),
    type: text("type").notNull(),
    status: text("status", { enum: runStepStatuses }).notNull(),
    detail: text("detail", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    startedAt: text("started_at"),
    finishedAt: text("finished_at"),
  },
  (t) => [primaryKey({ columns: [t.runId, t.index] })],
);
