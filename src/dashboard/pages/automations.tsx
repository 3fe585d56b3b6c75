// Automations: build and edit the steps (send a template or an email, wait, add to or remove from a list, update the
// contact, condition, webhook) one step form at a time, pause and resume, and follow each contact's run. Every save
// parses the whole automation with the API's request schema and checks its references with the API's stepProblems,
// then saves through the same domain functions as /api/v1/automations; refusals show beside the fields they name.
import { Hono, type Context } from "hono";
import type { Child } from "hono/jsx";
import { config } from "../../config";
import {
  createAutomation,
  findAutomation,
  listAutomations,
  privateUrl,
  stepProblems,
  updateAutomation,
  type AutomationRow,
} from "../../domain/automations/automations";
import { automationChangeInput, automationInput } from "../../domain/automations/input";
import { findRun, listRuns } from "../../domain/automations/runs";
import type { Step } from "../../domain/automations/steps";
import { listSenders } from "../../domain/campaigns/senders";
import { contactTextFields } from "../../domain/contacts/contacts";
import { listLists } from "../../domain/contacts/lists";
import { listTemplates } from "../../domain/templates/templates";
import { fieldErrors, notFound, type FieldErrors } from "../../errors";
import { describeErrors, liveKeyOnly } from "../guard";
import { ConditionRows, MatchSelect, conditionsOf, shownValue, type Form } from "../components/conditions";
import { PostButton } from "../components/post-button";
import { Table } from "../components/table";
import { Copyable, Csrf, Notice, Shell, StatusBadge, canSee, formatTime } from "../layout";
import type { DashboardEnv } from "../session";
import { allTopics } from "../../domain/topics/topics";

type Page = Context<DashboardEnv>;
/** A step as the form gave it, before the schema has judged it (shown back as typed when refused). */
type Draft = Record<string, unknown> & { type: StepType };

const stepTypes = ["send_email", "wait", "add_to_list", "remove_from_list", "update_contact", "condition", "webhook", "verify"] as const;
type StepType = (typeof stepTypes)[number];
const stepLabels: Record<StepType, string> = {
  send_email: "Send an email",
  wait: "Wait",
  add_to_list: "Add to a list",
  remove_from_list: "Remove from a list",
  update_contact: "Update the contact",
  condition: "Continue only if",
  webhook: "Call a webhook",
  verify: "Verify the address",
};
const isStepType = (value: string): value is StepType => (stepTypes as readonly string[]).includes(value);
const waitUnits = { minutes: 60, hours: 3600, days: 86_400 } as const;
type WaitUnit = keyof typeof waitUnits;
const conditionRows = 3;

const text = (form: Form, name: string) => {
  const value = form[name];
  return typeof value === "string" ? value.trim() : "";
};

/** The step's form fields as the API names them; blank fields are left out, so the schema's own rules name what is missing. */
function stepOf(type: StepType, form: Form): Draft {
  const given = (name: string) => (text(form, name) === "" ? {} : { [name]: text(form, name) });
  switch (type) {
    case "send_email": {
      const raw = (name: string) => (typeof form[name] === "string" && form[name] !== "" ? { [name]: form[name] } : {});
      return {
        type,
        ...given("sender_id"),
        ...given("template_id"),
        ...given("subject"),
        ...raw("html"),
        ...raw("text"),
        ...given("stream"),
        ...given("topic_id"),
      };
    }
    case "wait": {
      const until = text(form, "until");
      // A datetime-local control has no zone; the form says it is UTC.
      if (until !== "") return { type, until: /^\d{4}-\d\d-\d\dT\d\d:\d\d$/.test(until) ? `${until}:00Z` : until };
      const amount = text(form, "amount");
      if (amount === "") return { type };
      const unit = (text(form, "unit") in waitUnits ? text(form, "unit") : "days") as WaitUnit;
      return { type, seconds: /^\d+$/.test(amount) ? Number(amount) * waitUnits[unit] : amount };
    }
    case "add_to_list":
    case "remove_from_list":
      return { type, ...given("list_id") };
    case "update_contact": {
      const fields = Object.fromEntries(contactTextFields.filter((name) => text(form, name) !== "").map((name) => [name, text(form, name)]));
      const custom = Object.fromEntries(
        text(form, "custom_fields")
          .split(/\r?\n/)
          .map((line) => line.trim())
          .filter(Boolean)
          .map((line) => {
            const at = line.indexOf("=");
            return at < 0 ? [line, ""] : [line.slice(0, at).trim(), line.slice(at + 1).trim()];
          }),
      );
      return {
        type,
        ...(Object.keys(fields).length > 0 ? { fields } : {}),
        ...(Object.keys(custom).length > 0 ? { custom_fields: custom } : {}),
      };
    }
    case "condition":
      return { type, match: text(form, "match") || "all", conditions: conditionsOf(form) };
    case "webhook":
      return { type, ...given("url") };
    case "verify":
      return { type };
  }
}

/** One line per step, in words. */
function describeStep(step: Step, names: Map<string, string>): string {
  const name = (id: string) => names.get(id) ?? id;
  switch (step.type) {
    case "send_email": {
      const what = step.template_id ? `Send the template “${name(step.template_id)}”` : `Send “${step.subject}”`;
      const stream = step.stream === "transactional" ? " (transactional)" : step.topic_id ? ` (topic ${name(step.topic_id)})` : "";
      return `${what} from ${name(step.sender_id)}${stream}`;
    }
    case "wait":
      if (step.until) return `Wait until ${formatTime(step.until)}`;
      return `Wait ${humanDuration(step.seconds ?? 0)}`;
    case "add_to_list":
      return `Add to the list “${name(step.list_id)}”`;
    case "remove_from_list":
      return `Remove from the list “${name(step.list_id)}”`;
    case "update_contact": {
      const changes = [...Object.entries(step.fields ?? {}), ...Object.entries(step.custom_fields ?? {})].map(
        ([field, value]) => `${field} = ${String(value)}`,
      );
      return `Update the contact: ${changes.join(", ")}`;
    }
    case "condition":
      return `Continue only if ${step.match === "any" ? "any" : "all"} of: ${step.conditions.map((condition) => `${condition.field} ${condition.op} ${shownValue(condition.value)}`.trim()).join("; ")}`;
    case "webhook":
      return `Call ${step.url}`;
    case "verify":
      return "Verify the address; stop if it is invalid";
  }
}

function humanDuration(seconds: number): string {
  for (const [unit, size] of [
    ["day", 86_400],
    ["hour", 3600],
    ["minute", 60],
  ] as const) {
    if (seconds % size === 0) return `${seconds / size} ${unit}${seconds / size === 1 ? "" : "s"}`;
  }
  return `${seconds} seconds`;
}

/** What the step form needs to offer choices: the account's senders, templates, lists and topics. */
async function choicesOf(d1: D1Database, accountId: string) {
  const [senders, templates, lists, topics] = await Promise.all([
    listSenders(d1, accountId, { limit: 100 }),
    listTemplates(d1, accountId, { limit: 100 }),
    listLists(d1, accountId, { limit: 100 }),
    allTopics(d1, accountId),
  ]);
  return { senders: senders.slice(0, 100), templates: templates.slice(0, 100), lists: lists.slice(0, 100), topics };
}
type Choices = Awaited<ReturnType<typeof choicesOf>>;

const namesOf = (choices: Choices) =>
  new Map([
    ...choices.senders.map((sender) => [sender.id, `${sender.name} <${sender.email}>`] as const),
    ...choices.templates.map((template) => [template.id, template.name] as const),
    ...choices.lists.map((list) => [list.id, list.name] as const),
    ...choices.topics.map((topic) => [topic.id, topic.name] as const),
  ]);

/** The messages for one form field; the step form shows them under the field. */
function FieldError({ errors, name }: { errors: FieldErrors; name: string }) {
  const messages = errors[name];
  if (!messages) return null;
  return (
    <span class="field-error" id={`error-${name}`} role="alert">
      {messages.join(". ")}
    </span>
  );
}

/** The fields each step type's form renders errors beside; other errors show above the form. */
const fieldsOf: Record<StepType, string[]> = {
  send_email: ["sender_id", "template_id", "subject", "html", "text", "stream", "topic_id"],
  wait: ["seconds", "until"],
  add_to_list: ["list_id"],
  remove_from_list: ["list_id"],
  update_contact: ["fields", "custom_fields"],
  condition: ["match", "conditions"],
  webhook: ["url"],
  verify: [],
};

/** The errors for step `index`, keyed by the step's own field names (`steps.2.sender_id` → `sender_id`; the step itself → ""). */
function stepErrors(errors: FieldErrors, index: number, type: StepType): { beside: FieldErrors; above: string[] } {
  const beside: FieldErrors = {};
  const above: string[] = [];
  const prefix = `steps.${index}`;
  for (const [path, messages] of Object.entries(errors)) {
    const local = path === prefix ? "" : path.startsWith(`${prefix}.`) ? path.slice(prefix.length + 1) : undefined;
    const field = local?.split(".")[0];
    if (field && fieldsOf[type].includes(field))
      beside[field] = [...(beside[field] ?? []), ...messages.map((message) => (local === field ? message : `${local}: ${message}`))];
    else above.push(...messages.map((message) => (local === "" ? message : `${local ?? path}: ${message}`)));
  }
  return { beside, above };
}

function StepFields({ step, choices, errors }: { step: Draft; choices: Choices; errors: FieldErrors }) {
  const value = (name: string) => (typeof step[name] === "string" || typeof step[name] === "number" ? String(step[name]) : "");
  const options = (rows: { id: string; name: string }[], selected: string, blank?: string) => [
    ...(blank !== undefined ? [<option value="">{blank}</option>] : []),
    ...rows.map((row) => (
      <option value={row.id} selected={row.id === selected}>
        {row.name}
      </option>
    )),
  ];
  switch (step.type) {
    case "send_email":
      return (
        <>
          <label for="step-sender">From</label>
          {choices.senders.length === 0 ? <p class="hint">Add a sender first (Campaigns → senders): an email step is sent from one.</p> : null}
          <select id="step-sender" name="sender_id">
            {options(
              choices.senders.map((sender) => ({ id: sender.id, name: `${sender.name} <${sender.email}>` })),
              value("sender_id"),
              "Choose a sender",
            )}
          </select>
          <FieldError errors={errors} name="sender_id" />
          <label for="step-template">Template</label>
          <select id="step-template" name="template_id">
            {options(choices.templates, value("template_id"), "No template: write the email below")}
          </select>
          <FieldError errors={errors} name="template_id" />
          <p class="hint">With a template, leave the subject and body empty: the template's are used, filled in for each contact.</p>
          <label for="step-subject">Subject</label>
          <input id="step-subject" name="subject" type="text" maxlength={998} value={value("subject")} placeholder="Welcome, {{first_name|there}}" />
          <FieldError errors={errors} name="subject" />
          <label for="step-html">HTML</label>
          <textarea id="step-html" name="html">
            {value("html")}
          </textarea>
          <FieldError errors={errors} name="html" />
          <label for="step-text">Text</label>
          <textarea id="step-text" name="text">
            {value("text")}
          </textarea>
          <FieldError errors={errors} name="text" />
          <label for="step-stream">Kind of mail</label>
          <select id="step-stream" name="stream">
            <option value="broadcast" selected={value("stream") !== "transactional"}>
              Marketing (broadcast): subscribed contacts only, with an unsubscribe link
            </option>
            <option value="transactional" selected={value("stream") === "transactional"}>
              Transactional: mail the contact needs whatever their marketing choices
            </option>
          </select>
          <FieldError errors={errors} name="stream" />
          <label for="step-topic">Topic (marketing only)</label>
          <select id="step-topic" name="topic_id">
            {options(choices.topics, value("topic_id"), "None: every subscribed contact; unsubscribing leaves all marketing")}
          </select>
          <FieldError errors={errors} name="topic_id" />
        </>
      );
    case "wait": {
      const seconds = typeof step.seconds === "number" ? step.seconds : undefined;
      const unit: WaitUnit = seconds === undefined || seconds % 86_400 === 0 ? "days" : seconds % 3600 === 0 ? "hours" : "minutes";
      const until = typeof step.until === "string" ? step.until.replace(/:00(\.000)?Z$/, "") : "";
      return (
        <>
          <div class="inline">
            <label for="step-amount">Wait for</label>
            <input
              id="step-amount"
              name="amount"
              type="number"
              min={1}
              value={seconds !== undefined ? String(seconds / waitUnits[unit]) : value("seconds")}
            />
            <select name="unit" aria-label="Unit">
              {(Object.keys(waitUnits) as WaitUnit[]).map((name) => (
                <option value={name} selected={name === unit}>
                  {name}
                </option>
              ))}
            </select>
          </div>
          <FieldError errors={errors} name="seconds" />
          <label for="step-until">or until (UTC)</label>
          <input id="step-until" name="until" type="datetime-local" value={until} />
          <FieldError errors={errors} name="until" />
          <p class="hint">Give one of the two; a wait lasts at most 365 days.</p>
        </>
      );
    }
    case "add_to_list":
    case "remove_from_list":
      return (
        <>
          <label for="step-list">List</label>
          {choices.lists.length === 0 ? <p class="hint">No lists yet: create one under Contacts.</p> : null}
          <select id="step-list" name="list_id">
            {options(choices.lists, value("list_id"), "Choose a list")}
          </select>
          <FieldError errors={errors} name="list_id" />
        </>
      );
    case "update_contact": {
      const fields = (step.fields ?? {}) as Record<string, unknown>;
      const custom = (step.custom_fields ?? {}) as Record<string, unknown>;
      return (
        <>
          <p class="hint">Only the fields you fill in are changed.</p>
          {contactTextFields.map((name) => (
            <>
              <label for={`step-${name}`}>{name.replace("_", " ")}</label>
              <input id={`step-${name}`} name={name} type="text" maxlength={256} value={typeof fields[name] === "string" ? fields[name] : ""} />
            </>
          ))}
          <FieldError errors={errors} name="fields" />
          <label for="step-custom">Custom fields (one key=value a line)</label>
          <textarea id="step-custom" name="custom_fields">
            {Object.entries(custom)
              .map(([key, field]) => `${key}=${String(field)}`)
              .join("\n")}
          </textarea>
          <FieldError errors={errors} name="custom_fields" />
        </>
      );
    }
    case "condition": {
      const conditions = Array.isArray(step.conditions) ? (step.conditions as { field?: string; op?: string; value?: unknown }[]) : [];
      const rows = [...conditions, ...Array.from({ length: Math.max(1, conditionRows - conditions.length) }, () => undefined)];
      return (
        <>
          <label for="step-match">The run continues when the contact matches</label>
          <MatchSelect id="step-match" match={step.match} />
          <fieldset class="conditions">
            <legend>Conditions, as in segments (a custom field is custom_fields.key; list takes list ids)</legend>
            <ConditionRows rows={rows} />
          </fieldset>
          <FieldError errors={errors} name="conditions" />
          <p class="hint">When the contact does not match, the run stops here.</p>
        </>
      );
    }
    case "webhook":
      return (
        <>
          <label for="step-url">URL</label>
          <input id="step-url" name="url" type="url" maxlength={2048} value={value("url")} placeholder="https://example.com/hooks/onboarding" />
          <FieldError errors={errors} name="url" />
          <p class="hint">The run POSTs the contact to it, signed with the automation's webhook secret (X-Service-Signature).</p>
        </>
      );
    case "verify":
      return (
        <p class="hint">
          Checks the contact's address (1 verification credit, or free when it was checked recently) and stops the run when it is invalid.
        </p>
      );
  }
}

type StepFormProps = {
  action: string;
  step: Draft;
  choices: Choices;
  csrfToken: string;
  errors?: FieldErrors;
  index: number;
  /** The new automation's name and status, when this step is its first. */
  create?: { name: string; status: string };
  submit: string;
};

function StepForm({ action, step, choices, csrfToken, errors = {}, index, create, submit }: StepFormProps) {
  const { beside, above } = stepErrors(errors, index, step.type);
  const generic = create ? [] : Object.keys(errors).filter((path) => !path.startsWith("steps."));
  return (
    <form method="post" action={action} class="stack" novalidate>
      <Csrf token={csrfToken} />
      <input type="hidden" name="type" value={step.type} />
      {above.length > 0 || generic.length > 0 ? (
        <Notice kind="error">{[...above, ...generic.flatMap((path) => errors[path] ?? [])].join(". ")}</Notice>
      ) : null}
      {create ? (
        <>
          <label for="aut-name">Name</label>
          <input id="aut-name" name="name" type="text" required maxlength={200} value={create.name} />
          <FieldError errors={errors} name="name" />
          <label for="aut-status">Status</label>
          <select id="aut-status" name="status">
            <option value="active" selected={create.status !== "paused"}>
              Active: runs start when triggered
            </option>
            <option value="paused" selected={create.status === "paused"}>
              Paused: triggers are refused
            </option>
          </select>
          <h3>First step: {stepLabels[step.type]}</h3>
        </>
      ) : null}
      <StepFields step={step} choices={choices} errors={beside} />
      <button type="submit">{submit}</button>
    </form>
  );
}

function TypeChooser({ action, label, extra }: { action: string; label: string; extra?: Child }) {
  return (
    <form method="get" action={action} class="inline">
      {extra ?? null}
      <label>
        Step
        <select id="step-type" name="type">
          {stepTypes.map((type) => (
            <option value={type}>{stepLabels[type]}</option>
          ))}
        </select>
      </label>
      <button type="submit" class="secondary">
        {label}
      </button>
    </form>
  );
}

async function ownedAutomation(c: Page): Promise<AutomationRow> {
  const automation = await findAutomation(c.env.DB, c.get("auth").account.id, c.req.param("id") ?? "");
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
  const problems = await stepProblems(c.env.DB, c.get("auth").account.id, checked);
  return Object.keys(problems).length > 0 ? { errors: problems } : { steps: checked };
}

const refusedMessage = "The automation cannot be saved";

/** A refused step form, shown again as typed with the errors beside its fields, and the API's 422 summary above. */
async function refusedStep(c: Page, title: string, errors: FieldErrors, props: Omit<StepFormProps, "choices" | "csrfToken" | "errors">) {
  const auth = c.get("auth");
  const choices = await choicesOf(c.env.DB, auth.account.id);
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
    const rows = (await listAutomations(c.env.DB, auth.account.id, { limit: 50 })).slice(0, 50);
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
    const choices = await choicesOf(c.env.DB, auth.account.id);
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
    const errors = parsed.success ? await stepProblems(c.env.DB, c.get("auth").account.id, parsed.data.steps) : fieldErrors(parsed.error);
    if (!parsed.success || Object.keys(errors).length > 0) {
      return refusedStep(c, "New automation", errors, { action: "/dashboard/automations", step, index: 0, create, submit: "Create automation" });
    }
    const row = await createAutomation(c.env.DB, c.get("auth").account.id, {
      name: parsed.data.name,
      status: parsed.data.status,
      steps: parsed.data.steps,
      redirectUrl: parsed.data.redirect_url ?? null,
    });
    return c.redirect(`/dashboard/automations/${row.id}`, 303);
  })
  .get("/automations/runs/:id", async (c) => {
    const auth = c.get("auth");
    const found = await findRun(c.env.DB, auth.account.id, c.req.param("id"));
    if (!found) throw notFound("Run");
    const { run, steps } = found;
    const byIndex = new Map(steps.map((row) => [row.index, row]));
    const names = namesOf(await choicesOf(c.env.DB, auth.account.id));
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
      listRuns(c.env.DB, auth.account.id, automation.id, { limit: 50 }),
      choicesOf(c.env.DB, auth.account.id),
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
              <Copyable value={privateUrl(config(c.env), automation.privatePath)} label="the private URL" />
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
    await updateAutomation(c.env.DB, automation.accountId, automation.id, { status: parsed.data.status });
    return c.redirect(`/dashboard/automations/${automation.id}`, 303);
  })
  .get("/automations/:id/steps/new", async (c) => {
    const automation = await ownedAutomation(c);
    const type = typeOf(c);
    const choices = await choicesOf(c.env.DB, automation.accountId);
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
    const choices = await choicesOf(c.env.DB, automation.accountId);
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
    await updateAutomation(c.env.DB, automation.accountId, automation.id, { steps: outcome.steps });
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
    await updateAutomation(c.env.DB, automation.accountId, automation.id, { steps: outcome.steps });
    return c.redirect(`/dashboard/automations/${automation.id}`, 303);
  });
