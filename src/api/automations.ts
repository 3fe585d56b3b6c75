import type { Ctx } from "../db/client";
import {
  createAutomation as addAutomation,
  deleteAutomation as removeAutomation,
  findAutomation,
  listAutomations as findAutomations,
  rotatePrivatePath,
  serializeAutomation,
  stepProblems,
  updateAutomation as changeAutomation,
  type AutomationRow,
} from "../domain/automations/automations";
import { cancelRun as stopRun, findRun, listRuns as findRuns, triggerRun, type RunRow, type RunStepRow } from "../domain/automations/runs";
import { automationChangeInput, automationInput, automationTriggerInput } from "../domain/automations/input";
import type { Step } from "../domain/automations/steps";
import { givenTextFields } from "../domain/contacts/contacts";
import { contactAddress } from "../domain/contacts/email";
import { notFound, validationError } from "../errors";
import { orRefuse } from "../http/refusals";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { pageOf } from "../lib/pagination";
import type { AppEnv } from "../types";
import type { Context } from "hono";
import { tagOf } from "../db/hints";

const AutomationSchema = z
  .object({
    id: z.string().openapi({ example: "aut_7Qm2xK9pL1vB4nZ8cR3tWd" }),
    name: z.string(),
    status: z.enum(["active", "paused"]),
    steps: z.array(z.record(z.string(), z.unknown())),
    redirect_url: z.string().nullable(),
    private_url: z.string().openapi({ description: "Triggers the automation without a key (forms, other tools); rotate it if it leaks" }),
    webhook_secret: z.string().openapi({ description: "Signs the `X-Service-Signature` of its webhook steps" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Automation");

export type TriggerBody = z.infer<typeof automationTriggerInput>;

const TriggerResultSchema = z
  .object({
    run_id: z.string().openapi({ example: "run_1cV8mQ2xK7pL9nZ3bR4tWd" }),
    status: z.enum(["running", "waiting", "completed", "failed", "cancelled"]),
    created: z.boolean().openapi({ description: "false when a run for this event_id existed already" }),
  })
  .openapi("AutomationTriggered");

const RunSchema = z
  .object({
    id: z.string(),
    automation_id: z.string(),
    contact: z.object({ id: z.string(), email: z.string() }),
    status: z.enum(["running", "waiting", "completed", "failed", "cancelled"]),
    steps: z.array(
      z.object({
        index: z.int(),
        type: z.string(),
        status: z.enum(["pending", "running", "completed", "skipped", "failed"]),
        started_at: z.string().nullable(),
        finished_at: z.string().nullable(),
        detail: z.record(z.string(), z.unknown()),
      }),
    ),
    event_id: z.string(),
    error: z.string().nullable(),
    created_at: Timestamp,
    completed_at: z.string().nullable(),
  })
  .openapi("AutomationRun");

const RunSummarySchema = RunSchema.omit({ steps: true }).openapi("AutomationRunSummary");

function serializeRun(run: RunRow, stepRows: RunStepRow[]) {
  const byIndex = new Map(stepRows.map((row) => [row.index, row]));
  return {
    ...serializeRunSummary(run),
    steps: (run.steps as Step[]).map((step, index) => {
      const row = byIndex.get(index);
      return {
        index,
        type: step.type,
        status: row?.status ?? ("pending" as const),
        started_at: row?.startedAt ?? null,
        finished_at: row?.finishedAt ?? null,
        detail: row?.detail ?? {},
      };
    }),
  };
}

function serializeRunSummary(run: RunRow) {
  return {
    id: run.id,
    automation_id: run.automationId,
    contact: { id: run.contactId, email: run.email },
    status: run.status,
    event_id: run.eventId,
    error: run.error,
    created_at: run.createdAt,
    completed_at: run.completedAt,
  };
}

/** Starts (or finds) the run for a trigger body already checked by automationTriggerInput: the API's and the private URL's. */
export async function trigger(ctx: Ctx, automation: AutomationRow, body: TriggerBody) {
  const address = contactAddress(body.email);
  if ("error" in address) throw validationError({ email: [address.error] });
  const { run, created } = orRefuse(
    await triggerRun(ctx, automation, {
      address,
      fields: givenTextFields(body),
      ...(body.custom_fields ? { customFields: body.custom_fields } : {}),
      ...(body.event_id ? { eventId: body.event_id } : {}),
    }),
  );
  return { body: { run_id: run.id, status: run.status, created }, status: created ? (202 as const) : (200 as const) };
}

async function checkSteps(c: Context<AppEnv>, steps: Step[]) {
  const problems = await stepProblems(c.var.ctx.db, c.get("auth").account.id, steps);
  if (Object.keys(problems).length > 0) throw validationError(problems);
}

const route = (method: "get" | "post" | "patch" | "delete", path: string, summary: string) => ({ method, path, summary, tags: ["Automations"] });
const feature = { features: ["automations" as const] };

const listAutomations = keyedRoute(
  "automations",
  {
    ...route("get", "/automations", "List automations"),
    request: { query: PaginationQuery },
    responses: { 200: jsonResponse(paginated(AutomationSchema, "AutomationList"), "Automations, newest first") },
  },
  feature,
);
const createAutomation = keyedRoute(
  "automations",
  {
    ...route("post", "/automations", "Create an automation"),
    description: "Its steps are checked against the account: an unknown template, sender or list is a 422 naming the step.",
    request: { body: jsonBody(automationInput) },
    responses: { 201: jsonResponse(AutomationSchema, "The automation, with its private URL") },
  },
  { ...feature, liveKeyOnly: "Creating an automation" },
);
const getAutomation = keyedRoute(
  "automations",
  {
    ...route("get", "/automations/{id}", "One automation"),
    request: { params: IdParam("aut") },
    responses: { 200: jsonResponse(AutomationSchema, "The automation"), 404: errorResponse("No such automation") },
  },
  feature,
);
const updateAutomation = keyedRoute(
  "automations",
  {
    ...route("patch", "/automations/{id}", "Change an automation"),
    description: "Runs under way keep the steps they started with.",
    request: { params: IdParam("aut"), body: jsonBody(automationChangeInput) },
    responses: { 200: jsonResponse(AutomationSchema, "The automation"), 404: errorResponse("No such automation") },
  },
  { ...feature, liveKeyOnly: "Changing an automation" },
);
const deleteAutomation = keyedRoute(
  "automations",
  {
    ...route("delete", "/automations/{id}", "Delete an automation"),
    description: "Its private URL stops working; runs under way finish with the steps they started with.",
    request: { params: IdParam("aut") },
    responses: { 200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"), 404: errorResponse("No such automation") },
  },
  { ...feature, liveKeyOnly: "Deleting an automation" },
);
const rotateUrl = keyedRoute(
  "automations",
  {
    ...route("post", "/automations/{id}/rotate-url", "Give the automation a new private URL"),
    description: "The old URL answers 404 from now on.",
    request: { params: IdParam("aut") },
    responses: { 200: jsonResponse(AutomationSchema, "The automation with its new private URL"), 404: errorResponse("No such automation") },
  },
  { ...feature, liveKeyOnly: "Rotating a private URL" },
);
const triggerAutomation = keyedRoute(
  "automations",
  {
    ...route("post", "/automations/{id}/trigger", "Start the automation for a contact"),
    description:
      "Creates or updates the contact (as POST /contacts does) and starts a run. The same `event_id` for the same automation returns the same run (200, `created: false`), also under concurrent requests. A suppressed or unsubscribed contact gets a run whose email steps are skipped.",
    request: { params: IdParam("aut"), body: jsonBody(automationTriggerInput) },
    responses: {
      202: jsonResponse(TriggerResultSchema, "A run was started"),
      200: jsonResponse(TriggerResultSchema, "The run of this event_id, started before"),
      404: errorResponse("No such automation"),
      409: errorResponse("The automation is paused (`automation_paused`)"),
    },
  },
  { ...feature, liveKeyOnly: "Triggering an automation" },
);
const listRuns = keyedRoute(
  "automations",
  {
    ...route("get", "/automations/{id}/runs", "The automation's runs"),
    request: { params: IdParam("aut"), query: PaginationQuery },
    responses: {
      200: jsonResponse(paginated(RunSummarySchema, "AutomationRunList"), "Runs, newest first"),
      404: errorResponse("No such automation"),
    },
  },
  feature,
);
const getRun = keyedRoute(
  "automations",
  {
    ...route("get", "/automations/runs/{id}", "One run, with what each step did"),
    request: { params: IdParam("run") },
    responses: { 200: jsonResponse(RunSchema, "The run"), 404: errorResponse("No such run") },
  },
  feature,
);
const cancelRun = keyedRoute(
  "automations",
  {
    ...route("post", "/automations/runs/{id}/cancel", "Stop a run"),
    description: "A run that has ended already is returned as it is.",
    request: { params: IdParam("run") },
    responses: { 200: jsonResponse(RunSummarySchema, "The run"), 404: errorResponse("No such run") },
  },
  { ...feature, liveKeyOnly: "Cancelling a run" },
);

export const automationRoutes = createRouter()
  .openapi(listAutomations, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const rows = await findAutomations(c.var.ctx.db, c.get("auth").account.id, { cursor, limit });
    const page = pageOf(rows, limit, (row) => row);
    return c.json({ ...page, data: await Promise.all(page.data.map((row) => serializeAutomation(c.env, row, tagOf(c.var.ctx.db)))) }, 200);
  })
  .openapi(createAutomation, async (c) => {
    const body = c.req.valid("json");
    await checkSteps(c, body.steps);
    const row = await addAutomation(c.var.ctx.db, c.get("auth").account.id, {
      name: body.name,
      status: body.status,
      steps: body.steps,
      redirectUrl: body.redirect_url ?? null,
    });
    return c.json(await serializeAutomation(c.env, row, tagOf(c.var.ctx.db)), 201);
  })
  .openapi(getAutomation, async (c) => {
    const row = await findAutomation(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!row) throw notFound("Automation");
    return c.json(await serializeAutomation(c.env, row, tagOf(c.var.ctx.db)), 200);
  })
  .openapi(updateAutomation, async (c) => {
    const body = c.req.valid("json");
    if (body.steps) await checkSteps(c, body.steps);
    const row = await changeAutomation(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id, {
      name: body.name,
      status: body.status,
      steps: body.steps,
      redirectUrl: body.redirect_url,
    });
    if (!row) throw notFound("Automation");
    return c.json(await serializeAutomation(c.env, row, tagOf(c.var.ctx.db)), 200);
  })
  .openapi(deleteAutomation, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await removeAutomation(c.var.ctx.db, c.get("auth").account.id, id))) throw notFound("Automation");
    return c.json({ id, deleted: true as const }, 200);
  })
  .openapi(rotateUrl, async (c) => {
    const row = await rotatePrivatePath(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!row) throw notFound("Automation");
    return c.json(await serializeAutomation(c.env, row, tagOf(c.var.ctx.db)), 200);
  })
  .openapi(triggerAutomation, async (c) => {
    const automation = await findAutomation(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!automation) throw notFound("Automation");
    const result = await trigger(c.var.ctx, automation, c.req.valid("json"));
    return c.json(result.body, result.status);
  })
  .openapi(listRuns, async (c) => {
    const accountId = c.get("auth").account.id;
    const { id } = c.req.valid("param");
    if (!(await findAutomation(c.var.ctx.db, accountId, id))) throw notFound("Automation");
    const { limit, cursor } = c.req.valid("query");
    return c.json(pageOf(await findRuns(c.var.ctx.db, accountId, id, { cursor, limit }), limit, serializeRunSummary), 200);
  })
  .openapi(getRun, async (c) => {
    const found = await findRun(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!found) throw notFound("Run");
    return c.json(serializeRun(found.run, found.steps), 200);
  })
  .openapi(cancelRun, async (c) => {
    const run = await stopRun(c.var.ctx, c.get("auth").account.id, c.req.valid("param").id);
    if (!run) throw notFound("Run");
    return c.json(serializeRunSummary(run), 200);
  });
