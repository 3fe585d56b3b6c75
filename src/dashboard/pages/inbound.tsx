// Received mail (docs/inbound.md): the list, one message, and which domains receive. A message's HTML is someone
// else's content: it is shown only inside a sandboxed frame whose own Content-Security-Policy runs no script, loads
// nothing remote (no tracking pixel reaches its sender) and cannot navigate or submit anything.

import { Hono } from "hono";
import { attachmentResponse, inboundDetail } from "../../http/inbound";
import { listDomains } from "../../domain/domains/domains";
import { domainChangeInput } from "../../domain/domains/input";
import { setReceiving } from "../../domain/inbound/receiving";
import { deleteInbound, findInbound, listInbound, type InboundFilters } from "../../domain/inbound/store";
import { notFound } from "../../errors";
import { orRefuse } from "../../http/refusals";
import { field, liveKeyOnly, parsedOrThrow } from "../guard";
import { PostButton } from "../components/post-button";
import { Table } from "../components/table";
import { Csrf, Empty, Notice, Pager, Shell, canSee, formatTime, framedMailCsp, pageOfRows } from "../layout";

import type { DashboardEnv } from "../session";

const isoDay = /^\d{4}-\d{2}-\d{2}$/;
const pageSize = 25;
const current = "/dashboard/inbound";

function Filters({ query }: { query: Record<string, string> }) {
  return (
    <form method="get" action={current} class="filters" aria-label="Search">
      <label>
        To
        <input name="to" type="search" value={query.to ?? ""} placeholder="support@example.com" maxlength={320} />
      </label>
      <label>
        From
        <input name="from" type="search" value={query.from ?? ""} placeholder="jane@example.org" maxlength={320} />
      </label>
      <label>
        After
        <input name="after" type="date" value={query.after ?? ""} />
      </label>
      <label>
        Before
        <input name="before" type="date" value={query.before ?? ""} />
      </label>
      <button type="submit">Search</button>
    </form>
  );
}

type ReceivingDomain = { id: string; name: string; status: string; receiving: boolean; receivingAddresses: string[] | null };

function Receiving({ domains, csrfToken }: { domains: ReceivingDomain[]; csrfToken: string }) {
  return (
    <details class="card" open={domains.some((domain) => domain.receiving) ? undefined : true}>
      <summary>
        <strong>Receiving domains</strong>
      </summary>
      <p class="hint">
        A verified domain receives mail once receiving is on and its MX points at Cloudflare Email Routing (the domain's records list it). Leave the
        addresses empty to receive every address; mail to others is refused.
      </p>
      {domains.length === 0 ? (
        <Empty>No domains yet: add and verify one under Domains first.</Empty>
      ) : (
        domains.map((domain) => (
          <form method="post" action={`/dashboard/inbound/domains/${domain.id}`} class="stack">
            <Csrf token={csrfToken} />
            <h3>{domain.name}</h3>
            <label>
              <input type="checkbox" name="receiving" value="on" checked={domain.receiving} disabled={domain.status !== "verified"} /> Receive mail
              {domain.status !== "verified" ? " (verify the domain first)" : ""}
            </label>
            <label>
              Addresses (local parts, comma-separated; empty: all)
              <input name="addresses" type="text" value={domain.receivingAddresses?.join(", ") ?? ""} placeholder="support, replies" />
            </label>
            <button type="submit" disabled={domain.status !== "verified"}>
              Save
            </button>
          </form>
        ))
      )}
    </details>
  );
}

const dayStart = (day: string | undefined) => (day && isoDay.test(day) ? `${day}T00:00:00.000Z` : undefined);
const dayEnd = (day: string | undefined) => (day && isoDay.test(day) ? `${day}T23:59:59.999Z` : undefined);

// The receiving form on the inbound page changes a domain, so it is the domains section's (PATCH /domains/{id} needs
// the `domains` scope), not the inbound one's.
export const domainReceivingPages = new Hono<DashboardEnv>().post("/inbound/domains/:id", liveKeyOnly("Changing a domain's receiving"), async (c) => {
  const auth = c.get("auth");
  const domain = (await listDomains(c.var.ctx.shared, auth.account.id, { limit: 100 })).find((row) => row.id === c.req.param("id"));
  if (!domain) throw notFound("Domain");
  const form = await c.req.parseBody();
  const addresses = field(form, "addresses")
    .split(/[\s,;]+/)
    .filter(Boolean);
  const body = parsedOrThrow(
    domainChangeInput,
    { receiving: field(form, "receiving") === "on", receiving_addresses: addresses.length > 0 ? addresses : null },
    "Receiving cannot be changed",
  );
  orRefuse(await setReceiving(c.var.ctx, domain, { receiving: body.receiving, addresses: body.receiving_addresses }));
  return c.redirect(`${current}?saved=1`, 303);
});

export const inboundPages = new Hono<DashboardEnv>()
  .get("/inbound", async (c) => {
    const auth = c.get("auth");
    const query = c.req.query();
    const filters: InboundFilters = {
      to: query.to?.trim() || undefined,
      from: query.from?.trim() || undefined,
      receivedAfter: dayStart(query.after),
      receivedBefore: dayEnd(query.before),
    };
    const rows = await listInbound(c.var.ctx.db, auth.account.id, filters, { cursor: query.cursor || undefined, limit: pageSize });
    const { page, next } = pageOfRows(rows, pageSize);
    const domains = canSee(auth, "domains") ? await listDomains(c.var.ctx.shared, auth.account.id, { limit: 100 }) : [];
    return c.html(
      <Shell title="Inbound" auth={auth} csrfToken={c.get("csrfToken")} current={current}>
        {query.saved ? <Notice kind="ok">Receiving saved.</Notice> : null}
        {query.deleted ? <Notice kind="ok">Message deleted.</Notice> : null}
        <section class="card">
          <Filters query={query} />
        </section>
        <section class="card">
          <Table
            head={["Subject", "From", "To", "Attachments", "Received"]}
            rows={page}
            empty={Object.values(filters).some(Boolean) ? "No received mail matches these filters." : "No mail received yet."}
            row={(message) => (
              <tr>
                <td>
                  <a href={`${current}/${message.id}`}>{message.subject || "(no subject)"}</a>
                  {message.inReplyToMessageId ? <span class="badge ok">reply</span> : null}
                  {message.autoSubmitted ? <span class="badge warn">{message.autoSubmitted}</span> : null}
                </td>
                <td>{message.fromHeader ?? message.envelopeFrom}</td>
                <td>{message.envelopeTo}</td>
                <td>{message.attachments.length}</td>
                <td>{formatTime(message.createdAt)}</td>
              </tr>
            )}
          />
          <Pager next={next} path={current} query={query} />
        </section>
        {canSee(auth, "domains") ? <Receiving domains={domains.slice(0, 100)} csrfToken={c.get("csrfToken")} /> : null}
      </Shell>,
    );
  })
  .get("/inbound/:id", async (c) => {
    const auth = c.get("auth");
    const row = await findInbound(c.var.ctx.db, auth.account.id, c.req.param("id"));
    if (!row) throw notFound("Received message");
    const message = await inboundDetail(c.env, row);
    const headers: [string, string][] = [
      ["From", message.from ?? "—"],
      ["To", message.to.join(", ") || "—"],
      ...(message.cc.length > 0 ? [["Cc", message.cc.join(", ")] as [string, string]] : []),
      ...(message.reply_to ? [["Reply-To", message.reply_to] as [string, string]] : []),
      ["Date", formatTime(message.date)],
      ["Message-ID", message.message_id ?? "—"],
      ["Envelope", `${message.envelope_from || "<>"} → ${message.envelope_to}`],
    ];
    const auth_results = message.authentication;
    return c.html(
      <Shell title={message.subject || "(no subject)"} auth={auth} csrfToken={c.get("csrfToken")} current={current}>
        <div class="grid two">
          <section class="card">
            <h2>Message</h2>
            <dl class="facts">
              {headers.map(([name, value]) => (
                <>
                  <dt>{name}</dt>
                  <dd>{value}</dd>
                </>
              ))}
              <dt>Received</dt>
              <dd>{formatTime(message.received_at)}</dd>
              <dt>Size</dt>
              <dd>{message.size.toLocaleString("en")} bytes</dd>
              <dt>Auto-Submitted</dt>
              <dd>{message.auto_submitted ?? "no"}</dd>
              <dt>In reply to</dt>
              <dd>
                {message.in_reply_to_message_id ? (
                  <a href={`/dashboard/messages/${message.in_reply_to_message_id}`}>{message.in_reply_to_message_id}</a>
                ) : (
                  "—"
                )}
                {message.campaign_id ? (
                  <>
                    {" "}
                    (campaign <a href={`/dashboard/campaigns/${message.campaign_id}`}>{message.campaign_id}</a>)
                  </>
                ) : null}
              </dd>
            </dl>
            <h3>Authentication (as Email Routing reported it)</h3>
            <dl class="facts">
              <dt>SPF</dt>
              <dd>{auth_results.spf ?? "—"}</dd>
              <dt>DKIM</dt>
              <dd>{auth_results.dkim ?? "—"}</dd>
              <dt>DMARC</dt>
              <dd>{auth_results.dmarc ?? "—"}</dd>
            </dl>
            {auth_results.header ? <p class="hint">{auth_results.header}</p> : null}
            <h3>Attachments</h3>
            {message.attachments.length === 0 ? (
              <Empty>None.</Empty>
            ) : (
              <ul>
                {message.attachments.map((attachment) => (
                  <li>
                    <a href={`${current}/${message.id}/attachments/${attachment.index}`}>{attachment.filename ?? `attachment ${attachment.index}`}</a>{" "}
                    <span class="hint">
                      {attachment.content_type}, {attachment.size.toLocaleString("en")} bytes
                    </span>
                  </li>
                ))}
              </ul>
            )}
            <p>
              <a href={`${current}/${message.id}/raw`}>Download the raw message (.eml)</a>
            </p>
            <PostButton action={`${current}/${message.id}/delete`} csrfToken={c.get("csrfToken")} tone="danger">
              Delete
            </PostButton>
          </section>
          <section class="card">
            <h2>Body</h2>
            {message.html ? <iframe class="preview" title="HTML body" sandbox="" src={`${current}/${message.id}/html`} /> : null}
            {message.text ? <pre>{message.text}</pre> : message.html ? null : <Empty>No body.</Empty>}
          </section>
        </div>
        <p>
          <a href={current}>← All received mail</a>
        </p>
      </Shell>,
    );
  })
  .get("/inbound/:id/html", async (c) => {
    const row = await findInbound(c.var.ctx.db, c.get("auth").account.id, c.req.param("id"));
    if (!row) throw notFound("Received message");
    const { html } = await inboundDetail(c.env, row);
    c.header("Content-Security-Policy", framedMailCsp());
    c.header("X-Frame-Options", "SAMEORIGIN");
    return c.html(html ?? "");
  })
  .get("/inbound/:id/raw", async (c) => {
    const row = await findInbound(c.var.ctx.db, c.get("auth").account.id, c.req.param("id"));
    const object = row ? await c.env.BLOBS.get(row.rawKey) : null;
    if (!row || !object) throw notFound("Received message");
    return new Response(object.body, {
      headers: {
        "Content-Type": "message/rfc822",
        "Content-Disposition": `attachment; filename="${row.id}.eml"`,
        "Content-Security-Policy": "sandbox; default-src 'none'",
      },
    });
  })
  .get("/inbound/:id/attachments/:n{[0-9]{1,4}}", async (c) => {
    const row = await findInbound(c.var.ctx.db, c.get("auth").account.id, c.req.param("id"));
    const response = row ? await attachmentResponse(c.env, row, Number(c.req.param("n"))) : undefined;
    if (!response) throw notFound("Attachment");
    return response;
  })
  .post("/inbound/:id/delete", liveKeyOnly("Deleting received mail"), async (c) => {
    if (!(await deleteInbound(c.var.ctx, c.get("auth").account.id, c.req.param("id")))) throw notFound("Received message");
    return c.redirect(`${current}?deleted=1`, 303);
  });
