// Templates: list, create, edit and delete, with a preview filled in for a chosen contact. Forms are parsed with the
// API's request schemas and saved through the same domain functions as /api/v1/templates.
import type { AccountDb } from "../../db/client";
import { Hono, type Context } from "hono";
import { templateChangeInput, templateInput } from "../../domain/templates/input";
import { contactVariables } from "../../domain/contacts/contacts";
import { findContact, listContacts, type ContactRow } from "../../domain/contacts/contacts";
import { escapeHtml, renderTemplate } from "../../domain/sending/render";
import { createTemplate, deleteTemplate, findTemplate, listTemplates, updateTemplate, type TemplateRow } from "../../domain/templates/templates";
import { notFound, validationError } from "../../errors";
import { liveKeyOnly, parsedOrThrow } from "../guard";
import { PostButton } from "../components/post-button";
import { Table } from "../components/table";
import { Csrf, Shell, formatTime, framedMailCsp } from "../layout";
import type { DashboardEnv } from "../session";

type Page = Context<DashboardEnv>;
type Form = Record<string, string | File>;

/** The template's fields the form has, as the API names them; on an edit only those that changed. */
function templateBody(form: Form, saved?: TemplateRow): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const name of ["name", "subject", "html", "text"] as const) {
    const value = form[name];
    if (typeof value !== "string") continue;
    const given = (name === "html" || name === "text") && value.trim() === "" ? null : value;
    const normal = (text: string | null) => (text ?? "").replace(/\r\n?/g, "\n").replace(/^\n/, "");
    if (saved && normal(given) === normal(saved[name])) continue;
    body[name] = given;
  }
  return body;
}

function TemplateForm({ template, csrfToken }: { template?: TemplateRow; csrfToken: string }) {
  return (
    <form method="post" action={template ? `/dashboard/templates/${template.id}` : "/dashboard/templates"} class="stack">
      <Csrf token={csrfToken} />
      <label for="tpl-name">Name</label>
      <input id="tpl-name" name="name" type="text" required maxlength={200} value={template?.name ?? ""} />
      <label for="tpl-subject">Subject</label>
      <input
        id="tpl-subject"
        name="subject"
        type="text"
        required
        maxlength={998}
        value={template?.subject ?? ""}
        placeholder="Welcome, {{first_name|there}}"
      />
      <label for="tpl-html">
        HTML ({"{{first_name}}"}, {"{{custom_fields.plan}}"} and other contact fields; {"{{name|fallback}}"} for a default)
      </label>
      <textarea id="tpl-html" name="html">
        {template?.html ?? ""}
      </textarea>
      <label for="tpl-text">Text</label>
      <textarea id="tpl-text" name="text">
        {template?.text ?? ""}
      </textarea>
      <button type="submit">{template ? "Save template" : "Create template"}</button>
    </form>
  );
}

async function ownedTemplate(c: Page): Promise<TemplateRow> {
  const template = await findTemplate(c.var.ctx.db, c.get("auth").account.id, c.req.param("id") ?? "");
  if (!template) throw notFound("Template");
  return template;
}

/** Up to 50 contacts to choose the preview's from, and the chosen one (or the newest). */
async function previewChoices(db: AccountDb, accountId: string, chosen: string | undefined) {
  const page = await listContacts(db, accountId, {}, { limit: 50 });
  const contacts = page.kind === "page" ? page.rows.slice(0, 50) : [];
  const contact: ContactRow | undefined = (chosen ? await findContact(db, accountId, chosen) : undefined) ?? contacts[0];
  return { contacts, contact };
}

export const templatePages = new Hono<DashboardEnv>()
  .get("/templates", async (c) => {
    const auth = c.get("auth");
    const rows = (await listTemplates(c.var.ctx.db, auth.account.id, { limit: 100 })).slice(0, 100);
    return c.html(
      <Shell title="Templates" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/templates">
        <section class="card">
          <h2>Templates</h2>
          <Table
            head={["Name", "Subject", "Updated"]}
            rows={rows}
            empty="No templates yet. Create one below, then choose it in a campaign or an automation's email step."
            row={(template) => (
              <tr>
                <td class="wrap">
                  <a href={`/dashboard/templates/${template.id}`}>{template.name}</a>
                </td>
                <td class="wrap">{template.subject}</td>
                <td>{formatTime(template.updatedAt)}</td>
              </tr>
            )}
          />
        </section>
        <section class="card">
          <h2>New template</h2>
          <TemplateForm csrfToken={c.get("csrfToken")} />
        </section>
      </Shell>,
    );
  })
  .post("/templates", async (c) => {
    const body = parsedOrThrow(templateInput, templateBody((await c.req.parseBody()) as Form), "The template cannot be saved");
    const template = await createTemplate(c.var.ctx.db, c.get("auth").account.id, {
      name: body.name,
      subject: body.subject,
      html: body.html ?? null,
      text: body.text ?? null,
    });
    return c.redirect(`/dashboard/templates/${template.id}`, 303);
  })
  .get("/templates/:id", async (c) => {
    const auth = c.get("auth");
    const template = await ownedTemplate(c);
    const { contacts, contact } = await previewChoices(c.var.ctx.db, auth.account.id, c.req.query("contact"));
    const csrfToken = c.get("csrfToken");
    return c.html(
      <Shell title={template.name} auth={auth} csrfToken={csrfToken} current="/dashboard/templates">
        <div class="grid two">
          <section class="card">
            <h2>Edit</h2>
            <TemplateForm template={template} csrfToken={csrfToken} />
            <PostButton action={`/dashboard/templates/${template.id}/delete`} csrfToken={csrfToken} tone="danger" layout="inline">
              Delete template
            </PostButton>
          </section>
          <section class="card">
            <h2>Preview</h2>
            {contacts.length === 0 ? (
              <p class="hint">Add contacts to see the template filled in for one of them; placeholders without a value use their fallback.</p>
            ) : (
              <form method="get" action={`/dashboard/templates/${template.id}`} class="inline">
                <label>
                  For contact
                  <select name="contact">
                    {contacts.map((row) => (
                      <option value={row.id} selected={row.id === contact?.id}>
                        {row.email}
                      </option>
                    ))}
                  </select>
                </label>
                <button type="submit" class="secondary">
                  Show
                </button>
              </form>
            )}
            <iframe
              class="preview"
              title="Template preview"
              sandbox=""
              src={`/dashboard/templates/${template.id}/preview${contact ? `?contact=${contact.id}` : ""}`}
            />
          </section>
        </div>
        <a href="/dashboard/templates">← Templates</a>
      </Shell>,
    );
  })
  .get("/templates/:id/preview", async (c) => {
    const template = await ownedTemplate(c);
    const contact = c.req.query("contact") ? await findContact(c.var.ctx.db, template.accountId, c.req.query("contact") ?? "") : undefined;
    // Rendered as a send renders it: placeholders from the contact, HTML-escaped; shown in a sandboxed frame.
    const variables = contact ? contactVariables(contact) : {};
    const subject = renderTemplate(template.subject, variables, { html: false });
    const body =
      template.html !== null
        ? renderTemplate(template.html, variables, { html: true })
        : `<pre>${escapeHtml(renderTemplate(template.text ?? "", variables, { html: false }))}</pre>`;
    c.header("Content-Security-Policy", framedMailCsp({ remoteImages: true }));
    c.header("X-Frame-Options", "SAMEORIGIN");
    return c.body(`<p style="font:14px sans-serif;color:#374151"><b>Subject:</b> ${escapeHtml(subject)}</p><hr>${body}`, 200, {
      "Content-Type": "text/html; charset=utf-8",
    });
  })
  .post("/templates/:id", liveKeyOnly("Changing a template"), async (c) => {
    const saved = await ownedTemplate(c);
    const change = templateBody((await c.req.parseBody()) as Form, saved);
    if (Object.keys(change).length === 0) return c.redirect(`/dashboard/templates/${saved.id}`, 303);
    const body = parsedOrThrow(templateChangeInput, change, "The template cannot be saved");
    const outcome = await updateTemplate(c.var.ctx.db, saved.accountId, saved.id, body);
    if (outcome.kind === "not_found") throw notFound("Template");
    if (outcome.kind === "no_content") throw validationError({ html: ["A template needs html, text or both"] });
    return c.redirect(`/dashboard/templates/${saved.id}`, 303);
  })
  .post("/templates/:id/delete", liveKeyOnly("Deleting a template"), async (c) => {
    if (!(await deleteTemplate(c.var.ctx.db, c.get("auth").account.id, c.req.param("id")))) throw notFound("Template");
    return c.redirect("/dashboard/templates", 303);
  });
