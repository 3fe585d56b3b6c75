// The contact pages: search and filter the contacts, the lists and a CSV import beside them, an import's progress,
// and a contact's page (details, lists, topic subscriptions, the mail it was sent). Changes go through the domain
// functions /api/v1/contacts and /api/v1/lists call, their bodies parsed with the API's own schemas.

import { Hono } from "hono";
import { config } from "../../../config";
import { contactStatuses, deleteContact, findContact, listContacts, type ContactFilters } from "../../../domain/contacts/contacts";
import { contactAddress } from "../../../domain/contacts/email";
import { createContactImport, findContactImport } from "../../../domain/contacts/import-accept";
import { contactChangeInput, contactImportForm, listChangeInput, listInput } from "../../../domain/contacts/input";
import { addMembersById, createList, listExists, listLists, removeMember, updateList } from "../../../domain/contacts/lists";
import { listMessages, recipientsOfMessages } from "../../../domain/sending/messages";
import { allTopics, setTopicChoices, topicSubscriptionsOf } from "../../../domain/topics/topics";
import { AppError, notFound, validationError } from "../../../errors";
import { deleteListOrThrow, patchContactOrThrow } from "../../../http/contacts";
import { orRefuse } from "../../../http/refusals";
import { AnyOf } from "../../components/any-of";
import { Table } from "../../components/table";
import { field, liveKeyOnly, parsedOrThrow } from "../../guard";
import { Notice, Pager, Shell, StatusBadge, formatTime, pageOfRows } from "../../layout";
import type { DashboardEnv } from "../../session";
import { ContactsNav } from "../topics";
import { ContactDetails, ContactRelations, ImportCard, ImportProgress, ListsCard } from "./components";

const pageSize = 25;
const maxImportBytes = 5 * 1024 * 1024;

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
    const lists = await listLists(c.var.ctx.db, auth.account.id, { limit: 100 });
    const search = query.search?.trim().slice(0, 320) || undefined;
    const filters: ContactFilters = {
      emailKey,
      search,
      status: contactStatuses.find((status) => status === query.status),
      listId: lists.some((list) => list.id === query.list) ? query.list : undefined,
    };
    const outcome = searchError
      ? { kind: "page" as const, rows: [] }
      : await listContacts(c.var.ctx.db, auth.account.id, filters, { cursor: query.cursor || undefined, limit: pageSize });
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
          <ListsCard lists={lists} csrfToken={c.get("csrfToken")} />
          <ImportCard lists={lists} verifyFreshDays={verifyFreshDays} csrfToken={c.get("csrfToken")} />
        </div>
      </Shell>,
    );
  })
  .post("/contacts/lists", liveKeyOnly("Creating a list"), async (c) => {
    const body = parsedOrThrow(listInput, { name: field(await c.req.parseBody(), "name") }, "The list cannot be created");
    await createList(c.var.ctx.db, c.get("auth").account.id, { name: body.name, description: null });
    return c.redirect("/dashboard/contacts", 303);
  })
  .post("/contacts/lists/:id", liveKeyOnly("Changing a list"), async (c) => {
    const body = parsedOrThrow(listChangeInput, { name: field(await c.req.parseBody(), "name") }, "The list cannot be renamed");
    if (!(await updateList(c.var.ctx.db, c.get("auth").account.id, c.req.param("id"), { name: body.name }))) throw notFound("List");
    return c.redirect("/dashboard/contacts", 303);
  })
  .post("/contacts/lists/:id/delete", liveKeyOnly("Deleting a list"), async (c) => {
    await deleteListOrThrow(c.var.ctx.db, c.get("auth").account.id, c.req.param("id"));
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
    const outcome = await createContactImport(c.var.ctx, c.get("auth").account, {
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
    const contactImport = await findContactImport(c.var.ctx.db, auth.account.id, c.req.param("id"));
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
    const contactImport = await findContactImport(c.var.ctx.db, c.get("auth").account.id, c.req.param("id"));
    if (!contactImport) throw notFound("Import");
    return c.html(<ImportProgress contactImport={contactImport} />);
  })
  .get("/contacts/:id", async (c) => {
    const auth = c.get("auth");
    const contact = await findContact(c.var.ctx.db, auth.account.id, c.req.param("id"));
    if (!contact) throw notFound("Contact");
    const [lists, history, topics, subscriptions] = await Promise.all([
      listLists(c.var.ctx.db, auth.account.id, { limit: 100 }),
      listMessages(c.var.ctx.db, auth.account.id, { to: contact.email }, { limit: 20 }),
      allTopics(c.var.ctx.db, auth.account.id),
      topicSubscriptionsOf(c.var.ctx.db, auth.account.id, [contact.id]),
    ]);
    const subscribed = subscriptions.get(contact.id) ?? {};
    const recipients = await recipientsOfMessages(
      c.var.ctx.db,
      auth.account.id,
      history.slice(0, 20).map((message) => message.id),
    );
    const outcomes = history.slice(0, 20).map((message) => ({
      message,
      recipient: (recipients.get(message.id) ?? []).find((row) => row.email.toLowerCase() === contact.email.toLowerCase()),
    }));
    const csrfToken = c.get("csrfToken");
    return c.html(
      <Shell title={contact.email} auth={auth} csrfToken={csrfToken} current="/dashboard/contacts">
        {c.req.query("saved") ? <Notice kind="ok">Contact saved.</Notice> : null}
        <div class="grid two">
          <ContactDetails contact={contact} csrfToken={csrfToken} />
          <ContactRelations contact={contact} lists={lists} topics={topics} subscribed={subscribed} outcomes={outcomes} csrfToken={csrfToken} />
        </div>
        <a href="/dashboard/contacts">← Contacts</a>
      </Shell>,
    );
  })
  .post("/contacts/:id", liveKeyOnly("Changing a contact"), async (c) => {
    const accountId = c.get("auth").account.id;
    const saved = await findContact(c.var.ctx.db, accountId, c.req.param("id"));
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
      await patchContactOrThrow(c.var.ctx.db, accountId, saved.id, parsedOrThrow(contactChangeInput, body, "The contact cannot be saved"));
    return c.redirect(`/dashboard/contacts/${saved.id}?saved=1`, 303);
  })
  .post("/contacts/:id/topics", liveKeyOnly("Changing a contact"), async (c) => {
    const accountId = c.get("auth").account.id;
    const contact = await findContact(c.var.ctx.db, accountId, c.req.param("id"));
    if (!contact) throw notFound("Contact");
    const form = await c.req.parseBody({ all: true });
    const values = (name: string) => ([] as unknown[]).concat(form[name] ?? []).filter((value): value is string => typeof value === "string");
    const ticked = new Set(values("topic"));
    orRefuse(await setTopicChoices(c.var.ctx.db, accountId, contact.id, Object.fromEntries(values("offered").map((id) => [id, ticked.has(id)]))));
    return c.redirect(`/dashboard/contacts/${contact.id}?saved=1`, 303);
  })
  .post("/contacts/:id/delete", liveKeyOnly("Deleting a contact"), async (c) => {
    if (!(await deleteContact(c.var.ctx.db, c.get("auth").account.id, c.req.param("id")))) throw notFound("Contact");
    return c.redirect("/dashboard/contacts", 303);
  })
  .post("/contacts/:id/lists", liveKeyOnly("Adding contacts to a list"), async (c) => {
    const accountId = c.get("auth").account.id;
    const listId = field(await c.req.parseBody(), "list_id");
    if (!(await listExists(c.var.ctx.db, accountId, listId))) throw notFound("List");
    const added = await addMembersById(c.var.ctx.db, accountId, listId, [c.req.param("id")]);
    if (added.unknown.length > 0) throw notFound("Contact");
    return c.redirect(`/dashboard/contacts/${c.req.param("id")}`, 303);
  })
  .post("/contacts/:id/lists/:listId/remove", liveKeyOnly("Removing a contact from a list"), async (c) => {
    if (!(await removeMember(c.var.ctx.db, c.get("auth").account.id, c.req.param("listId"), c.req.param("id")))) throw notFound("List member");
    return c.redirect(`/dashboard/contacts/${c.req.param("id")}`, 303);
  });
