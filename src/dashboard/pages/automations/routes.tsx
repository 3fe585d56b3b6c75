// Automations: build and edit the steps (send a template or an email, wait, add to or remove from a list, update the
// contact, condition, webhook) one step form at a time, pause and resume, and follow each contact's run. Every save
// parses the whole automation with the API's request schema and checks its references with the API's stepProblems,
// then saves through the same domain functions as /api/v1/automations; refusals show beside the fields they name.

import { Hono, type Context } from "hono";
import { config } from "../../../config";
import {
  createAutomation,
  findAutomation,
  listAutomations,
  privateUrl,
  stepProblems,
  updateAutomation,
  type AutomationRow,
} from "../../../domain/automations/automations";
import { automationChangeInput, automationInput } from "../../../domain/automations/input";
import { findRun, listRuns } from "../../../domain/automations/runs";
import type { Step } from "../../../domain/automations/steps";
import { fieldErrors, notFound, type FieldErrors } from "../../../errors";
import type { Form } from "../../components/conditions";
import { PostButton } from "../../components/post-button";
import { Table } from "../../components/table";
import { describeErrors, liveKeyOnly } from "../../guard";
import { Copyable, Notice, Shell, StatusBadge, canSee, formatTime } from "../../layout";
import type { DashboardEnv } from "../../session";
import { describeStep, StepForm, TypeChooser, type StepFormProps } from "./components";
import { isStepType, stepLabels, stepOf, text, type Draft, type StepType } from "./form";
import { choicesOf, namesOf } from "./loaders";
import { tagOf } from "../../../db/hints";

type Page = Context<DashboardEnv>;

async function ownedAutomation(c: Page): Promise<AutomationRow> {
  const automation = await findAutomation(c.var.ctx.db, c.get("auth").account.id, c.req.param("id") ?? "");
  if (!automation) throw notFound("Automation");
  return automation;
}

const typeOf = (c: Page, fallback: StepType = "send_email"): StepType => {
  const type = c.req.query("type") ?? "";
  return isStepType(type) ? type : fallback;
};

/**
 * The automation's steps after this change, parsed as PATCH /automations/{id} parses them and checked as it checks
 * them: the errors the API would answer, keyed as it keys them, or the steps to save.
 */
async function checkedSteps(c: Page, steps: unknown[]): Promise<{ errors: FieldErrors } | { steps: Step[] }> {
  const parsed = automationChangeInput.safeParse({ steps });
  if (!parsed.success) return { errors: fieldErrors(parsed.error) };
  const checked = parsed.data.steps ?? [];
  const problems = await stepProblems(c.var.ctx.db, c.get("auth").account.id, checked);
  return Object.keys(problems).length > 0 ? { errors: problems } : { steps: checked };
}

const refusedMessage = "The automation cannot be saved";

/** A refused step form, shown again as typed with the errors beside its fields, and the API's 422 summary above. */
async function refusedStep(c: Page, title: string, errors: FieldErrors, props: Omit<StepFormProps, "choices" | "csrfToken" | "errors">) {
  const auth = c.get("auth");
  const choices = await choicesOf(c.var.ctx.db, auth.account.id);
  return c.html(
    <Shell title={title} auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/automations">
      <Notice kind="error">{`${refusedMessage}: ${describeErrors(errors)}`}</Notice>
      <section class="card">
        <StepForm {...props} choices={choices} csrfToken={c.get("csrfToken")} errors={errors} />
      </section>
    </Shell>,
    422,
  );
}

export const automationPages = new Hono<DashboardEnv>()
  .get("/automations", async (c) => {
    const auth = c.get("auth");
    const rows = (await listAutomations(c.var.ctx.db, auth.account.id, { limit: 50 })).slice(0, 50);
    return c.html(
      <Shell title="Automations" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/automations">
        <section class="card">
          <Table
            head={["Name", "Status", "Steps", "Updated"]}
            rows={rows}
            empty="No automations yet. Start one below: name it and choose its first step; add the others on its page."
            row={(automation) => (
              <tr>
                <td class="wrap">
                  <a href={`/dashboard/automations/${automation.id}`}>{automation.name}</a>
                </td>
                <td>
                  <StatusBadge status={automation.status} />
                </td>
                <td>{automation.steps.length}</td>
                <td>{formatTime(automation.updatedAt)}</td>
              </tr>
            )}
          />
        </section>
        <section class="card">
          <h2>New automation</h2>
          <TypeChooser
            action="/dashboard/automations/new"
            label="Next"
            extra={
              <label>
                Name
                <input id="new-automation-name" name="name" type="text" required maxlength={200} placeholder="Onboarding" />
              </label>
            }
          />
        </section>
      </Shell>,
    );
  })
  .get("/automations/new", async (c) => {
    const auth = c.get("auth");
    const choices = await choicesOf(c.var.ctx.db, auth.account.id);
    return c.html(
      <Shell title="New automation" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/automations">
        <section class="card">
          <StepForm
            action="/dashboard/automations"
            step={{ type: typeOf(c) }}
            choices={choices}
            csrfToken={c.get("csrfToken")}
            index={0}
            create={{ name: c.req.query("name") ?? "", status: "active" }}
            submit="Create automation"
          />
        </section>
        <a href="/dashboard/automations">← Automations</a>
      </Shell>,
    );
  })
  .post("/automations", liveKeyOnly("Creating an automation"), async (c) => {
    const form = (await c.req.parseBody({ all: true })) as Form;
    const type = text(form, "type");
    const step = stepOf(isStepType(type) ? type : "send_email", form);
    const create = { name: text(form, "name"), status: text(form, "status") || "active" };
    const parsed = automationInput.safeParse({ name: create.name, status: create.status, steps: [step] });
    const errors = parsed.success ? await stepProblems(c.var.ctx.db, c.get("auth").account.id, parsed.data.steps) : fieldErrors(parsed.error);
    if (!parsed.success || Object.keys(errors).length > 0) {
      return refusedStep(c, "New automation", errors, { action: "/dashboard/automations", step, index: 0, create, submit: "Create automation" });
    }
    const row = await createAutomation(c.var.ctx.db, c.get("auth").account.id, {
      name: parsed.data.name,
      status: parsed.data.status,
      steps: parsed.data.steps,
      redirectUrl: parsed.data.redirect_url ?? null,
    });
    return c.redirect(`/dashboard/automations/${row.id}`, 303);
  })
  .get("/automations/runs/:id", async (c) => {
    const auth = c.get("auth");
    const found = await findRun(c.var.ctx.db, auth.account.id, c.req.param("id"));
    if (!found) throw notFound("Run");
    const { run, steps } = found;
    const byIndex = new Map(steps.map((row) => [row.index, row]));
    const names = namesOf(await choicesOf(c.var.ctx.db, auth.account.id));
    return c.html(
      <Shell title={`Run for ${run.email}`} auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/automations">
        <section class="card">
          <p>
            <StatusBadge status={run.status} /> started {formatTime(run.createdAt)}
            {run.completedAt ? `, ended ${formatTime(run.completedAt)}` : ""}
          </p>
          {run.error ? <Notice kind="error">{run.error}</Notice> : null}
          <Table
            head={["Step", "Status", "Finished"]}
            rows={run.steps as Step[]}
            row={(step, index) => (
              <tr>
                <td class="wrap">
                  {index + 1}. {describeStep(step, names)}
                </td>
                <td>
                  <StatusBadge status={byIndex.get(index)?.status ?? "pending"} />
                </td>
                <td>{formatTime(byIndex.get(index)?.finishedAt)}</td>
              </tr>
            )}
          />
        </section>
        <a href={`/dashboard/automations/${run.automationId}`}>← The automation</a>
      </Shell>,
    );
  })
  .get("/automations/:id", async (c) => {
    const auth = c.get("auth");
    const csrfToken = c.get("csrfToken");
    const automation = await ownedAutomation(c);
    const [runs, choices] = await Promise.all([
      listRuns(c.var.ctx.db, auth.account.id, automation.id, { limit: 50 }),
      choicesOf(c.var.ctx.db, auth.account.id),
    ]);
    const names = namesOf(choices);
    const steps = automation.steps as Step[];
    const base = `/dashboard/automations/${automation.id}`;
    const paused = automation.status === "paused";
    return c.html(
      <Shell title={automation.name} auth={auth} csrfToken={csrfToken} current="/dashboard/automations">
        <div class="grid two">
          <section class="card">
            <h2>Steps</h2>
            <p>
              <StatusBadge status={automation.status} />{" "}
              {paused ? "Triggers are refused until you resume it." : "A trigger starts a run for the contact."}
            </p>
            <PostButton
              action={`${base}/status`}
              csrfToken={csrfToken}
              tone="secondary"
              layout="inline"
              fields={{ status: paused ? "active" : "paused" }}
            >
              {paused ? "Resume" : "Pause"}
            </PostButton>
            <ol class="steps">
              {steps.map((step, index) => (
                <li>
                  <span class="wrap">{describeStep(step, names)}</span>{" "}
                  <a href={`${base}/steps/${index}`} aria-label={`Edit step ${index + 1}`}>
                    Edit
                  </a>
                  {steps.length > 1 ? (
                    <PostButton
                      action={`${base}/steps/${index}/delete`}
                      csrfToken={csrfToken}
                      tone="link danger"
                      label={`Remove step ${index + 1}`}
                      layout="inline-button"
                    >
                      Remove
                    </PostButton>
                  ) : null}
                </li>
              ))}
            </ol>
            <TypeChooser action={`${base}/steps/new`} label="Add step" />
            <p class="hint">Runs under way keep the steps they started with.</p>
            <h3>Private URL</h3>
            <p class="hint">Anyone with this URL can start a run; treat it like a password.</p>
            {/* A secret: a viewer, who may change nothing, does not get the means to start runs. */}
            {canSee(c.get("auth"), "automations", true) ? (
              <Copyable value={privateUrl(config(c.env), automation.privatePath, tagOf(c.var.ctx.db))} label="the private URL" />
            ) : (
              <p>Shown to those who may change automations.</p>
            )}
          </section>
          <section class="card">
            <h2>Runs</h2>
            <Table
              head={["Contact", "Status", "Started"]}
              rows={runs.slice(0, 50)}
              empty={<>No runs yet. Trigger the automation from its private URL or POST /api/v1/automations/{"{id}"}/trigger.</>}
              row={(run) => (
                <tr>
                  <td class="wrap">
                    <a href={`/dashboard/automations/runs/${run.id}`}>{run.email}</a>
                  </td>
                  <td>
                    <StatusBadge status={run.status} />
                    {run.error ? <div class="hint">{run.error}</div> : null}
                  </td>
                  <td>{formatTime(run.createdAt)}</td>
                </tr>
              )}
            />
          </section>
        </div>
        <a href="/dashboard/automations">← Automations</a>
      </Shell>,
    );
  })
  .post("/automations/:id/status", liveKeyOnly("Changing an automation"), async (c) => {
    const automation = await ownedAutomation(c);
    const status = text((await c.req.parseBody()) as Form, "status");
    const parsed = automationChangeInput.safeParse({ status });
    if (!parsed.success) return c.html(<Notice kind="error">{`${refusedMessage}: ${describeErrors(fieldErrors(parsed.error))}`}</Notice>, 422);
    await updateAutomation(c.var.ctx.db, automation.accountId, automation.id, { status: parsed.data.status });
    return c.redirect(`/dashboard/automations/${automation.id}`, 303);
  })
  .get("/automations/:id/steps/new", async (c) => {
    const automation = await ownedAutomation(c);
    const type = typeOf(c);
    const choices = await choicesOf(c.var.ctx.db, automation.accountId);
    return c.html(
      <Shell title={`${automation.name}: ${stepLabels[type]}`} auth={c.get("auth")} csrfToken={c.get("csrfToken")} current="/dashboard/automations">
        <section class="card">
          <StepForm
            action={`/dashboard/automations/${automation.id}/steps`}
            step={{ type }}
            choices={choices}
            csrfToken={c.get("csrfToken")}
            index={automation.steps.length}
            submit="Add step"
          />
        </section>
        <a href={`/dashboard/automations/${automation.id}`}>← {automation.name}</a>
      </Shell>,
    );
  })
  .get("/automations/:id/steps/:index", async (c) => {
    const automation = await ownedAutomation(c);
    const index = Number(c.req.param("index"));
    const step = (automation.steps as Step[])[index];
    if (!Number.isInteger(index) || !step) throw notFound("Step");
    const choices = await choicesOf(c.var.ctx.db, automation.accountId);
    return c.html(
      <Shell title={`${automation.name}: step ${index + 1}`} auth={c.get("auth")} csrfToken={c.get("csrfToken")} current="/dashboard/automations">
        <section class="card">
          <StepForm
            action={`/dashboard/automations/${automation.id}/steps/${index}`}
            step={step as Draft}
            choices={choices}
            csrfToken={c.get("csrfToken")}
            index={index}
            submit="Save step"
          />
        </section>
        <a href={`/dashboard/automations/${automation.id}`}>← {automation.name}</a>
      </Shell>,
    );
  })
  .post("/automations/:id/steps/:index/delete", liveKeyOnly("Changing an automation"), async (c) => {
    const automation = await ownedAutomation(c);
    const index = Number(c.req.param("index"));
    if (!Number.isInteger(index) || !(automation.steps as Step[])[index]) throw notFound("Step");
    const outcome = await checkedSteps(
      c,
      (automation.steps as Step[]).filter((_, at) => at !== index),
    );
    if ("errors" in outcome) return c.html(<Notice kind="error">{`${refusedMessage}: ${describeErrors(outcome.errors)}`}</Notice>, 422);
    await updateAutomation(c.var.ctx.db, automation.accountId, automation.id, { steps: outcome.steps });
    return c.redirect(`/dashboard/automations/${automation.id}`, 303);
  })
  .post("/automations/:id/steps/:index?", liveKeyOnly("Changing an automation"), async (c) => {
    const automation = await ownedAutomation(c);
    const saved = automation.steps as Step[];
    const given = c.req.param("index");
    const index = given === undefined ? saved.length : Number(given);
    if (!Number.isInteger(index) || index < 0 || index > saved.length || (given !== undefined && index === saved.length)) throw notFound("Step");
    const form = (await c.req.parseBody({ all: true })) as Form;
    const type = text(form, "type");
    const step = stepOf(isStepType(type) ? type : "send_email", form);
    const steps: unknown[] = [...saved];
    steps[index] = step;
    const outcome = await checkedSteps(c, steps);
    if ("errors" in outcome) {
      const action = `/dashboard/automations/${automation.id}/steps${given === undefined ? "" : `/${index}`}`;
      return refusedStep(c, automation.name, outcome.errors, { action, step, index, submit: given === undefined ? "Add step" : "Save step" });
    }
    await updateAutomation(c.var.ctx.db, automation.accountId, automation.id, { steps: outcome.steps });
    return c.redirect(`/dashboard/automations/${automation.id}`, 303);
  });
