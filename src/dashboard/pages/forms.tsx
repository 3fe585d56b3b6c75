// Sign-up forms, beside contacts: the account's forms, one to create (parsed with POST /forms's own schema and saved
// through the same domain function), its HTML snippet to paste into a site, and delete.
import { Hono, type Context } from "hono";
import { config } from "../../config";
import { listSenders } from "../../domain/campaigns/senders";
import { contactTextFields } from "../../domain/contacts/contacts";
import { listLists } from "../../domain/contacts/lists";
import { createForm, deleteForm, findForm, htmlSnippet, listForms, newFormSettings, subscribeUrl, type FormRow } from "../../domain/forms/forms";
import { formInput } from "../../domain/forms/input";
import { allTopics } from "../../domain/topics/topics";
import { notFound, validationError } from "../../errors";
import { field, liveKeyOnly, parsedOrThrow } from "../guard";
import { PostButton } from "../components/post-button";
import { Table } from "../components/table";
import { Copyable, Csrf, Notice, Shell, formatTime } from "../layout";
import type { DashboardEnv } from "../session";
import { ContactsNav } from "./topics";
import { tagOf } from "../../db/hints";

const basePath = "/dashboard/contacts/forms";

/** The values of a field a form may send several times (checkboxes). */
const all = (value: unknown): string[] => ([] as unknown[]).concat(value ?? []).filter((item): item is string => typeof item === "string");

function Checkboxes({ name, legend, options, empty }: { name: string; legend: string; options: { id: string; label: string }[]; empty: string }) {
  return (
    <fieldset>
      <legend>{legend}</legend>
      {options.length === 0 ? <span class="hint">{empty}</span> : null}
      {options.map((option) => (
        <label class="check">
          <input type="checkbox" name={name} value={option.id} /> {option.label}
        </label>
      ))}
    </fieldset>
  );
}

async function ownedForm(c: Context<DashboardEnv>): Promise<FormRow> {
  const form = await findForm(c.var.ctx.db, c.get("auth").account.id, c.req.param("id") ?? "");
  if (!form) throw notFound("Form");
  return form;
}

export const formPages = new Hono<DashboardEnv>()
  .get("/contacts/forms", async (c) => {
    const auth = c.get("auth");
    const accountId = auth.account.id;
    const [rows, lists, topics, senders] = await Promise.all([
      listForms(c.var.ctx.db, accountId, { limit: 100 }),
      listLists(c.var.ctx.db, accountId, { limit: 100 }),
      allTopics(c.var.ctx.db, accountId),
      listSenders(c.var.ctx.db, accountId, { limit: 100 }),
    ]);
    const csrfToken = c.get("csrfToken");
    return c.html(
      <Shell title="Sign-up forms" auth={auth} csrfToken={csrfToken} current="/dashboard/contacts">
        <ContactsNav current="forms" />
        {c.req.query("deleted") ? <Notice kind="ok">Form deleted.</Notice> : null}
        <section class="card">
          <h2>Forms</h2>
          <Table
            head={["Name", "Confirmation", "Lists", "Created", "Delete"]}
            rows={rows.slice(0, 100)}
            empty="No forms yet. Create one below and paste its HTML into your site."
            row={(form) => (
              <tr>
                <td class="wrap">
                  <a href={`${basePath}/${form.id}`}>{form.name}</a>
                </td>
                <td>{form.doubleOptIn ? "double opt-in" : "none"}</td>
                <td>{form.lists.map((id) => lists.find((list) => list.id === id)?.name ?? id).join(", ") || "—"}</td>
                <td>{formatTime(form.createdAt)}</td>
                <td>
                  <PostButton
                    action={`${basePath}/${form.id}/delete`}
                    csrfToken={csrfToken}
                    tone="link danger"
                    label={`Delete the form ${form.name}`}
                    layout="inline-button"
                  >
                    Delete
                  </PostButton>
                </td>
              </tr>
            )}
          />
        </section>
        <section class="card">
          <h2>New form</h2>
          <form method="post" action={basePath} class="stack">
            <Csrf token={csrfToken} />
            <label for="form-name">Name</label>
            <input id="form-name" name="name" type="text" required maxlength={100} />
            <Checkboxes
              name="lists"
              legend="Lists a sign-up joins"
              options={lists.map((list) => ({ id: list.id, label: list.name }))}
              empty="No lists yet."
            />
            <Checkboxes
              name="topics"
              legend="Topics a sign-up is subscribed to"
              options={topics.map((topic) => ({ id: topic.id, label: topic.name }))}
              empty="No topics yet."
            />
            <Checkboxes
              name="fields"
              legend="Fields besides the email address"
              options={contactTextFields.map((name) => ({ id: name, label: name.replace("_", " ") }))}
              empty=""
            />
            <label class="check">
              <input type="checkbox" name="double_opt_in" value="1" checked /> Double opt-in: a sign-up confirms by a link mailed to it before it is
              subscribed
            </label>
            <label for="form-sender">Confirmation email from</label>
            <select id="form-sender" name="sender_id">
              <option value="">no sender</option>
              {senders.slice(0, 100).map((sender) => (
                <option value={sender.id}>{`${sender.name} <${sender.email}>`}</option>
              ))}
            </select>
            <label for="form-redirect">After a sign-up, send the browser to (optional)</label>
            <input id="form-redirect" name="redirect_url" type="url" maxlength={2000} placeholder="https://example.com/thanks" />
            <button type="submit">Create form</button>
          </form>
        </section>
      </Shell>,
    );
  })
  .post("/contacts/forms", liveKeyOnly("Creating a form"), async (c) => {
    const form = await c.req.parseBody({ all: true });
    const body = parsedOrThrow(
      formInput,
      {
        name: field(form, "name"),
        lists: all(form.lists),
        topics: all(form.topics),
        fields: all(form.fields),
        double_opt_in: field(form, "double_opt_in") === "1",
        sender_id: field(form, "sender_id") || null,
        redirect_url: field(form, "redirect_url") || null,
      },
      "The form cannot be created",
    );
    const outcome = await createForm(c.var.ctx.db, c.get("auth").account.id, newFormSettings(body));
    if (outcome.kind === "invalid") throw validationError(outcome.errors, "The form cannot be created");
    return c.redirect(`${basePath}/${outcome.form.id}`, 303);
  })
  .get("/contacts/forms/:id", async (c) => {
    const auth = c.get("auth");
    const form = await ownedForm(c);
    const siteUrl = config(c.env).siteUrl;
    const snippet = htmlSnippet(siteUrl, form, tagOf(c.var.ctx.db));
    return c.html(
      <Shell title={form.name} auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/contacts">
        <section class="card">
          <h2>Paste this into your site</h2>
          <p>
            It posts to <Copyable value={subscribeUrl(siteUrl, form.id, tagOf(c.var.ctx.db))} label="the form's address" />, needs no key and no
            script, and sends the browser on to {form.redirectUrl ? <code>{form.redirectUrl}</code> : "a thank-you page"}.
          </p>
          <pre class="snippet" data-testid="html-snippet">
            <code>{snippet}</code>
          </pre>
          <button type="button" class="copy" data-copy={snippet} aria-label="Copy the HTML">
            Copy
          </button>
        </section>
        <section class="card">
          <h2>Settings</h2>
          <p>
            {form.doubleOptIn
              ? "Double opt-in: a sign-up is pending until it follows the link mailed to it."
              : "No confirmation: a sign-up is subscribed at once."}{" "}
            Lists: {form.lists.length}, topics: {form.topics.length}, fields: {["email", ...form.fields].join(", ")}. Change them with PATCH
            /api/v1/forms/{form.id}.
          </p>
          <PostButton action={`${basePath}/${form.id}/delete`} csrfToken={c.get("csrfToken")} tone="danger" layout="inline">
            Delete form
          </PostButton>
        </section>
        <a href={basePath}>← Sign-up forms</a>
      </Shell>,
    );
  })
  .post("/contacts/forms/:id/delete", liveKeyOnly("Deleting a form"), async (c) => {
    if (!(await deleteForm(c.var.ctx.db, c.get("auth").account.id, c.req.param("id")))) throw notFound("Form");
    return c.redirect(`${basePath}?deleted=1`, 303);
  });
