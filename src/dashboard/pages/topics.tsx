// Contacts › Topics and Contacts › Suppressions: the subscription topics of broadcast mail and the suppression list
// with its scopes (docs/streams.md), through the same domain functions and request schemas as the API.

import { Hono, type Context } from "hono";
import {
  addSuppression,
  defaultScope,
  listSuppressions,
  removeSuppression,
  suppressionReasons,
  suppressionScopes,
} from "../../domain/suppressions/suppressions";
import { suppressionInput } from "../../domain/suppressions/input";
import { topicInput } from "../../domain/topics/input";
import { allTopics, createTopic, deleteTopic } from "../../domain/topics/topics";
import { notFound } from "../../errors";
import { orRefuse } from "../../http/refusals";
import { field, liveKeyOnly, parsedOrThrow } from "../guard";
import { PostButton } from "../components/post-button";
import { Table } from "../components/table";
import { Csrf, Notice, Shell, formatTime } from "../layout";
import type { DashboardEnv } from "../session";

type Page = Context<DashboardEnv>;

/** The links between the Contacts pages. */
export function ContactsNav({ current }: { current: "contacts" | "topics" | "forms" | "suppressions" }) {
  const links = [
    ["contacts", "/dashboard/contacts", "Contacts and lists"],
    ["topics", "/dashboard/contacts/topics", "Topics"],
    ["forms", "/dashboard/contacts/forms", "Sign-up forms"],
    ["suppressions", "/dashboard/contacts/suppressions", "Suppressions"],
  ] as const;
  return (
    <nav class="subnav" aria-label="Contacts pages">
      {links.map(([key, href, label]) => (
        <a href={href} aria-current={key === current ? "page" : undefined} class={key === current ? "current" : undefined}>
          {label}
        </a>
      ))}
    </nav>
  );
}

async function topicsPage(c: Page) {
  const auth = c.get("auth");
  const csrfToken = c.get("csrfToken");
  const topics = await allTopics(c.var.ctx.db, auth.account.id);
  return c.html(
    <Shell title="Topics" auth={auth} csrfToken={csrfToken} current="/dashboard/contacts">
      <ContactsNav current="topics" />
      <section class="card">
        <h2>Subscription topics</h2>
        <p class="hint">
          What your marketing mail is about. A campaign names a topic and reaches only contacts subscribed to it; its unsubscribe link leaves that
          topic only, and the link's page lists every topic. Receipts and resets are never affected.
        </p>
        <Table
          head={["Topic", "Contacts who never chose", "Created", ""]}
          rows={topics}
          empty="No topics yet: every campaign then goes to all subscribed contacts, and an unsubscribe leaves all marketing."
          row={(topic) => (
            <tr>
              <td class="wrap">
                <strong>{topic.name}</strong>
                {topic.description ? <div class="hint">{topic.description}</div> : null}
              </td>
              <td>{topic.defaultSubscribed ? "subscribed (opt-out)" : "not subscribed (opt-in)"}</td>
              <td>{formatTime(topic.createdAt)}</td>
              <td>
                <PostButton action={`/dashboard/contacts/topics/${topic.id}/delete`} csrfToken={csrfToken} tone="danger" layout="inline-button">
                  Delete
                </PostButton>
              </td>
            </tr>
          )}
        />
      </section>
      <section class="card">
        <h2>Add a topic</h2>
        <form method="post" action="/dashboard/contacts/topics" class="stack">
          <Csrf token={csrfToken} />
          <label for="topic-name">Name</label>
          <input id="topic-name" name="name" type="text" required maxlength={100} placeholder="Newsletter" />
          <label for="topic-description">Description (shown on the unsubscribe page)</label>
          <input id="topic-description" name="description" type="text" maxlength={500} />
          <label class="check">
            <input type="checkbox" name="default_subscribed" value="true" checked /> Contacts who never chose are subscribed (untick for an opt-in
            topic)
          </label>
          <button type="submit">Add topic</button>
        </form>
      </section>
    </Shell>,
  );
}

async function suppressionsPage(c: Page) {
  const auth = c.get("auth");
  const csrfToken = c.get("csrfToken");
  const email = c.req.query("email")?.trim() || undefined;
  const rows = await listSuppressions(c.var.ctx.db, auth.account.id, { email }, { limit: 100 });
  return c.html(
    <Shell title="Suppressions" auth={auth} csrfToken={csrfToken} current="/dashboard/contacts">
      <ContactsNav current="suppressions" />
      {c.req.query("removed") ? <Notice kind="ok">Removed from the suppression list.</Notice> : null}
      <section class="card">
        <h2>Suppression list</h2>
        <p class="hint">
          Addresses kept away from mail: <strong>all</strong> mail (a mailbox that does not exist, a complaint about a receipt),{" "}
          <strong>broadcast</strong> mail only (an unsubscribe, a complaint about marketing), or <strong>transactional</strong> mail only.
        </p>
        <form method="get" action="/dashboard/contacts/suppressions" class="inline">
          <label>
            Address <input name="email" type="email" value={email ?? ""} />
          </label>
          <button type="submit" class="secondary">
            Find
          </button>
        </form>
        <Table
          head={["Address", "Scope", "Reason", "Since", ""]}
          rows={rows.slice(0, 100)}
          empty={email ? "This address is not suppressed." : "Nobody is suppressed."}
          row={(row) => (
            <tr>
              <td class="wrap">{row.email}</td>
              <td>{row.scope}</td>
              <td>
                {row.reason}
                {row.sourceMessageId ? (
                  <div class="hint">
                    <a href={`/dashboard/messages/${row.sourceMessageId}`}>the message</a>
                  </div>
                ) : null}
              </td>
              <td>{formatTime(row.createdAt)}</td>
              <td>
                <form method="post" action="/dashboard/contacts/suppressions/remove" class="inline">
                  <Csrf token={csrfToken} />
                  <input type="hidden" name="email" value={row.email} />
                  <input type="hidden" name="scope" value={row.scope} />
                  <button type="submit" class="link">
                    Remove
                  </button>
                </form>
              </td>
            </tr>
          )}
        />
      </section>
      <section class="card">
        <h2>Suppress an address</h2>
        <form method="post" action="/dashboard/contacts/suppressions" class="stack">
          <Csrf token={csrfToken} />
          <label for="suppress-email">Address</label>
          <input id="suppress-email" name="email" type="email" required />
          <label for="suppress-scope">Keep away</label>
          <select id="suppress-scope" name="scope">
            {suppressionScopes.map((scope) => (
              <option value={scope}>{scope === "all" ? "all mail" : `${scope} mail only`}</option>
            ))}
          </select>
          <label for="suppress-reason">Reason</label>
          <select id="suppress-reason" name="reason">
            {suppressionReasons.map((reason) => (
              <option value={reason} selected={reason === "manual"}>
                {reason}
              </option>
            ))}
          </select>
          <button type="submit">Suppress</button>
        </form>
      </section>
    </Shell>,
  );
}

export const topicPages = new Hono<DashboardEnv>()
  .get("/contacts/topics", (c) => topicsPage(c))
  .post("/contacts/topics", liveKeyOnly("Creating a topic"), async (c) => {
    const form = await c.req.parseBody();
    const body = parsedOrThrow(
      topicInput,
      { name: field(form, "name"), description: field(form, "description") || undefined, default_subscribed: form.default_subscribed === "true" },
      "The topic cannot be added",
    );
    orRefuse(
      await createTopic(c.var.ctx.db, c.get("auth").account.id, {
        name: body.name,
        description: body.description,
        defaultSubscribed: body.default_subscribed,
      }),
    );
    return c.redirect("/dashboard/contacts/topics", 303);
  })
  .post("/contacts/topics/:id/delete", liveKeyOnly("Deleting a topic"), async (c) => {
    if (!(await deleteTopic(c.var.ctx.db, c.get("auth").account.id, c.req.param("id")))) throw notFound("Topic");
    return c.redirect("/dashboard/contacts/topics", 303);
  });

// The suppression list sits beside the contacts but is its own section (the `send` scope covers it for keys).
export const suppressionPages = new Hono<DashboardEnv>()
  .get("/contacts/suppressions", (c) => suppressionsPage(c))
  .post("/contacts/suppressions", liveKeyOnly("Adding a suppression"), async (c) => {
    const form = await c.req.parseBody();
    const body = parsedOrThrow(
      suppressionInput,
      { email: field(form, "email"), reason: field(form, "reason") || undefined, scope: field(form, "scope") || undefined },
      "The address cannot be suppressed",
    );
    const scope = body.scope ?? defaultScope[body.reason];
    await addSuppression(c.var.ctx.db, c.get("auth").account.id, { email: body.email, reason: body.reason, scope });
    return c.redirect(`/dashboard/contacts/suppressions?email=${encodeURIComponent(body.email)}`, 303);
  })
  .post("/contacts/suppressions/remove", liveKeyOnly("Removing a suppression"), async (c) => {
    const form = await c.req.parseBody();
    const scope = suppressionScopes.find((name) => name === field(form, "scope"));
    const removed = await removeSuppression(c.var.ctx.db, c.get("auth").account.id, field(form, "email"), scope);
    if (removed.length === 0) throw notFound("Suppression");
    return c.redirect("/dashboard/contacts/suppressions?removed=1", 303);
  });
