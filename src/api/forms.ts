import { config } from "../config";
import { createForm, deleteForm, findForm, listForms, newFormSettings, serializeForm, updateForm, type FormSettings } from "../domain/forms/forms";
import { formChangeInput, formInput } from "../domain/forms/input";
import { notFound, validationError } from "../errors";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { pageOf } from "../lib/pagination";
import { tagOf } from "../db/hints";

const tags = ["Forms"];

export const FormSchema = z
  .object({
    id: z.string().openapi({ example: "frm_6cW2nR8kQ1xT4vB9mL3pZa" }),
    name: z.string(),
    lists: z.array(z.string()),
    topics: z.array(z.string()),
    double_opt_in: z.boolean(),
    sender_id: z.string().nullable(),
    redirect_url: z.string().nullable(),
    fields: z.array(z.string()).openapi({ description: "Contact fields the form takes besides `email`" }),
    subscribe_url: z.string().openapi({
      description: "The public address the form posts to (no key): URL-encoded, multipart or JSON",
      example: "https://mail.example.com/subscribe/frm_6cW2nR8kQ1xT4vB9mL3pZa",
    }),
    html_snippet: z.string().openapi({ description: "A plain HTML form to paste into a page: the fields, a hidden honeypot, no script" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Form");

const createRoute = keyedRoute(
  "contacts",
  {
    method: "post",
    path: "/forms",
    tags,
    summary: "Create a sign-up form",
    description:
      "Its lists, topics and sender must be the account's. With `double_opt_in` (the default) a sign-up is a `pending` contact " +
      "until it follows the link of a confirmation email sent from `sender_id`.",
    request: { body: jsonBody(formInput) },
    responses: { 201: jsonResponse(FormSchema, "The form, with its public address and HTML snippet") },
  },
  { liveKeyOnly: "Creating a form" },
);

const listRoute = keyedRoute("contacts", {
  method: "get",
  path: "/forms",
  tags,
  summary: "The account's sign-up forms, newest first",
  request: { query: PaginationQuery },
  responses: { 200: jsonResponse(paginated(FormSchema, "FormPage"), "A page of forms") },
});

const getRoute = keyedRoute("contacts", {
  method: "get",
  path: "/forms/{id}",
  tags,
  summary: "One sign-up form",
  request: { params: IdParam("frm") },
  responses: { 200: jsonResponse(FormSchema, "The form"), 404: errorResponse("No such form") },
});

const updateRoute = keyedRoute(
  "contacts",
  {
    method: "patch",
    path: "/forms/{id}",
    tags,
    summary: "Change a sign-up form",
    description: "Checked whole as changed: turning double opt-in on needs a sender.",
    request: { params: IdParam("frm"), body: jsonBody(formChangeInput) },
    responses: { 200: jsonResponse(FormSchema, "The form"), 404: errorResponse("No such form") },
  },
  { liveKeyOnly: "Changing a form" },
);

const deleteRoute = keyedRoute(
  "contacts",
  {
    method: "delete",
    path: "/forms/{id}",
    tags,
    summary: "Delete a sign-up form",
    description: "Its public address answers 404 from then on and its unused confirmation links stop working; contacts keep their consent record.",
    request: { params: IdParam("frm") },
    responses: { 200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"), 404: errorResponse("No such form") },
  },
  { liveKeyOnly: "Deleting a form" },
);

/** A POST /forms body (or the dashboard's form, parsed with the same schema) as the domain's settings. */
/** A PATCH body as the domain's change; what it leaves out stays `undefined`. */
function changedSettings(body: z.infer<typeof formChangeInput>): Partial<FormSettings> {
  return {
    name: body.name,
    lists: body.lists,
    topics: body.topics,
    doubleOptIn: body.double_opt_in,
    senderId: body.sender_id,
    redirectUrl: body.redirect_url,
    fields: body.fields,
  };
}

export const formRoutes = createRouter()
  .openapi(createRoute, async (c) => {
    const body = c.req.valid("json");
    const outcome = await createForm(c.var.ctx.db, c.get("auth").account.id, newFormSettings(body));
    if (outcome.kind === "invalid") throw validationError(outcome.errors);
    return c.json(serializeForm(outcome.form, config(c.env).siteUrl, tagOf(c.var.ctx.db)), 201);
  })
  .openapi(listRoute, async (c) => {
    const { cursor, limit } = c.req.valid("query");
    const siteUrl = config(c.env).siteUrl;
    return c.json(
      pageOf(await listForms(c.var.ctx.db, c.get("auth").account.id, { cursor, limit }), limit, (row) =>
        serializeForm(row, siteUrl, tagOf(c.var.ctx.db)),
      ),
      200,
    );
  })
  .openapi(getRoute, async (c) => {
    const form = await findForm(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!form) throw notFound("Form");
    return c.json(serializeForm(form, config(c.env).siteUrl, tagOf(c.var.ctx.db)), 200);
  })
  .openapi(updateRoute, async (c) => {
    const outcome = await updateForm(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id, changedSettings(c.req.valid("json")));
    if (outcome.kind === "not_found") throw notFound("Form");
    if (outcome.kind === "invalid") throw validationError(outcome.errors);
    return c.json(serializeForm(outcome.form, config(c.env).siteUrl, tagOf(c.var.ctx.db)), 200);
  })
  .openapi(deleteRoute, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await deleteForm(c.var.ctx.db, c.get("auth").account.id, id))) throw notFound("Form");
    return c.json({ id, deleted: true as const }, 200);
  });
