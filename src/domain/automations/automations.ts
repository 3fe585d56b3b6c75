// Automations: the resource (name, status, steps, redirect URL) and its unguessable private trigger path. This
// module owns the automations table's queries; runs are in runs.ts.

import { and, eq } from "drizzle-orm";
import { config, type Config } from "../../config";
import { sqlNow, type AccountDb } from "../../db/client";
import { automations, lists, senders, templates, topics } from "../../db/schema";
import type { FieldErrors } from "../../errors";
import { hmacSha256Hex, randomToken } from "../../lib/crypto";
import { newId } from "../../lib/ids";
import { accountPage } from "../pagination";
import { inJsonArray } from "../../db/client";
import { checkConditions } from "../segments/segments";
import { deleteOwned, findOwned, updateOwned } from "../owned";
import type { Step } from "./steps";
import { MAX_WAIT_SECONDS } from "./steps";

export type AutomationRow = typeof automations.$inferSelect;

/** 24 random bytes (192 bits), base64url: the part of the private URL that is the credential. */
const newPrivatePath = () => randomToken(24);

/**
 * The private URL: the path, after the tag of the account database it is in and a dot (src/db/hints.ts; none for
 * `DB`), so a trigger finds the automation without asking every database. A path has no dot.
 */
export const privateUrl = (cfg: Pick<Config, "siteUrl">, path: string, tag: string) =>
  new URL(`/hooks/automations/${tag === "" ? "" : `${tag}.`}${path}`, cfg.siteUrl).href;

/** The database tag (undefined in a URL made before account databases) and the stored path of a private URL's last segment. */
export function privatePathOf(segment: string): { tag: string | undefined; path: string } {
  const dot = segment.indexOf(".");
  return dot < 0 ? { tag: undefined, path: segment } : { tag: segment.slice(0, dot), path: segment.slice(dot + 1) };
}

/**
 * The secret that signs the automation's `webhook` steps (`X-Service-Signature`, as webhook deliveries are signed):
 * derived from DKIM_ENCRYPTION_KEY and the automation's id, so it needs no storage and is the same on every run.
 */
export async function automationWebhookSecret(cfg: Pick<Config, "encryptionKey">, automationId: string): Promise<string> {
  return `whsec_${(await hmacSha256Hex(`automation-webhook:${cfg.encryptionKey}`, automationId)).slice(0, 48)}`;
}

/** `tag`: the tag of the account database the automation is in, for its private URL. */
export async function serializeAutomation(env: Env, row: AutomationRow, tag: string) {
  const cfg = config(env);
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    steps: row.steps as Step[],
    redirect_url: row.redirectUrl,
    private_url: privateUrl(cfg, row.privatePath, tag),
    webhook_secret: await automationWebhookSecret(cfg, row.id),
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

/** The references the steps make (template, sender, lists, condition lists) that are not in this account. */
export async function stepProblems(db: AccountDb, accountId: string, steps: Step[], now = new Date()): Promise<FieldErrors> {
  const errors: FieldErrors = {};
  const templateIds = new Set<string>();
  const senderIds = new Set<string>();
  const listIds = new Set<string>();
  const topicIds = new Set<string>();
  steps.forEach((step) => {
    if (step.type === "send_email") {
      senderIds.add(step.sender_id);
      if (step.template_id) templateIds.add(step.template_id);
      if (step.topic_id) topicIds.add(step.topic_id);
    }
    if (step.type === "add_to_list" || step.type === "remove_from_list") listIds.add(step.list_id);
  });
  const [foundTemplates, foundSenders, foundLists, foundTopics] = await db.batch([
    db
      .select({ id: templates.id })
      .from(templates)
      .where(and(eq(templates.accountId, accountId), inJsonArray(templates.id, [...templateIds]))),
    db
      .select({ id: senders.id })
      .from(senders)
      .where(and(eq(senders.accountId, accountId), inJsonArray(senders.id, [...senderIds]))),
    db
      .select({ id: lists.id })
      .from(lists)
      .where(and(eq(lists.accountId, accountId), inJsonArray(lists.id, [...listIds]))),
    db
      .select({ id: topics.id })
      .from(topics)
      .where(and(eq(topics.accountId, accountId), inJsonArray(topics.id, [...topicIds]))),
  ]);
  const has = (rows: { id: string }[], wanted: string) => rows.some((row) => row.id === wanted);
  for (const [index, step] of steps.entries()) {
    if (step.type === "send_email") {
      if (!has(foundSenders, step.sender_id)) errors[`steps.${index}.sender_id`] = ["No sender with this id in your account"];
      if (step.template_id && !has(foundTemplates, step.template_id))
        errors[`steps.${index}.template_id`] = ["No template with this id in your account"];
      if (step.topic_id && !has(foundTopics, step.topic_id)) errors[`steps.${index}.topic_id`] = ["No topic with this id in your account"];
      if (step.topic_id && step.stream === "transactional")
        errors[`steps.${index}.topic_id`] = ["Topics are for broadcast mail; a transactional step reaches the contact whatever they chose"];
    }
    if ((step.type === "add_to_list" || step.type === "remove_from_list") && !has(foundLists, step.list_id)) {
      errors[`steps.${index}.list_id`] = ["No list with this id in your account"];
    }
    if (step.type === "wait" && step.until !== undefined) {
      const seconds = (Date.parse(step.until) - now.getTime()) / 1000;
      if (seconds > MAX_WAIT_SECONDS) errors[`steps.${index}.until`] = ["A wait can last at most 365 days"];
    }
    if (step.type === "condition") {
      for (const [path, messages] of Object.entries(await checkConditions(db, accountId, step.conditions))) {
        errors[`steps.${index}.${path}`] = messages;
      }
    }
  }
  return errors;
}

export type AutomationInput = { name: string; status: AutomationRow["status"]; steps: Step[]; redirectUrl: string | null };

export async function createAutomation(db: AccountDb, accountId: string, input: AutomationInput): Promise<AutomationRow> {
  const [row] = await db
    .insert(automations)
    .values({
      id: newId("aut"),
      accountId,
      name: input.name,
      status: input.status,
      steps: input.steps,
      redirectUrl: input.redirectUrl,
      privatePath: newPrivatePath(),
    })
    .returning();
  return row!;
}

export async function findAutomation(db: AccountDb, accountId: string, automationId: string): Promise<AutomationRow | undefined> {
  return findOwned(db, automations, accountId, automationId);
}

/** The automation behind a private path (no key: the path is the credential). */
export async function findAutomationByPath(db: AccountDb, path: string): Promise<AutomationRow | undefined> {
  return db.select().from(automations).where(eq(automations.privatePath, path)).get();
}

export function listAutomations(db: AccountDb, accountId: string, page: { cursor?: string; limit: number }): Promise<AutomationRow[]> {
  return accountPage(db, automations, accountId, page);
}

export async function updateAutomation(
  db: AccountDb,
  accountId: string,
  automationId: string,
  change: Partial<AutomationInput>,
): Promise<AutomationRow | undefined> {
  return updateOwned(db, automations, accountId, automationId, {
    ...(change.name !== undefined ? { name: change.name } : {}),
    ...(change.status !== undefined ? { status: change.status } : {}),
    ...(change.steps !== undefined ? { steps: change.steps } : {}),
    ...(change.redirectUrl !== undefined ? { redirectUrl: change.redirectUrl } : {}),
    updatedAt: sqlNow,
  });
}

/** A new private path; the old URL answers 404 from now on. */
export async function rotatePrivatePath(db: AccountDb, accountId: string, automationId: string): Promise<AutomationRow | undefined> {
  return updateOwned(db, automations, accountId, automationId, { privatePath: newPrivatePath(), updatedAt: sqlNow });
}

/** Deletes the automation; its runs keep their own copy of the steps and finish. */
export async function deleteAutomation(db: AccountDb, accountId: string, automationId: string): Promise<boolean> {
  return deleteOwned(db, automations, accountId, automationId);
}
