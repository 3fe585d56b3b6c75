import {
  createTemplate as addTemplate,
  deleteTemplate as removeTemplate,
  findTemplate,
  listTemplates as findTemplates,
  updateTemplate as changeTemplate,
  type TemplateRow,
} from "../domain/templates/templates";
import { templateChangeInput, templateInput } from "../domain/templates/input";
import { notFound, validationError } from "../errors";
import { pageOf } from "../lib/pagination";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";

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

function serializeTemplate(row: TemplateRow) {
  return {
    id: row.id,
    name: row.name,
    subject: row.subject,
    html: row.html,
    text: row.text,
    variables: row.variables,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

const route = (method: "get" | "post" | "patch" | "delete", path: string, summary: string) => ({ method, path, summary, tags: ["Templates"] });

const listTemplates = keyedRoute("send", {
  ...route("get", "/templates", "List templates"),
  request: { query: PaginationQuery },
  responses: { 200: jsonResponse(paginated(TemplateSchema, "TemplateList"), "Templates, newest first") },
});
const createTemplate = keyedRoute("send", {
  ...route("post", "/templates", "Create a template"),
  description: "Placeholders are `{{name}}` and `{{name|fallback}}`; values are HTML-escaped in html and never evaluated.",
  request: { body: jsonBody(templateInput) },
  responses: { 201: jsonResponse(TemplateSchema, "The template") },
});
const getTemplate = keyedRoute("send", {
  ...route("get", "/templates/{id}", "One template"),
  request: { params: IdParam("tpl") },
  responses: { 200: jsonResponse(TemplateSchema, "The template"), 404: errorResponse("No such template") },
});
const updateTemplate = keyedRoute(
  "send",
  {
    ...route("patch", "/templates/{id}", "Change a template"),
    request: { params: IdParam("tpl"), body: jsonBody(templateChangeInput) },
    responses: { 200: jsonResponse(TemplateSchema, "The template"), 404: errorResponse("No such template") },
  },
  { liveKeyOnly: "Changing a template" },
);
const deleteTemplate = keyedRoute(
  "send",
  {
    ...route("delete", "/templates/{id}", "Delete a template"),
    request: { params: IdParam("tpl") },
    responses: { 200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"), 404: errorResponse("No such template") },
  },
  { liveKeyOnly: "Deleting a template" },
);

export const templateRoutes = createRouter()
  .openapi(listTemplates, async (c) => {
    const { limit, cursor } = c.req.valid("query");
    const rows = await findTemplates(c.var.ctx.db, c.get("auth").account.id, { cursor, limit });
    return c.json(pageOf(rows, limit, serializeTemplate), 200);
  })
  .openapi(createTemplate, async (c) => {
    const body = c.req.valid("json");
    const row = await addTemplate(c.var.ctx.db, c.get("auth").account.id, {
      name: body.name,
      subject: body.subject,
      html: body.html ?? null,
      text: body.text ?? null,
    });
    return c.json(serializeTemplate(row), 201);
  })
  .openapi(getTemplate, async (c) => {
    const row = await findTemplate(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!row) throw notFound("Template");
    return c.json(serializeTemplate(row), 200);
  })
  .openapi(updateTemplate, async (c) => {
    const outcome = await changeTemplate(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id, c.req.valid("json"));
    if (outcome.kind === "not_found") throw notFound("Template");
    if (outcome.kind === "no_content") throw validationError({ html: ["A template needs html, text or both"] });
    return c.json(serializeTemplate(outcome.template), 200);
  })
  .openapi(deleteTemplate, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await removeTemplate(c.var.ctx.db, c.get("auth").account.id, id))) throw notFound("Template");
    return c.json({ id, deleted: true as const }, 200);
  });
