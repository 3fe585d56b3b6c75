import { Hono } from "hono";
import { hasFeature } from "../../domain/accounts/accounts";
import { acceptMessage } from "../../domain/sending/accept";
import { SendRequestSchema, toAcceptInput } from "../../domain/sending/input";
import {
  findMessage,
  findSentSource,
  listMessages,
  messageStatuses,
  recipientsOfMessages,
  sentContent,
  type MessageFilters,
  type RecipientStatus,
} from "../../domain/sending/messages";
import { notFound } from "../../errors";
import { acceptRefusalError } from "../../http/refusals";
import { field, needs, parsedOrThrow } from "../guard";
import { AnyOf } from "../components/any-of";
import { Table } from "../components/table";
import { Csrf, Empty, Notice, Pager, Shell, StatusBadge, formatTime, framedMailCsp, pageOfRows } from "../layout";

import type { DashboardEnv } from "../session";
import { messageStreams } from "../../db/schema";

const isoDay = /^\d{4}-\d{2}-\d{2}$/;
const pageSize = 25;

function Filters({ query }: { query: Record<string, string> }) {
  return (
    <form method="get" action="/dashboard/messages" class="filters" aria-label="Search">
      <label>
        Recipient
        <input name="to" type="search" value={query.to ?? ""} placeholder="ann@example.org" maxlength={320} />
      </label>
      <AnyOf label="Status" name="status" options={messageStatuses.map((status) => [status, status])} selected={query.status} />
      <AnyOf label="Stream" name="stream" options={messageStreams.map((stream) => [stream, stream])} selected={query.stream} />
      <label>
        Tag
        <input name="tag" type="search" value={query.tag ?? ""} maxlength={64} />
      </label>
      <label>
        From
        <input name="after" type="date" value={query.after ?? ""} />
      </label>
      <label>
        To
        <input name="before" type="date" value={query.before ?? ""} />
      </label>
      <button type="submit">Search</button>
    </form>
  );
}

/** How many of a message's recipients are in each status ("1 bounced · 2 sent"), when it has several. */
function RecipientOutcomes({ recipients }: { recipients: { status: RecipientStatus }[] | undefined }) {
  if (!recipients || recipients.length < 2) return null;
  const outcomes = new Map<RecipientStatus, number>();
  for (const { status } of recipients) outcomes.set(status, (outcomes.get(status) ?? 0) + 1);
  return (
    <small class="recipient-outcomes">
      {[...outcomes]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([status, total]) => `${total} ${status}`)
        .join(" · ")}
    </small>
  );
}

function TestSendForm({ csrfToken }: { csrfToken: string }) {
  return (
    <details class="card">
      <summary>
        <strong>Send a test email</strong>
      </summary>
      <form method="post" action="/dashboard/messages/test" class="stack">
        <Csrf token={csrfToken} />
        <label for="test-from">From (an address on a verified domain)</label>
        <input id="test-from" name="from" type="text" required placeholder="Acme <hello@example.com>" />
        <label for="test-to">To</label>
        <input id="test-to" name="to" type="email" required />
        <label for="test-subject">Subject</label>
        <input id="test-subject" name="subject" type="text" required maxlength={998} value="Test from the Mailforge dashboard" />
        <label for="test-text">Text</label>
        <textarea id="test-text" name="text" required>
          Hello! This is a test message sent from the dashboard.
        </textarea>
        <button type="submit">Send</button>
      </form>
    </details>
  );
}

export const messagePages = new Hono<DashboardEnv>()
  .get("/messages", async (c) => {
    const auth = c.get("auth");
    const query = c.req.query();
    const status = messageStatuses.find((value) => value === query.status);
    const filters: MessageFilters = {
      status,
      stream: messageStreams.find((value) => value === query.stream),
      to: query.to?.trim() || undefined,
      tag: query.tag?.trim() || undefined,
      createdAfter: isoDay.test(query.after ?? "") ? query.after : undefined,
      createdBefore: isoDay.test(query.before ?? "") ? query.before : undefined,
    };
    const rows = await listMessages(c.var.ctx.db, auth.account.id, filters, { cursor: query.cursor || undefined, limit: pageSize });
    const { page, next } = pageOfRows(rows, pageSize);
    const recipients = await recipientsOfMessages(
      c.var.ctx.db,
      auth.account.id,
      page.map((message) => message.id),
    );
    return c.html(
      <Shell title="Messages" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/messages">
        {query.sent ? <Notice kind="ok">Test email accepted; it appears below as it is delivered.</Notice> : null}
        <section class="card">
          <Filters query={query} />
        </section>
        <section class="card">
          <Table
            head={["Subject", "Recipients", "From", "Status", "Tags", "Created"]}
            rows={page}
            empty={
              Object.values(filters).some(Boolean)
                ? "No messages match these filters."
                : "No messages yet. Send one with the API, SMTP or the form below."
            }
            row={(message) => (
              <tr>
                <td>
                  <a href={`/dashboard/messages/${message.id}`}>{message.subject || "(no subject)"}</a>
                  {message.testMode ? <span class="badge warn">test</span> : null}
                  {message.stream === "broadcast" ? <span class="badge">broadcast</span> : null}
                </td>
                <td class="wrap" data-testid="recipients">
                  <ul class="recipients">
                    {(recipients.get(message.id) ?? []).map((recipient) => (
                      <li>
                        {recipient.email} <StatusBadge status={recipient.status} />
                      </li>
                    ))}
                  </ul>
                </td>
                <td class="wrap">{message.fromAddress}</td>
                <td>
                  <StatusBadge status={message.status} /> <RecipientOutcomes recipients={recipients.get(message.id)} />
                </td>
                <td>{message.tags.join(", ")}</td>
                <td>{formatTime(message.createdAt)}</td>
              </tr>
            )}
          />
          <Pager next={next} path="/dashboard/messages" query={query} />
        </section>
        {hasFeature(auth.account, "email_api") && hasFeature(auth.account, "smtp_relay") ? <TestSendForm csrfToken={c.get("csrfToken")} /> : null}
      </Shell>,
    );
  })
  .post("/messages/test", needs("send", "email_api", "smtp_relay"), async (c) => {
    const auth = c.get("auth");
    const form = await c.req.parseBody();
    const body = parsedOrThrow(
      SendRequestSchema,
      { from: field(form, "from"), to: field(form, "to"), subject: field(form, "subject"), text: field(form, "text"), tags: ["dashboard-test"] },
      "The test email cannot be sent",
    );
    // The same pipeline as POST /send: domain check, suppressions, daily limit, credits.
    const outcome = await acceptMessage(c.var.ctx, { account: auth.account, testMode: auth.apiKey.mode === "test" }, toAcceptInput(body));
    if (outcome.kind !== "accepted") throw acceptRefusalError(outcome);
    return c.redirect("/dashboard/messages?sent=1", 303);
  })
  .get("/messages/:id", async (c) => {
    const auth = c.get("auth");
    const found = await findMessage(c.var.ctx.db, auth.account.id, c.req.param("id"));
    if (!found) throw notFound("Message");
    const { message, recipients, timeline } = found;
    const headers: [string, string][] = [
      ["From", message.fromName ? `${message.fromName} <${message.fromAddress}>` : message.fromAddress],
      ["To", recipients.map((recipient) => recipient.email).join(", ")],
      ...(message.replyTo ? [["Reply-To", message.replyTo] as [string, string]] : []),
      ["Subject", message.subject],
      ["Tags", message.tags.join(", ") || "—"],
      ...Object.entries(message.metadata).map(([name, value]): [string, string] => [`Metadata ${name}`, value]),
    ];
    return c.html(
      <Shell title={message.subject || "(no subject)"} auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/messages">
        <div class="grid two">
          <section class="card">
            <h2>Message</h2>
            <dl class="facts">
              <dt>Status</dt>
              <dd>
                <StatusBadge status={message.status} />
                {message.testMode ? <span class="badge warn">test mode</span> : null}
              </dd>
              <dt>Id</dt>
              <dd>
                <code>{message.id}</code>
              </dd>
              <dt>Source</dt>
              <dd>{message.source}</dd>
              <dt>Created</dt>
              <dd>{formatTime(message.createdAt)}</dd>
              <dt>Sent</dt>
              <dd>{formatTime(message.sentAt)}</dd>
              <dt>Attempts</dt>
              <dd>{message.attempts}</dd>
              <dt>Credits</dt>
              <dd>
                {message.creditsCharged} charged, {message.creditsRefunded} refunded
              </dd>
              <dt>Last reply</dt>
              <dd>{message.smtpResponse ?? "—"}</dd>
            </dl>
            <h3>Headers</h3>
            <dl class="facts">
              {headers.map(([name, value]) => (
                <>
                  <dt>{name}</dt>
                  <dd>{value}</dd>
                </>
              ))}
            </dl>
          </section>
          <section class="card">
            <h2>Timeline</h2>
            {timeline.length === 0 ? (
              <Empty>No events yet.</Empty>
            ) : (
              <ol class="timeline">
                {timeline.map((event) => (
                  <li>
                    <strong>{event.type}</strong> <span class="hint">{formatTime(event.createdAt)}</span>
                    {typeof event.data.recipient === "string" ? <div class="hint">{event.data.recipient}</div> : null}
                    {typeof event.data.smtp_response === "string" ? <div class="hint">{event.data.smtp_response}</div> : null}
                  </li>
                ))}
              </ol>
            )}
            <h3>Recipients</h3>
            <Table
              head={["Address", "Status", "Opens", "Clicks"]}
              rows={recipients}
              row={(recipient) => (
                <tr>
                  <td>{recipient.email}</td>
                  <td>
                    <StatusBadge status={recipient.status} />
                    {recipient.smtpResponse ? <div class="hint">{recipient.smtpResponse}</div> : null}
                  </td>
                  <td>{recipient.opens}</td>
                  <td>{recipient.clicks}</td>
                </tr>
              )}
            />
          </section>
        </div>
        {message.rawKey !== null ? (
          <section class="card">
            <h2>Content</h2>
            <p class="hint">
              As sent. Remote images are not loaded here, so viewing does not count as an open.{" "}
              <a href={`/dashboard/messages/${message.id}/raw`}>Raw source</a>
            </p>
            <iframe class="preview" title="Message content" sandbox="" src={`/dashboard/messages/${message.id}/body`} />
          </section>
        ) : null}
        <p>
          <a href="/dashboard/messages">← All messages</a>
        </p>
      </Shell>,
    );
  })
  .get("/messages/:id/body", async (c) => {
    const source = await findSentSource(c.var.ctx, c.get("auth").account.id, c.req.param("id"));
    if (!source.ok) throw notFound("Message content");
    const content = await sentContent(await source.raw.arrayBuffer());
    // The sent HTML in a sandboxed frame: no script runs, and no request leaves (the open pixel is a remote image).
    c.header("Content-Security-Policy", framedMailCsp());
    c.header("X-Frame-Options", "SAMEORIGIN");
    if (content.html !== null) return c.body(content.html, 200, { "Content-Type": "text/html; charset=utf-8" });
    return c.html(<pre>{content.text ?? ""}</pre>);
  })
  .get("/messages/:id/raw", async (c) => {
    const source = await findSentSource(c.var.ctx, c.get("auth").account.id, c.req.param("id"));
    if (!source.ok) throw notFound("Message source");
    // Shown as text rather than offered as a download.
    return c.body(source.raw.body, 200, { "Content-Type": "text/plain; charset=utf-8" });
  });
