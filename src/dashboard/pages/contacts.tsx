import { Hono } from "hono";
import { config } from "../../config";
import { deleteListOrThrow, patchContactOrThrow } from "../../http/contacts";
import { contactChangeInput, contactImportForm, listChangeInput, listInput } from "../../domain/contacts/input";
import { contactStatuses, deleteContact, findContact, listContacts, type ContactFilters } from "../../domain/contacts/contacts";
import { contactAddress } from "../../domain/contacts/email";
import { createContactImport, findContactImport, type ContactImport } from "../../domain/contacts/import";
import { addMembersById, createList, listExists, listLists, removeMember, updateList } from "../../domain/contacts/lists";
import { listMessages, recipientsOfMessages } from "../../domain/sending/messages";
import { AppError, notFound, validationError } from "../../errors";
import { orRefuse } from "../../http/refusals";
import { allTopics, setTopicChoices, topicSubscriptionsOf } from "../../domain/topics/topics";

import { field, liveKeyOnly, parsedOrThrow } from "../guard";
import { AnyOf } from "../components/any-of";
import { NameForm } from "../components/name-form";
import { PostButton } from "../components/post-button";
import { Table } from "../components/table";
import { Csrf, Empty, Notice, Pager, Progress, Shell, StatusBadge, formatTime, pageOfRows } from "../layout";
import type { DashboardEnv } from "../session";
import { ContactsNav } from "./topics";

const pageSize = 25;
const maxImportBytes = 5 * 1024 * 1024;

const importFinished = (row: ContactImport) => row.status === "completed" || row.status === "failed";

function ImportProgress({ contactImport }: { contactImport: ContactImport & { errors: { row: number; message: string }[] } }) {
  const done = importFinished(contactImport);
  return (
    <div
      id="import-progress"
      hx-get={done ? undefined : `/dashboard/contacts/imports/${contactImport.id}/progress`}
      hx-trigger={done ? undefined : "every 1s"}
      hx-swap="outerHTML"
      aria-live="polite"
    >
      <Progress label="Contact import" done={contactImport.processed} total={contactImport.total} />
      <p>
        <StatusBadge status={contactImport.status} /> {contactImport.created} created, {contactImport.updated} updated, {contactImport.failed} failed
      </p>
      {contactImport.error ? <Notice kind="error">{contactImport.error}</Notice> : null}
      {contactImport.errors.length > 0 ? (
        <ul>
          {contactImport.errors.map((error) => (
            <li>
              Row {error.row}: {error.message}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

export const contactPages = new Hono<DashboardEnv>()
  .get("/contacts", async (c) => {
    const auth = c.get("auth");
    const query = c.req.query();
    const { verifyFreshDays } = config(c.env);
    let emailKey: string | undefined;
    let searchError: string | undefined;
    if (query.email?.trim()) {
      const address = contactAddress(query.email.trim());
      if ("error" in address) searchError = address.error;
      else emailKey = address.key;
    }
    const lists = await listLists(c.env.DB, auth.account.id, { limit: 100 });
    const search = query.search?.trim().slice(0, 320) || undefined;
    const filters: ContactFilters = {
      emailKey,
      search,
      status: contactStatuses.find((status) => status === query.status),
      listId: lists.some((list) => list.id === query.list) ? query.list : undefined,
    };
    const outcome = searchError
      ? { kind: "page" as const, rows: [] }
      : await listContacts(c.env.DB, auth.account.id, filters, { cursor: query.cursor || undefined, limit: pageSize });
    const rows = outcome.kind === "page" ? outcome.rows : [];
    const { page, next } = pageOfRows(rows, pageSize);
    const listNames = new Map(lists.map((list) => [list.id, list.name]));
    return c.html(
      <Shell title="Contacts & lists" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/contacts">
        <ContactsNav current="contacts" />
        <section class="card">
          <form method="get" action="/dashboard/contacts" class="filters" aria-label="Search">
            <label>
              Address or name contains
              <input name="search" type="search" value={query.search ?? ""} maxlength={320} placeholder="ann, @example.com, Smith" />
            </label>
            {query.email ? <input type="hidden" name="email" value={query.email} /> : null}
            <AnyOf label="Status" name="status" options={contactStatuses.map((status) => [status, status])} selected={query.status} />
            <AnyOf label="List" name="list" options={lists.map((list) => [list.id, list.name])} selected={query.list} />
            <button type="submit">Search</button>
          </form>
          {searchError ? <Notice kind="error">{searchError}</Notice> : null}
        </section>
        <section class="card">
          <h2>Contacts</h2>
          <Table
            head={["Email", "Name", "Status", "Lists", "Added"]}
            rows={page}
            empty={
              emailKey || search || filters.status || filters.listId
                ? "No contacts match."
                : "No contacts yet. Import a CSV below or add them with the API."
            }
            row={(contact) => (
              <tr>
                <td class="wrap">
                  <a href={`/dashboard/contacts/${contact.id}`}>{contact.email}</a>
                </td>
                <td>{[contact.firstName, contact.lastName].filter(Boolean).join(" ") || "—"}</td>
                <td>
                  <StatusBadge status={contact.status} />
                </td>
                <td>{contact.lists.map((id) => listNames.get(id) ?? id).join(", ") || "—"}</td>
                <td>{formatTime(contact.createdAt)}</td>
              </tr>
            )}
          />
          <Pager next={next} path="/dashboard/contacts" query={query} />
        </section>
        <div class="grid two">
          <section class="card">
            <h2>Lists</h2>
            <Table
              head={["List", "Subscribed", "Contacts", "Rename or delete"]}
              rows={lists}
              empty="No lists yet."
              row={(list) => (
                <tr>
                  <td class="wrap">
                    <a href={`/dashboard/contacts?list=${encodeURIComponent(list.id)}`}>{list.name}</a>
                  </td>
                  <td>{list.subscriberCount}</td>
                  <td>{list.contactCount}</td>
                  <td class="list-actions">
                    <form method="post" action={`/dashboard/contacts/lists/${list.id}`} class="inline">
                      <Csrf token={c.get("csrfToken")} />
                      <input name="name" type="text" required maxlength={200} value={list.name} aria-label={`New name for ${list.name}`} />
                      <button type="submit" class="secondary">
                        Rename
                      </button>
                    </form>
                    <PostButton
                      action={`/dashboard/contacts/lists/${list.id}/delete`}
                      csrfToken={c.get("csrfToken")}
                      tone="link danger"
                      label={`Delete the list ${list.name}`}
                      layout="inline-button"
                    >
                      Delete
                    </PostButton>
                  </td>
                </tr>
              )}
            />
            <NameForm action="/dashboard/contacts/lists" csrfToken={c.get("csrfToken")} label="New list" maxlength={200} submit="Create list" />
            <p class="hint">
              <a href="/dashboard/contacts/forms">Sign-up forms</a> add people to lists from your website, with double opt-in.
            </p>
          </section>
          <section class="card">
            <h2>Import a CSV</h2>
            <form method="post" action="/dashboard/contacts/imports" enctype="multipart/form-data" class="stack">
              <Csrf token={c.get("csrfToken")} />
              <label for="import-file">
                CSV with a header row: email, first_name, last_name, company, phone, country, other columns become custom fields
              </label>
              <input id="import-file" name="file" type="file" accept=".csv,text/csv" required />
              <label for="import-list">Add to list</label>
              <select id="import-list" name="list_id">
                <option value="">none</option>
                {lists.map((list) => (
                  <option value={list.id}>{list.name}</option>
                ))}
              </select>
              <label class="check">
                <input type="checkbox" name="verify" value="true" /> Verify the addresses (one verification credit each; results checked in the last{" "}
                {verifyFreshDays} days are reused free)
              </label>
              <button type="submit">Import</button>
            </form>
          </section>
        </div>
      </Shell>,
    );
  })
  .post("/contacts/lists", liveKeyOnly("Creating a list"), async (c) => {
    const body = parsedOrThrow(listInput, { name: field(await c.req.parseBody(), "name") }, "The list cannot be created");
    await createList(c.env.DB, c.get("auth").account.id, { name: body.name, description: null });
    return c.redirect("/dashboard/contacts", 303);
  })
  .post("/contacts/lists/:id", liveKeyOnly("Changing a list"), async (c) => {
    const body = parsedOrThrow(listChangeInput, { name: field(await c.req.parseBody(), "name") }, "The list cannot be renamed");
    if (!(await updateList(c.env.DB, c.get("auth").account.id, c.req.param("id"), { name: body.name }))) throw notFound("List");
    return c.redirect("/dashboard/contacts", 303);
  })
  .post("/contacts/lists/:id/delete", liveKeyOnly("Deleting a list"), async (c) => {
    await deleteListOrThrow(c.env.DB, c.get("auth").account.id, c.req.param("id"));
    return c.redirect("/dashboard/contacts", 303);
  })
  .post("/contacts/imports", liveKeyOnly("Importing contacts"), async (c) => {
    const form = await c.req.parseBody();
    const {
      file,
      list_id: listId,
      verify,
    } = parsedOrThrow(
      contactImportForm,
      { file: form.file, list_id: field(form, "list_id") || undefined, verify: field(form, "verify") || undefined },
      "The file cannot be imported",
    );
    // A file input left empty still posts a part, with no bytes.
    if (file.size === 0) throw validationError({ file: ["Choose a CSV file to import"] });
    if (file.size > maxImportBytes) throw new AppError("payload_too_large", "The file is larger than 5 MB");
    const outcome = await createContactImport(c.env, c.get("auth").account, {
      bytes: new Uint8Array(await file.arrayBuffer()),
      listId,
      verify: verify === "true",
    });
    if (outcome.kind === "invalid") throw validationError(outcome.errors, outcome.message);
    if (outcome.kind === "insufficient_credits") {
      throw new AppError(
        "insufficient_credits",
        `Verifying this file needs up to ${outcome.needed} verification credits (one a row); ${outcome.available} available. Import without verifying, or add credits`,
      );
    }
    if (outcome.kind === "queue_unavailable") throw new AppError("upstream_unavailable", "The import could not be queued; try again shortly");
    return c.redirect(`/dashboard/contacts/imports/${outcome.contactImport.id}`, 303);
  })
  .get("/contacts/imports/:id", async (c) => {
    const auth = c.get("auth");
    const contactImport = await findContactImport(c.env.DB, auth.account.id, c.req.param("id"));
    if (!contactImport) throw notFound("Import");
    return c.html(
      <Shell title="Contact import" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/contacts">
        <section class="card">
          <ImportProgress contactImport={contactImport} />
        </section>
        <a href="/dashboard/contacts">← Contacts</a>
      </Shell>,
    );
  })
  .get("/contacts/imports/:id/progress", async (c) => {
    const contactImport = await findContactImport(c.env.DB, c.get("auth").account.id, c.req.param("id"));
    if (!contactImport) throw notFound("Import");
    return c.html(<ImportProgress contactImport={contactImport} />);
  })
  .get("/contacts/:id", async (c) => {
    const auth = c.get("auth");
    const contact = await findContact(c.env.DB, auth.account.id, c.req.param("id"));
    if (!contact) throw notFound("Contact");
    const [lists, history, topics, subscriptions] = await Promise.all([
      listLists(c.env.DB, auth.account.id, { limit: 100 }),
      listMessages(c.env.DB, auth.account.id, { to: contact.email }, { limit: 20 }),
      allTopics(c.env.DB, auth.account.id),
      topicSubscriptionsOf(c.env.DB, auth.account.id, [contact.id]),
    ]);
    const subscribed = subscriptions.get(contact.id) ?? {};
    const recipients = await recipientsOfMessages(
      c.env.DB,
      auth.account.id,
      history.slice(0, 20).map((message) => message.id),
    );
    const outcomes = history.slice(0, 20).map((message) => ({
      message,
      recipient: (recipients.get(message.id) ?? []).find((row) => row.email.toLowerCase() === contact.email.toLowerCase()),
    }));
    const opened = outcomes.filter(({ recipient }) => recipient?.opens).length;
    const clicked = outcomes.filter(({ recipient }) => recipient?.clicks).length;
    const names = new Map(lists.map((list) => [list.id, list.name]));
    const csrfToken = c.get("csrfToken");
    const text = (name: "firstName" | "lastName" | "company" | "phone" | "country") => contact[name] ?? "";
    return c.html(
      <Shell title={contact.email} auth={auth} csrfToken={csrfToken} current="/dashboard/contacts">
        {c.req.query("saved") ? <Notice kind="ok">Contact saved.</Notice> : null}
        <div class="grid two">
          <section class="card">
            <h2>Details</h2>
            <p>
              <StatusBadge status={contact.status} /> Added {formatTime(contact.createdAt)}
            </p>
            <form method="post" action={`/dashboard/contacts/${contact.id}`} class="stack">
              <Csrf token={csrfToken} />
              {(
                [
                  ["first_name", "First name", "firstName"],
                  ["last_name", "Last name", "lastName"],
                  ["company", "Company", "company"],
                  ["phone", "Phone", "phone"],
                  ["country", "Country", "country"],
                ] as const
              ).map(([name, label, key]) => (
                <>
                  <label for={`contact-${name}`}>{label}</label>
                  <input id={`contact-${name}`} name={name} type="text" maxlength={256} value={text(key)} />
                </>
              ))}
              <label for="contact-status">Status</label>
              <select id="contact-status" name="status">
                {contact.status === "subscribed" || contact.status === "unsubscribed" ? null : (
                  <option value="" selected>
                    {contact.status} (set by the mail system)
                  </option>
                )}
                <option value="subscribed" selected={contact.status === "subscribed"}>
                  subscribed
                </option>
                <option value="unsubscribed" selected={contact.status === "unsubscribed"}>
                  unsubscribed
                </option>
              </select>
              <button type="submit">Save contact</button>
            </form>
            <h3>Custom fields</h3>
            {Object.keys(contact.customFields).length === 0 ? (
              <Empty>None. Import a CSV with more columns, or set custom_fields with the API.</Empty>
            ) : (
              <dl class="facts">
                {Object.entries(contact.customFields).map(([key, value]) => (
                  <>
                    <dt>{key}</dt>
                    <dd class="wrap">{String(value)}</dd>
                  </>
                ))}
              </dl>
            )}
            <h3>Consent</h3>
            {contact.consentedAt ? (
              <dl class="facts" data-testid="consent">
                <dt>Confirmed</dt>
                <dd>{formatTime(contact.consentedAt)}</dd>
                <dt>From IP</dt>
                <dd>{contact.consentIp ?? "—"}</dd>
                <dt>Sign-up form</dt>
                <dd>{contact.consentFormId ?? "—"}</dd>
              </dl>
            ) : (
              <Empty>No consent record: the contact was added by the API, an import or by hand, not by a sign-up form.</Empty>
            )}
            <h3>Verification</h3>
            {contact.verificationResult && contact.verifiedAt ? (
              <dl class="facts" data-testid="verification">
                <dt>Result</dt>
                <dd>
                  {contact.verificationResult} ({contact.verificationStatus}
                  {contact.verificationSubStatus ? `, ${contact.verificationSubStatus}` : ""})
                </dd>
                <dt>Checked</dt>
                <dd>{formatTime(contact.verifiedAt)}</dd>
              </dl>
            ) : (
              <Empty>Not verified yet: a campaign with verification on, POST /contacts/verify or any check of this address fills it in.</Empty>
            )}
            <PostButton action={`/dashboard/contacts/${contact.id}/delete`} csrfToken={csrfToken} tone="danger" layout="inline">
              Delete contact
            </PostButton>
          </section>
          <section class="card">
            <h2>Lists</h2>
            {contact.lists.length === 0 ? (
              <Empty>In no list yet.</Empty>
            ) : (
              <ul class="plain">
                {contact.lists.map((listId) => (
                  <li>
                    {names.get(listId) ?? listId}{" "}
                    <PostButton
                      action={`/dashboard/contacts/${contact.id}/lists/${listId}/remove`}
                      csrfToken={csrfToken}
                      tone="link"
                      layout="inline-button"
                    >
                      Remove
                    </PostButton>
                  </li>
                ))}
              </ul>
            )}
            <form method="post" action={`/dashboard/contacts/${contact.id}/lists`} class="inline">
              <Csrf token={csrfToken} />
              <label>
                Add to list
                <select name="list_id" required>
                  {lists
                    .filter((list) => !contact.lists.includes(list.id))
                    .map((list) => (
                      <option value={list.id}>{list.name}</option>
                    ))}
                </select>
              </label>
              <button type="submit" class="secondary">
                Add
              </button>
            </form>
            <h2>Subscriptions</h2>
            {topics.length === 0 ? (
              <Empty>
                No topics yet: <a href="/dashboard/contacts/topics">add topics</a> to let contacts choose what marketing they get.
              </Empty>
            ) : (
              <form method="post" action={`/dashboard/contacts/${contact.id}/topics`} class="stack" data-testid="subscriptions">
                <Csrf token={csrfToken} />
                {topics.map((topic) => (
                  <label class="check">
                    <input type="hidden" name="offered" value={topic.id} />
                    <input type="checkbox" name="topic" value={topic.id} checked={subscribed[topic.id] ?? topic.defaultSubscribed} /> {topic.name}
                  </label>
                ))}
                <button type="submit" class="secondary">
                  Save subscriptions
                </button>
              </form>
            )}
            <h2>Messages</h2>
            {outcomes.length > 0 ? (
              <p class="hint">
                Of the last {outcomes.length}: opened {opened}, clicked {clicked}.
              </p>
            ) : null}
            <Table
              head={["Subject", "Outcome", "Sent"]}
              rows={outcomes}
              empty="No mail sent to this contact yet."
              row={({ message, recipient }) => (
                <tr>
                  <td class="wrap">
                    <a href={`/dashboard/messages/${message.id}`}>{message.subject || "(no subject)"}</a>
                  </td>
                  <td>
                    <StatusBadge status={recipient?.status ?? message.status} />
                    {recipient?.opens ? " opened" : ""}
                    {recipient?.clicks ? " clicked" : ""}
                  </td>
                  <td>{formatTime(message.createdAt)}</td>
                </tr>
              )}
            />
          </section>
        </div>
        <a href="/dashboard/contacts">← Contacts</a>
      </Shell>,
    );
  })
  .post("/contacts/:id", liveKeyOnly("Changing a contact"), async (c) => {
    const accountId = c.get("auth").account.id;
    const saved = await findContact(c.env.DB, accountId, c.req.param("id"));
    if (!saved) throw notFound("Contact");
    const form = await c.req.parseBody();
    const keys = { first_name: "firstName", last_name: "lastName", company: "company", phone: "phone", country: "country" } as const;
    // Only what changed, as a PATCH: an empty field clears it.
    const body: Record<string, unknown> = {};
    for (const [name, key] of Object.entries(keys)) {
      const value = form[name];
      if (typeof value !== "string") continue;
      const given = value.trim() === "" ? null : value;
      if (given !== saved[key]) body[name] = given;
    }
    const status = form.status;
    if ((status === "subscribed" || status === "unsubscribed") && status !== saved.status) body.status = status;
    if (Object.keys(body).length > 0)
      await patchContactOrThrow(c.env.DB, accountId, saved.id, parsedOrThrow(contactChangeInput, body, "The contact cannot be saved"));
    return c.redirect(`/dashboard/contacts/${saved.id}?saved=1`, 303);
  })
  .post("/contacts/:id/topics", liveKeyOnly("Changing a contact"), async (c) => {
    const accountId = c.get("auth").account.id;
    const contact = await findContact(c.env.DB, accountId, c.req.param("id"));
    if (!contact) throw notFound("Contact");
    const form = await c.req.parseBody({ all: true });
    const values = (name: string) => ([] as unknown[]).concat(form[name] ?? []).filter((value): value is string => typeof value === "string");
    const ticked = new Set(values("topic"));
    orRefuse(await setTopicChoices(c.env.DB, accountId, contact.id, Object.fromEntries(values("offered").map((id) => [id, ticked.has(id)]))));
    return c.redirect(`/dashboard/contacts/${contact.id}?saved=1`, 303);
  })
  .post("/contacts/:id/delete", liveKeyOnly("Deleting a contact"), async (c) => {
    if (!(await deleteContact(c.env.DB, c.get("auth").account.id, c.req.param("id")))) throw notFound("Contact");
    return c.redirect("/dashboard/contacts", 303);
  })
  .post("/contacts/:id/lists", liveKeyOnly("Adding contacts to a list"), async (c) => {
    const accountId = c.get("auth").account.id;
    const listId = field(await c.req.parseBody(), "list_id");
    if (!(await listExists(c.env.DB, accountId, listId))) throw notFound("List");
    const added = await addMembersById(c.env.DB, accountId, listId, [c.req.param("id")]);
    if (added.unknown.length > 0) throw notFound("Contact");
    return c.redirect(`/dashboard/contacts/${c.req.param("id")}`, 303);
  })
  .post("/contacts/:id/lists/:listId/remove", liveKeyOnly("Removing a contact from a list"), async (c) => {
    if (!(await removeMember(c.env.DB, c.get("auth").account.id, c.req.param("listId"), c.req.param("id")))) throw notFound("List member");
    return c.redirect(`/dashboard/contacts/${c.req.param("id")}`, 303);
  });
