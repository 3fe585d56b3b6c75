// The automation pages' pieces: each step in words, the step form of each type with its errors beside its fields,
// and the chooser of a new step's type.

import type { Child } from "hono/jsx";
import type { Step } from "../../../domain/automations/steps";
import { contactTextFields } from "../../../domain/contacts/contacts";
import type { FieldErrors } from "../../../errors";
import { ConditionRows, MatchSelect, shownValue } from "../../components/conditions";
import { Csrf, Notice, formatTime } from "../../layout";
import { stepLabels, stepTypes, waitUnits, type Draft, type StepType, type WaitUnit } from "./form";
import type { Choices } from "./loaders";

const conditionRows = 3;

/** One line per step, in words. */
export function describeStep(step: Step, names: Map<string, string>): string {
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

export type StepFormProps = {
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

export function StepForm({ action, step, choices, csrfToken, errors = {}, index, create, submit }: StepFormProps) {
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

export function TypeChooser({ action, label, extra }: { action: string; label: string; extra?: Child }) {
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
