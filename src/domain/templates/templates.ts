// Message templates: a subject and html/text bodies with `{{name|fallback}}` placeholders. This module owns the
// templates' queries and keeps each template's `variables` in step with its content.

import type { AccountDb } from "../../db/client";
import { and, desc, eq, or, sql } from "drizzle-orm";
import { templates } from "../../db/schema";
import { newId, nowIso } from "../../lib/ids";
import { accountPage } from "../pagination";
import { deleteOwned, findOwned, owned, updateOwned } from "../owned";
import { placeholderNames } from "../sending/render";

export type TemplateRow = typeof templates.$inferSelect;
type TemplateContent = Pick<TemplateRow, "subject" | "html" | "text">;

const variablesOf = (content: TemplateContent) => [...new Set([content.subject, content.html ?? "", content.text ?? ""].flatMap(placeholderNames))];

/** A page of the account's templates, newest first (`limit + 1` rows, for `pageOf`). */
export function listTemplates(db: AccountDb, accountId: string, page: { cursor?: string; limit: number }): Promise<TemplateRow[]> {
  return accountPage(db, templates, accountId, page);
}

/** A template's subject and bodies, for a caller that reads it inside its own batch (raw rows: subject, html, text). */
export function templateContentQuery(db: AccountDb, accountId: string, templateId: string) {
  return db
    .select({ subject: templates.subject, html: templates.html, text: templates.text })
    .from(templates)
    .where(owned(templates, accountId, templateId));
}

export async function findTemplate(db: AccountDb, accountId: string, templateId: string): Promise<TemplateRow | undefined> {
  return findOwned(db, templates, accountId, templateId);
}

export async function createTemplate(db: AccountDb, accountId: string, input: { name: string } & TemplateContent): Promise<TemplateRow> {
  const content = { subject: input.subject, html: input.html, text: input.text };
  return db
    .insert(templates)
    .values({ id: newId("tpl"), accountId, name: input.name, ...content, variables: variablesOf(content) })
    .returning()
    .get();
}

export type TemplateChange = { name?: string; subject?: string; html?: string | null; text?: string | null };

/** Changes a template; `undefined` keeps a field, `null` clears a body. A template keeps html, text or both. */
export async function updateTemplate(
  db: AccountDb,
  accountId: string,
  templateId: string,
  change: TemplateChange,
): Promise<{ kind: "not_found" } | { kind: "no_content" } | { kind: "updated"; template: TemplateRow }> {
  const current = await findTemplate(db, accountId, templateId);
  if (!current) return { kind: "not_found" };
  const next = {
    name: change.name ?? current.name,
    subject: change.subject ?? current.subject,
    html: change.html === undefined ? current.html : change.html,
    text: change.text === undefined ? current.text : change.text,
  };
  if (!next.html && !next.text) return { kind: "no_content" };
  const template = await updateOwned(db, templates, accountId, templateId, { ...next, variables: variablesOf(next), updatedAt: nowIso() });
  return template ? { kind: "updated", template } : { kind: "not_found" };
}

/** Deletes a template; false if the account has no such template. */
export async function deleteTemplate(db: AccountDb, accountId: string, templateId: string): Promise<boolean> {
  return deleteOwned(db, templates, accountId, templateId);
}

/**
 * A template named by its id or its name, the id first: the compatibility surfaces' way of naming one (Postmark's
 * TemplateAlias, docs/migrating.md). Of several templates with one name, the newest.
 */
export async function findTemplateByIdOrName(db: AccountDb, accountId: string, idOrName: string): Promise<TemplateRow | undefined> {
  return db
    .select()
    .from(templates)
    .where(and(eq(templates.accountId, accountId), or(eq(templates.id, idOrName), eq(templates.name, idOrName))))
    .orderBy(sql`${templates.id} = ${idOrName} DESC`, desc(templates.createdAt))
    .get();
}
