// Sign-up forms (docs/forms.md): what a public sign-up to `POST {SITE_URL}/subscribe/<form id>` does, kept per form:
// the lists and topics it joins, whether it must be confirmed by a mailed link (double opt-in) and from which sender,
// where a browser goes afterwards and which contact fields it takes. This module owns the forms' queries; the
// sign-up itself is ./signup.ts.

import { and, eq } from "drizzle-orm";
import { findInAccountDatabases, inDatabase, inJsonArray, type AccountDb, type Ctx } from "../../db/client";
import { hintedDatabase } from "../../db/hints";
import { forms, lists, senders, topics } from "../../db/schema";
import type { FieldErrors } from "../../errors";
import { newId, nowIso } from "../../lib/ids";
import { accountPage } from "../pagination";
import type { ContactTextField } from "../contacts/contacts";
import { deleteOwned, findOwned, owned, updateOwned } from "../owned";
import { escapeHtml } from "../sending/render";
import { SENDER_REQUIRED, type FormInput } from "./input";

export type FormRow = typeof forms.$inferSelect;

/** The field a form posts that people never see and bots fill in: a sign-up that fills it is answered, not kept. */
export const HONEYPOT_FIELD = "_honeypot";

/**
 * The public address a form posts to. `tag`: the tag of the account database the form is in (src/db/hints.ts), as
 * `?db=` (none for `DB`), so a sign-up finds the form without asking every database.
 */
export function subscribeUrl(siteUrl: string, formId: string, tag: string): string {
  const url = new URL(`/subscribe/${formId}`, siteUrl);
  if (tag !== "") url.searchParams.set("db", tag);
  return url.href;
}

const fieldLabels: Record<ContactTextField, { label: string; type: string; autocomplete: string }> = {
  first_name: { label: "First name", type: "text", autocomplete: "given-name" },
  last_name: { label: "Last name", type: "text", autocomplete: "family-name" },
  company: { label: "Company", type: "text", autocomplete: "organization" },
  phone: { label: "Phone", type: "tel", autocomplete: "tel" },
  country: { label: "Country", type: "text", autocomplete: "country-name" },
};

/**
 * The HTML to paste into a website: a plain form posting to the public endpoint, the form's fields, and the honeypot
 * kept off-screen (not `display:none`, which some bots skip) and out of the tab order and the accessibility tree.
 */
export function htmlSnippet(siteUrl: string, form: Pick<FormRow, "id" | "fields">, tag: string): string {
  const inputs = (form.fields as ContactTextField[]).map((field) => {
    const { label, type, autocomplete } = fieldLabels[field];
    return `  <label>${label} <input type="${type}" name="${field}" autocomplete="${autocomplete}" maxlength="256"></label>\n`;
  });
  return (
    `<form action="${escapeHtml(subscribeUrl(siteUrl, form.id, tag))}" method="post">\n` +
    `  <label>Email <input type="email" name="email" autocomplete="email" required maxlength="320"></label>\n` +
    inputs.join("") +
    `  <div style="position:absolute;left:-10000px" aria-hidden="true"><input type="text" name="${HONEYPOT_FIELD}" tabindex="-1" autocomplete="off"></div>\n` +
    `  <button type="submit">Subscribe</button>\n` +
    `</form>\n`
  );
}

/** `tag`: the tag of the account database the form is in, for its public address. */
export function serializeForm(row: FormRow, siteUrl: string, tag: string) {
  return {
    id: row.id,
    name: row.name,
    lists: row.lists,
    topics: row.topics,
    double_opt_in: row.doubleOptIn,
    sender_id: row.senderId,
    redirect_url: row.redirectUrl,
    fields: row.fields,
    subscribe_url: subscribeUrl(siteUrl, row.id, tag),
    html_snippet: htmlSnippet(siteUrl, row, tag),
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

export type FormSettings = {
  name: string;
  lists: string[];
  topics: string[];
  doubleOptIn: boolean;
  senderId: string | null;
  redirectUrl: string | null;
  fields: ContactTextField[];
};

/**
 * Why the settings cannot be saved: lists, topics or a sender that are not the account's (keyed as the request names
 * them, `lists.1`), or double opt-in without a sender. Checked on the whole form as it would be after a change.
 */
async function settingsProblems(db: AccountDb, accountId: string, settings: FormSettings): Promise<FieldErrors> {
  const [ownLists, ownTopics, sender] = await db.batch([
    db
      .select({ id: lists.id })
      .from(lists)
      .where(and(eq(lists.accountId, accountId), inJsonArray(lists.id, settings.lists))),
    db
      .select({ id: topics.id })
      .from(topics)
      .where(and(eq(topics.accountId, accountId), inJsonArray(topics.id, settings.topics))),
    db
      .select({ id: senders.id })
      .from(senders)
      .where(owned(senders, accountId, settings.senderId ?? "")),
  ]);
  const errors: FieldErrors = {};
  const listIds = new Set(ownLists.map((row) => row.id));
  const topicIds = new Set(ownTopics.map((row) => row.id));
  settings.lists.forEach((id, index) => {
    if (!listIds.has(id)) errors[`lists.${index}`] = [`No list ${id} in this account`];
  });
  settings.topics.forEach((id, index) => {
    if (!topicIds.has(id)) errors[`topics.${index}`] = [`No topic ${id} in this account`];
  });
  if (settings.senderId && sender.length === 0) errors.sender_id = [`No sender ${settings.senderId} in this account`];
  else if (settings.doubleOptIn && !settings.senderId) errors.sender_id = [SENDER_REQUIRED];
  return errors;
}

export type SaveFormOutcome<Kind extends string> = { kind: Kind; form: FormRow } | { kind: "invalid"; errors: FieldErrors };

export async function createForm(db: AccountDb, accountId: string, settings: FormSettings): Promise<SaveFormOutcome<"created">> {
  const errors = await settingsProblems(db, accountId, settings);
  if (Object.keys(errors).length > 0) return { kind: "invalid", errors };
  const form = await db
    .insert(forms)
    .values({ id: newId("frm"), accountId, ...settings })
    .returning()
    .get();
  return { kind: "created", form };
}

export function listForms(db: AccountDb, accountId: string, page: { cursor?: string; limit: number }): Promise<FormRow[]> {
  return accountPage(db, forms, accountId, page);
}

export async function findForm(db: AccountDb, accountId: string, id: string): Promise<FormRow | undefined> {
  return findOwned(db, forms, accountId, id);
}

/** A form by its id alone: the public endpoint and confirmation links know no account. */
export async function findPublicForm(db: AccountDb, id: string): Promise<FormRow | undefined> {
  return db.select().from(forms).where(eq(forms.id, id)).get();
}

/**
 * A form by id alone, for the public endpoint, with the context of its account database: the database `tag` names
 * first (a form's address carries it), then the others (an address made before account databases, or before the
 * account moved). `ctx` need not be routed to an account.
 */
export async function locatePublicForm(ctx: Ctx, tag: string | undefined, id: string): Promise<{ form: FormRow; ctx: Ctx } | undefined> {
  const found = await findInAccountDatabases(
    ctx.env,
    hintedDatabase(ctx.env, tag),
    (db) => findPublicForm(db, id),
    (form) => form.accountId,
  );
  return found && { form: found.found, ctx: inDatabase(ctx, found.database) };
}

/** Changes a form; `undefined` keeps a setting. The form as changed is checked whole (double opt-in needs a sender). */
export async function updateForm(
  db: AccountDb,
  accountId: string,
  id: string,
  change: Partial<FormSettings>,
): Promise<SaveFormOutcome<"updated"> | { kind: "not_found" }> {
  const current = await findForm(db, accountId, id);
  if (!current) return { kind: "not_found" };
  const defined = Object.fromEntries(Object.entries(change).filter(([, value]) => value !== undefined)) as Partial<FormSettings>;
  const settings: FormSettings = {
    name: current.name,
    lists: current.lists,
    topics: current.topics,
    doubleOptIn: current.doubleOptIn,
    senderId: current.senderId,
    redirectUrl: current.redirectUrl,
    fields: current.fields as ContactTextField[],
    ...defined,
  };
  const errors = await settingsProblems(db, accountId, settings);
  if (Object.keys(errors).length > 0) return { kind: "invalid", errors };
  const form = await updateOwned(db, forms, accountId, id, { ...settings, updatedAt: nowIso() });
  return form ? { kind: "updated", form } : { kind: "not_found" };
}

/**
 * Deletes a form: its public address answers 404 from then on, and confirmation links already mailed for it say they
 * are no longer valid. Contacts keep their consent record naming it.
 */
export async function deleteForm(db: AccountDb, accountId: string, id: string): Promise<boolean> {
  return deleteOwned(db, forms, accountId, id);
}

/** A POST /forms body (the API's or the dashboard's form) as the settings `createForm` takes. */
export function newFormSettings(body: FormInput): FormSettings {
  return {
    name: body.name,
    lists: body.lists,
    topics: body.topics,
    doubleOptIn: body.double_opt_in,
    senderId: body.sender_id ?? null,
    redirectUrl: body.redirect_url ?? null,
    fields: body.fields,
  };
}
