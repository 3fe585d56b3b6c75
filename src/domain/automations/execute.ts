// What each kind of step does for the run's contact. A step either completes, is skipped (recorded with why: an
// email to an unsubscribed or suppressed contact is never sent), stops the run (a false condition), or throws:
// `PermanentStepError` when retrying cannot help (no credits, the sender or list is gone), `RetryableStepError` when
// it can (an outage, a webhook answering 5xx, the daily limit), so Workflows retries the step. Anything else is a
// fault of ours: `stepFailureMessage` logs it and keeps its text (SQL, stack) off the run the user sees.

import type { AccountDb, Ctx } from "../../db/client";
import { and, eq } from "drizzle-orm";
import { config } from "../../config";
import { contacts } from "../../db/schema";
import { logError } from "../../lib/log";
import { findAccount } from "../accounts/accounts";
import { findSender } from "../campaigns/senders";
import { segmentWhere } from "../segments/segments";
import { contactVariables, updateContact } from "../contacts/contacts";
import { addMembersById, listExists, removeMember } from "../contacts/lists";
import { contactSubscribedToTopic } from "../topics/topics";
import { createResolver } from "../dns/doh";
import { acceptMessage, type AcceptOutcome } from "../sending/accept";
import { renderTemplate } from "../sending/render";
import { signWebhook } from "../webhooks/signing";
import { postWebhook } from "../webhooks/delivery";
import { allowPrivateWebhookUrls, checkWebhookUrl } from "../webhooks/url-policy";
import { freshSince } from "../verification/contact-results";
import { verifySingleAddress } from "../verification/single";
import { automationWebhookSecret } from "./automations";
import type { RunRow } from "./runs";
import type { Step } from "./steps";

export type StepResult = { status: "completed" | "skipped"; detail: Record<string, unknown>; stop?: boolean };

/** Retrying the step cannot help: the run fails with this message. */
export class PermanentStepError extends Error {
  override name = "PermanentStepError";
}

/** Retrying the step may help; if the retries run out, the run fails with this message. */
export class RetryableStepError extends Error {
  override name = "RetryableStepError";
}

/**
 * What the run shows for a step that threw something other than a PermanentStepError: a RetryableStepError's own
 * message, or, for anything else (a D1 error quoting its SQL and parameters, a bug), a plain statement that it
 * failed on our side; the error itself goes to the log with the run's id.
 */
export function stepFailureMessage(error: unknown, context: { runId: string; what: string }): string {
  if (error instanceof RetryableStepError) return error.message;
  logError("automation step failed", {
    run_id: context.runId,
    step: context.what,
    error: error instanceof Error ? error.message : String(error),
    stack: error instanceof Error ? error.stack : undefined,
  });
  return `${context.what} failed because of an internal error on our side (logged with the run id)`;
}

/**
 * Refusals of acceptMessage that can pass: the step is retried rather than the run failed (the daily limit resets, a
 * send with the step's Idempotency-Key still in progress finishes).
 */
const passingRefusals: ReadonlySet<string> = new Set(["daily_limit_reached", "conflict"]);

type Contact = typeof contacts.$inferSelect;

async function loadContact(db: AccountDb, run: RunRow): Promise<Contact> {
  const contact = await db
    .select()
    .from(contacts)
    .where(and(eq(contacts.id, run.contactId), eq(contacts.accountId, run.accountId)))
    .get();
  if (!contact) throw new PermanentStepError(`The contact ${run.email} was deleted`);
  return contact;
}

/** Placeholders a step's email can use: the contact's (`contactVariables`), and custom fields by their bare key (`{{plan}}`). */
function stepVariables(contact: Contact): Record<string, string> {
  const bare = Object.fromEntries(Object.entries(contact.customFields).map(([key, value]) => [key, String(value)]));
  return { ...bare, ...contactVariables(contact) };
}

/** What a refused step's error says about the refusal. */
function refusalDetail(refusal: Exclude<AcceptOutcome, { kind: "accepted" | "queue_unavailable" | "refused" }>): string {
  if (refusal.kind === "invalid")
    return Object.entries(refusal.errors)
      .map(([field, messages]) => `${field}: ${messages.join(", ")}`)
      .join("; ");
  if (refusal.kind === "domain_not_verified") return `the from domain ${refusal.domain} is not verified`;
  return `this needs ${refusal.needed} sending credits, ${refusal.available} available`;
}

async function sendEmail(ctx: Ctx, run: RunRow, index: number, step: Extract<Step, { type: "send_email" }>): Promise<StepResult> {
  const { db } = ctx;
  const contact = await loadContact(db, run);
  const stream = step.stream ?? "broadcast";
  // Marketing reaches subscribed contacts only; transactional mail every contact who confirmed (the suppression list,
  // checked when it is accepted, still keeps bounced addresses and complaints of that stream away).
  if (stream === "broadcast" ? contact.status !== "subscribed" : contact.status === "pending") {
    return { status: "skipped", detail: { reason: `The contact is ${contact.status}; nothing was sent` } };
  }
  if (stream === "broadcast" && step.topic_id && !(await contactSubscribedToTopic(db, contact.id, step.topic_id))) {
    return { status: "skipped", detail: { reason: `The contact is not subscribed to the topic ${step.topic_id}; nothing was sent` } };
  }
  const [account, sender] = await Promise.all([findAccount(ctx.shared, run.accountId), findSender(db, run.accountId, step.sender_id)]);
  if (!account) throw new PermanentStepError("The account no longer exists");
  if (!sender) throw new PermanentStepError(`The sender ${step.sender_id} no longer exists`);
  const variables = stepVariables(contact);
  const accepted = await acceptMessage(
    ctx,
    { account, testMode: false },
    {
      source: "api",
      stream,
      topicId: stream === "broadcast" ? step.topic_id : undefined,
      from: { name: sender.name, address: sender.email },
      recipients: [contact.email],
      replyTo: sender.replyTo ?? undefined,
      tags: [],
      metadata: { automation_id: run.automationId, automation_run_id: run.id },
      templateId: step.template_id,
      compose(template) {
        const subject = renderTemplate(step.subject ?? template?.subject ?? "", variables, { html: false }).replace(/[\r\n]+/g, " ");
        return {
          subject,
          content: {
            kind: "compose",
            to: [contact.email],
            html: step.html ?? template?.html ?? undefined,
            text: step.text ?? template?.text ?? undefined,
            variables,
            attachments: [],
          },
        };
      },
    },
    // A retried step (the Worker died after accepting) gets the first answer back instead of a second email.
    { key: `automation:${run.id}:${index}`, route: "automation step", requestHash: run.id },
  );
  // Refusals that a retry cannot change (no credits, domain no longer verified, a bad template) fail the run;
  // a daily limit or a passing outage is retried by the workflow.
  if (accepted.kind === "queue_unavailable") throw new RetryableStepError("The email could not be queued; retrying");
  if (accepted.kind === "refused") {
    if (passingRefusals.has(accepted.code)) throw new RetryableStepError(`The email was not accepted yet (${accepted.code}): ${accepted.message}`);
    throw new PermanentStepError(`The email was refused (${accepted.code}): ${accepted.message}`);
  }
  if (accepted.kind !== "accepted") throw new PermanentStepError(`The email was refused (${accepted.kind}): ${refusalDetail(accepted)}`);
  const message = accepted.body;
  return message.status === "suppressed"
    ? { status: "skipped", detail: { message_id: message.id, reason: "The address is suppressed; nothing was sent or charged" } }
    : { status: "completed", detail: { message_id: message.id, credits_charged: message.credits_charged } };
}

async function callWebhook(ctx: Ctx, run: RunRow, index: number, step: Extract<Step, { type: "webhook" }>): Promise<StepResult> {
  const { env, db } = ctx;
  const cfg = config(env);
  const check = await checkWebhookUrl(step.url, {
    allowPrivate: allowPrivateWebhookUrls(env),
    resolver: createResolver({ url: cfg.dohUrl, db: ctx.shared }),
  });
  if (!check.ok) {
    if (check.transient) throw new RetryableStepError(`The webhook URL could not be checked: ${check.reason}`);
    throw new PermanentStepError(`The webhook URL is refused: ${check.reason}`);
  }
  const contact = await loadContact(db, run);
  const eventId = `${run.id}:${index}`;
  const body = JSON.stringify({
    id: eventId,
    type: "automation.step",
    created_at: new Date().toISOString(),
    data: {
      automation_id: run.automationId,
      run_id: run.id,
      step_index: index,
      event_id: run.eventId,
      contact: {
        id: contact.id,
        email: contact.email,
        first_name: contact.firstName,
        last_name: contact.lastName,
        company: contact.company,
        phone: contact.phone,
        country: contact.country,
        custom_fields: contact.customFields,
      },
      input: run.input,
    },
  });
  const headers = await signWebhook({
    secrets: [await automationWebhookSecret(cfg, run.automationId)],
    eventId,
    timestamp: Math.floor(Date.now() / 1000),
    body,
  });
  const result = await postWebhook({ url: check.url, body, headers: { ...headers }, timeoutMs: 10_000 });
  if (!result.ok) throw new RetryableStepError(`The webhook answered ${result.statusCode ?? "nothing"}: ${result.responseSnippet ?? ""}`);
  return { status: "completed", detail: { status_code: result.statusCode, duration_ms: result.durationMs } };
}

/** Runs one step (not `wait`: the workflow sleeps itself) for the run's contact. */
export async function executeStep(ctx: Ctx, run: RunRow, index: number, step: Exclude<Step, { type: "wait" }>): Promise<StepResult> {
  const { db } = ctx;
  switch (step.type) {
    case "send_email":
      return sendEmail(ctx, run, index, step);
    case "add_to_list": {
      if (!(await listExists(db, run.accountId, step.list_id))) throw new PermanentStepError(`The list ${step.list_id} no longer exists`);
      const added = await addMembersById(db, run.accountId, step.list_id, [run.contactId]);
      if (added.unknown.length > 0) throw new PermanentStepError(`The contact ${run.email} was deleted`);
      return { status: "completed", detail: { list_id: step.list_id, added: added.added.length > 0 } };
    }
    case "remove_from_list": {
      const removed = await removeMember(db, run.accountId, step.list_id, run.contactId);
      return { status: "completed", detail: { list_id: step.list_id, removed } };
    }
    case "update_contact": {
      const outcome = await updateContact(db, run.accountId, run.contactId, {
        fields: step.fields ?? {},
        ...(step.custom_fields ? { customFields: step.custom_fields } : {}),
      });
      if (outcome.kind === "not_found") throw new PermanentStepError(`The contact ${run.email} was deleted`);
      if (outcome.kind !== "updated") throw new PermanentStepError(`The contact could not be updated: ${JSON.stringify(outcome)}`);
      return { status: "completed", detail: { fields: Object.keys(step.fields ?? {}), custom_fields: Object.keys(step.custom_fields ?? {}) } };
    }
    case "condition": {
      const matched = await db
        .select({ id: contacts.id })
        .from(contacts)
        .where(and(eq(contacts.id, run.contactId), segmentWhere(run.accountId, { match: step.match, conditions: step.conditions })))
        .get();
      return matched
        ? { status: "completed", detail: { matched: true } }
        : { status: "completed", detail: { matched: false, reason: "The contact does not match: the run stops here" }, stop: true };
    }
    case "webhook":
      return callWebhook(ctx, run, index, step);
    case "verify":
      return verifyAddress(ctx, run, index);
  }
}

/**
 * The run's address, checked as a single check is (through the prober where one is configured), unless the contact
 * carries a result younger than VERIFY_FRESH_DAYS, which is reused for free. An invalid address ends the run. Without a
 * verification credit the step is skipped and the run goes on: the mail it leads to matters more than the check.
 */
async function verifyAddress(ctx: Ctx, run: RunRow, index: number): Promise<StepResult> {
  const { env, db } = ctx;
  const contact = await db
    .select({ email: contacts.emailKey, result: contacts.verificationResult, status: contacts.verificationStatus, verifiedAt: contacts.verifiedAt })
    .from(contacts)
    .where(and(eq(contacts.id, run.contactId), eq(contacts.accountId, run.accountId)))
    .get();
  if (!contact) throw new PermanentStepError(`The contact ${run.email} was deleted`);
  let found = contact.result && contact.verifiedAt && contact.verifiedAt >= freshSince(config(env).verifyFreshDays) ? contact : undefined;
  if (!found) {
    const account = await findAccount(ctx.shared, run.accountId);
    if (!account) throw new PermanentStepError("The account no longer exists");
    // A reference of each attempt's own: a check that threw was refunded under it, so a retry must charge anew. An
    // attempt that did check wrote the result onto the contact, so its retry reuses that instead of paying again.
    const check = await verifySingleAddress(ctx, account, contact.email, {
      reference: `${run.id}:${index}:verify:${crypto.randomUUID()}`,
      waitUntil: (promise) => ctx.waitUntil(promise),
    });
    if (check.kind === "insufficient_credits") {
      return { status: "skipped", detail: { reason: "No verification credit: the address was not checked and the run goes on" } };
    }
    found = { ...contact, result: check.result.result, status: check.result.status, verifiedAt: check.checkedAt };
  }
  const detail = { result: found.result, status: found.status, checked_at: found.verifiedAt, reused: found === contact };
  return found.result === "invalid"
    ? { status: "completed", detail: { ...detail, reason: "The address is invalid: the run stops here" }, stop: true }
    : { status: "completed", detail };
}
