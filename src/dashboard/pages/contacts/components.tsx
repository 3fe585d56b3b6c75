// The contact pages' pieces: the lists and the CSV import beside the contacts, an import's progress, and a contact's
// details and what it belongs to (lists, topic subscriptions) with the mail it was sent.

import type { ContactRow, ContactWithLists } from "../../../domain/contacts/contacts";
import type { ContactImport } from "../../../domain/contacts/import";
import type { ListWithCounts } from "../../../domain/contacts/lists";
import type { MessageDetail, MessageRow } from "../../../domain/sending/messages";
import type { TopicRow } from "../../../domain/topics/topics";
import { NameForm } from "../../components/name-form";
import { PostButton } from "../../components/post-button";
import { Table } from "../../components/table";
import { Csrf, Empty, Notice, Progress, StatusBadge, formatTime } from "../../layout";

const importFinished = (row: ContactImport) => row.status === "completed" || row.status === "failed";

export function ImportProgress({ contactImport }: { contactImport: ContactImport & { errors: { row: number; message: string }[] } }) {
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

export function ListsCard({ lists, csrfToken }: { lists: ListWithCounts[]; csrfToken: string }) {
  return (
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
                <Csrf token={csrfToken} />
                <input name="name" type="text" required maxlength={200} value={list.name} aria-label={`New name for ${list.name}`} />
                <button type="submit" class="secondary">
                  Rename
                </button>
              </form>
              <PostButton
                action={`/dashboard/contacts/lists/${list.id}/delete`}
                csrfToken={csrfToken}
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
      <NameForm action="/dashboard/contacts/lists" csrfToken={csrfToken} label="New list" maxlength={200} submit="Create list" />
      <p class="hint">
        <a href="/dashboard/contacts/forms">Sign-up forms</a> add people to lists from your website, with double opt-in.
      </p>
    </section>
  );
}

export function ImportCard({ lists, verifyFreshDays, csrfToken }: { lists: ListWithCounts[]; verifyFreshDays: number; csrfToken: string }) {
  return (
    <section class="card">
      <h2>Import a CSV</h2>
      <form method="post" action="/dashboard/contacts/imports" enctype="multipart/form-data" class="stack">
        <Csrf token={csrfToken} />
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
  );
}

export function ContactDetails({ contact, csrfToken }: { contact: ContactRow; csrfToken: string }) {
  const text = (name: "firstName" | "lastName" | "company" | "phone" | "country") => contact[name] ?? "";
  return (
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
  );
}

/** A sent message and this contact's outcome of it. */
type ContactMessage = { message: MessageRow; recipient: Pick<MessageDetail["recipients"][number], "status" | "opens" | "clicks"> | undefined };

/** The contact's lists, its topic subscriptions and the last mail sent to it. */
export function ContactRelations({
  contact,
  lists,
  topics,
  subscribed,
  outcomes,
  csrfToken,
}: {
  contact: ContactWithLists;
  lists: ListWithCounts[];
  topics: TopicRow[];
  subscribed: Record<string, boolean>;
  outcomes: ContactMessage[];
  csrfToken: string;
}) {
  const names = new Map(lists.map((list) => [list.id, list.name]));
  const opened = outcomes.filter(({ recipient }) => recipient?.opens).length;
  const clicked = outcomes.filter(({ recipient }) => recipient?.clicks).length;
  return (
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
  );
}
