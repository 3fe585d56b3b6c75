import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { templates } from "../db/schema";
import { placeholderNames } from "../domain/sending/render";
import { notFound, validationError } from "../errors";
import { newId, nowIso } from "../lib/ids";
import { keysetPage, pageOf } from "../lib/pagination";
import { createRouter, evenWithFieldErrors, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";

type TemplateRow = typeof templates.$inferSelect;

const noLineBreaks = (value: string) => !/[\r\n]/.test(value);
const templateFields = {
  name: z.string().trim().min(1).max(200),
  subject: z.string().min(1).max(998).refine(noLineBreaks, "The subject must not contain line breaks"),
  html: z.string().max(1_000_000).nullable().optional(),
  text: z.string().max(1_000_000).nullable().optional(),
};

const TemplateSchema = z
  .object({
    id: z.string().openapi({ example: "tpl_5hJ2kQ9aZ1xP0cV3bN7mL4" }),
    name: z.string(),
    subject: z.string().openapi({ example: "Welcome, {{first_name|there}}" }),
    html: z.string().nullable(),
    text: z.string().nullable(),
    variables: z.array(z.string()).openapi({ description: "Placeholder names the template uses", example: ["first_name"] }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Template");

const CreateTemplateSchema = z
  .object(templateFields)
  .strict()
  .refine((body) => Boolean(body.html ?? body.text), { message: "Give html, text or both", path: ["html"], ...evenWithFieldErrors })
  .openapi("CreateTemplate");
const UpdateTemplateSchema = z
  .object({
    name: templateFields.name.optional(),
    subject: templateFields.subject.optional(),
    html: templateFields.html,
    text: templateFields.text,
  })
  .strict()
  .openapi("UpdateTemplate");

function serializeTemplate(row: TemplateRow) {
  return { id: row.id, name: row.name, subject: row.subject, html: row.html, text: row.text, variables: row.variables, created_at: row.createdAt, updated_at: row.updatedAt };
}

const variablesOf = (row: Pick<TemplateRow, "subject" | "html" | "text">) =>
  [...new Set([row.subject, row.html ?? "", row.text ?? ""].flatMap(placeholderNames))];

const route = (method: "get" | "post" | "patch" | "delete", path: string, summary: string) => ({ method, path, summary, tags: ["Templates"] });

const listTemplates = keyedRoute("send", {
  ...route("get", "/templates", "List templates"),
  request: { query: PaginationQuery },
  responses: { 200: jsonResponse(paginated(TemplateSchema, "TemplateList"), "Templates, newest first") },
});
const createTemplate = keyedRoute("send", {
  ...route("post", "/templates", "Create a template"),
  description: "Placeholders are `{{name}}` and `{{name|fallback}}`; values are HTML-escaped in html and never evaluated.",
  request: { body: jsonBody(CreateTemplateSchema) },
  responses: { 201: jsonResponse(TemplateSchema, "The template") },
});
const getTemplate = keyedRoute("send", {
  ...route("get", "/templates/{id}", "One template"),
  request: { params: IdParam("tpl") },
  responses: { 200: jsonResponse(TemplateSchema, "The template"), 404: errorResponse("No such template") },
});
const updateTemplate = keyedRoute("send", {
  ...route("patch", "/templates/{id}", "Change a template"),
  request: { params: IdParam("tpl"), body: jsonBody(UpdateTemplateSchema) },
  responses: { 200: jsonResponse(TemplateSchema, "The template"), 404: errorResponse("No such template") },
});
const deleteTemplate = keyedRoute("send", {
  ...route("delete", "/templates/{id}", "Delete a template"),
  request: { params: IdParam("tpl") },
  responses: { 200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"), 404: errorResponse("No such template") },
});

export async function findTemplate(d1: D1Database, accountId: string, id: string): Promise<TemplateRow | undefined> {
  return drizzle(d1).select().from(templates).where(and(eq(templates.id, id), eq(templates.accountId, accountId))).get();
}

export const templateRoutes = createRouter()
  .openapi(listTemplates, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const page = keysetPage(templates, cursor);
    const rows = await drizzle(c.env.DB)
      .select()
      .from(templates)
      .where(and(eq(templates.accountId, c.get("auth").account.id), page.where))
      .orderBy(...page.orderBy)
      .limit(limit + 1)
      .all();
    return c.json(pageOf(rows, limit, serializeTemplate), 200);
  })
  .openapi(createTemplate, async (c) => {
    const body = c.req.valid("json");
    const content = { subject: body.subject, html: body.html ?? null, text: body.text ?? null };
    const row = await drizzle(c.env.DB)
      .insert(templates)
      .values({ id: newId("tpl"), accountId: c.get("auth").account.id, name: body.name, ...content, variables: variablesOf(content) })
      .returning()
      .get();
    return c.json(serializeTemplate(row), 201);
  })
  .openapi(getTemplate, async (c) => {
    const row = await findTemplate(c.env.DB, c.get("auth").account.id, c.req.valid("param").id);
    if (!row) throw notFound("Template");
    return c.json(serializeTemplate(row), 200);
  })
  .openapi(updateTemplate, async (c) => {
    const accountId = c.get("auth").account.id;
    const { id } = c.req.valid("param");
    const current = await findTemplate(c.env.DB, accountId, id);
    if (!current) throw notFound("Template");
    const body = c.req.valid("json");
    const next = {
      name: body.name ?? current.name,
      subject: body.subject ?? current.subject,
      html: body.html === undefined ? current.html : body.html,
      text: body.text === undefined ? current.text : body.text,
    };
    if (!next.html && !next.text) throw validationError({ html: ["A template needs html, text or both"] });
    const row = await drizzle(c.env.DB)
      .update(templates)
      .set({ ...next, variables: variablesOf(next), updatedAt: nowIso() })
      .where(and(eq(templates.id, id), eq(templates.accountId, accountId)))
      .returning()
      .get();
    if (!row) throw notFound("Template");
    return c.json(serializeTemplate(row), 200);
  })
  .openapi(deleteTemplate, async (c) => {
    const row = await drizzle(c.env.DB)
      .delete(templates)
      .where(and(eq(templates.id, c.req.valid("param").id), eq(templates.accountId, c.get("auth").account.id)))
      .returning({ id: templates.id })
      .get();
    if (!row) throw notFound("Template");
    return c.json({ id: row.id, deleted: true as const }, 200);
  });
