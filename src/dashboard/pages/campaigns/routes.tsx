// The campaign pages: the list with a new draft and the senders, a campaign's editor, preview, test email and
// sending or scheduling, its progress while it sends and its report after. Every change goes through the domain
// functions /api/v1/campaigns calls, its body parsed with the API's own schemas.

import { Hono } from "hono";
import { campaignChangeInput, campaignFields, campaignInput, newCampaignFields, senderInput } from "../../../domain/campaigns/input";
import {
  campaignCounters,
  cancelCampaign,
  createCampaign,
  findCampaign,
  listCampaigns,
  MAX_SCHEDULE_DAYS,
  sendCampaign,
  updateDraft,
} from "../../../domain/campaigns/campaigns";
import { findBalances } from "../../../domain/accounts/accounts";
import { renderCampaignMessage } from "../../../domain/campaigns/delivery";
import { tagOf } from "../../../db/hints";
import { createSender } from "../../../domain/campaigns/senders";
import { contactChecksNeeded } from "../../../domain/contacts/verify";
import { campaignReport } from "../../../domain/reports/reports";
import { acceptMessage } from "../../../domain/sending/accept";
import { parseMailbox } from "../../../domain/sending/addresses";
import { escapeHtml, placeholderNames } from "../../../domain/sending/render";
import { AppError, notFound, validationError } from "../../../errors";
// The API's mappings of outcomes to refusals, so a page refuses what the API refuses, with its message.
import { savedOrThrow, sendRefusal } from "../../../http/campaigns";
import { acceptRefusalError, orRefuse } from "../../../http/refusals";
import { PostButton } from "../../components/post-button";
import { Table } from "../../components/table";
import { field, liveKeyOnly, needs, parsedOrThrow } from "../../guard";
import { Csrf, Empty, Notice, Shell, StatusBadge, formatTime, framedMailCsp } from "../../layout";
import type { DashboardEnv } from "../../session";
import { CampaignProgress, Editor, inFlight, ListedOutcome, ListedRecipients, namesOf, Report } from "./components";
import { chosenIds, editorBody, SEND_AT_PATTERN, type Form } from "./form";
import { audienceOf, audienceSql, draftAudiences, editorOptions, ownedCampaign, previewContact, testSender, withTemplate } from "./loaders";

export const campaignPages = new Hono<DashboardEnv>()
  .get("/campaigns", async (c) => {
    const auth = c.get("auth");
    const [rows, options] = await Promise.all([
      listCampaigns(c.var.ctx.db, auth.account.id, { limit: 50 }),
      editorOptions(c.var.ctx.db, auth.account.id),
    ]);
    const page = rows.slice(0, 50);
    const [counters, audiences] = await Promise.all([
      campaignCounters(
        c.var.ctx.db,
        page.map((row) => row.id),
      ),
      draftAudiences(c.var.ctx.db, page),
    ]);
    return c.html(
      <Shell title="Campaigns" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/campaigns">
        <section class="card">
          <h2>Campaigns</h2>
          <Table
            head={["Name", "Status", "Recipients", "Opened", "Updated"]}
            rows={page}
            empty="No campaigns yet. Create a draft below; nothing is sent until you send or schedule it."
            row={(campaign) => (
              <tr>
                <td>
                  <a href={`/dashboard/campaigns/${campaign.id}`}>{campaign.name}</a>
                </td>
                <td>
                  <StatusBadge status={campaign.status} />
                  <ListedOutcome campaign={campaign} counters={counters.get(campaign.id)} />
                </td>
                <td>
                  <ListedRecipients campaign={campaign} counters={counters.get(campaign.id)} audience={audiences.get(campaign.id)} />
                </td>
                <td>{counters.get(campaign.id)?.unique_opens ?? 0}</td>
                <td>{formatTime(campaign.updatedAt)}</td>
              </tr>
            )}
          />
        </section>
        <div class="grid two">
          <section class="card">
            <h2>New draft</h2>
            <Editor options={options} csrfToken={c.get("csrfToken")} />
          </section>
          <section class="card">
            <h2>Senders</h2>
            {options.senders.length === 0 ? (
              <Empty>No senders yet. A sender is a name and an address on a verified domain.</Empty>
            ) : (
              <ul>
                {options.senders.map((sender) => (
                  <li>
                    {sender.name} &lt;{sender.email}&gt;
                  </li>
                ))}
              </ul>
            )}
            <form method="post" action="/dashboard/campaigns/senders" class="stack">
              <Csrf token={c.get("csrfToken")} />
              <label for="sender-name">Name</label>
              <input id="sender-name" name="name" type="text" required maxlength={100} />
              <label for="sender-email">Address</label>
              <input id="sender-email" name="email" type="email" required />
              <button type="submit" class="secondary">
                Add sender
              </button>
            </form>
          </section>
        </div>
      </Shell>,
    );
  })
  .post("/campaigns/senders", liveKeyOnly("Adding a sender"), async (c) => {
    const form = await c.req.parseBody();
    const body = parsedOrThrow(senderInput, { name: form.name, email: form.email }, "The sender cannot be added");
    orRefuse(await createSender(c.var.ctx, c.get("auth").account.id, { name: body.name, email: body.email, replyTo: null }));
    return c.redirect("/dashboard/campaigns", 303);
  })
  // The live count beside the editor's audience controls (htmx): the audience the checked lists and segments give.
  .get("/campaigns/audience", async (c) => {
    const accountId = c.get("auth").account.id;
    const saved = c.req.query("campaign") ? await findCampaign(c.var.ctx.db, accountId, c.req.query("campaign") ?? "") : undefined;
    const query = c.req.queries();
    const form: Form = Object.fromEntries(Object.entries(query).map(([name, values]) => [name, values]));
    const audience = {
      accountId,
      lists: chosenIds(form, "lists", saved?.lists) ?? saved?.lists ?? [],
      segments: chosenIds(form, "segments", saved?.segments) ?? saved?.segments ?? [],
      excludeLists: chosenIds(form, "exclude_lists", saved?.excludeLists) ?? saved?.excludeLists ?? [],
      topicId: (query.topic_id ? query.topic_id[0] : saved?.topicId) || null,
    };
    const total = await audienceOf(c.var.ctx.db, audience, await audienceSql(c.var.ctx.db, audience));
    return c.html(
      <>
        Audience: <strong>{total.toLocaleString("en")}</strong> subscribed contacts
      </>,
    );
  })
  .post("/campaigns", liveKeyOnly("Creating a campaign"), async (c) => {
    const body = parsedOrThrow(campaignInput, editorBody(await c.req.parseBody({ all: true })), "The campaign cannot be saved");
    const campaign = savedOrThrow(await createCampaign(c.var.ctx.db, c.get("auth").account.id, newCampaignFields(body)));
    return c.redirect(`/dashboard/campaigns/${campaign.id}`, 303);
  })
  .get("/campaigns/:id", async (c) => {
    const auth = c.get("auth");
    const campaign = await ownedCampaign(c);
    // Only a draft shows its audience and a preview; the audience's condition serves both, its segments read once.
    const where = campaign.status === "draft" ? await audienceSql(c.var.ctx.db, campaign) : undefined;
    const [counters, options, audience, checks, report, resolved, balances] = await Promise.all([
      campaignCounters(c.var.ctx.db, [campaign.id]),
      editorOptions(c.var.ctx.db, auth.account.id),
      where ? audienceOf(c.var.ctx.db, campaign, where) : 0,
      where && campaign.verification !== "off" ? contactChecksNeeded(c.var.ctx, where) : undefined,
      campaign.status === "draft" ? undefined : campaignReport(c.var.ctx.db, campaign.id),
      withTemplate(c.var.ctx.db, campaign),
      findBalances(c.var.ctx.db, auth.account.id),
    ]);
    // A draft's preview, or the one example a sent campaign's subject template is shown filled in for.
    const templated = placeholderNames(resolved.subject ?? "").length > 0;
    const contact = where || templated ? await previewContact(c.var.ctx.db, campaign, c.req.query("contact"), where) : undefined;
    const example =
      !where && contact
        ? await renderCampaignMessage(c.env, { messageId: `preview_${campaign.id}`, tag: tagOf(c.var.ctx.db) }, { campaign: resolved, contact })
        : undefined;
    const csrfToken = c.get("csrfToken");
    const now = new Date();
    const available = Math.max(0, balances.sendBalance - balances.sendReserved);
    const previewQuery = contact ? `?contact=${contact.id}` : "";
    return c.html(
      <Shell title={campaign.name} auth={auth} csrfToken={csrfToken} current="/dashboard/campaigns">
        {c.req.query("scheduled") ? <Notice kind="ok">Campaign scheduled; credits for its audience are reserved.</Notice> : null}
        {c.req.query("tested") ? <Notice kind="ok">Test email accepted for {c.req.query("tested")}.</Notice> : null}
        <section class="card">
          <h2>Status</h2>
          <CampaignProgress campaign={campaign} counters={counters.get(campaign.id)!} />
          {inFlight(campaign) ? (
            <PostButton action={`/dashboard/campaigns/${campaign.id}/cancel`} csrfToken={csrfToken} tone="danger">
              Cancel campaign
            </PostButton>
          ) : null}
        </section>
        {campaign.status === "draft" ? (
          <>
            <div class="grid two">
              <section class="card">
                <h2>Edit draft</h2>
                <Editor campaign={campaign} options={options} csrfToken={csrfToken} />
              </section>
              <section class="card">
                <h2>Preview</h2>
                {contact ? (
                  <p class="hint" data-testid="preview-contact">
                    As {contact.email} will see it
                    {contact.firstName ? ` (${contact.firstName})` : ""}, with their unsubscribe link.
                  </p>
                ) : (
                  <p class="hint">Add contacts to see the preview filled in for one of them.</p>
                )}
                {resolved.html || resolved.text ? (
                  <iframe class="preview" title="Preview" sandbox="" src={`/dashboard/campaigns/${campaign.id}/preview${previewQuery}`} />
                ) : (
                  <Empty>No content yet: choose a template or write the HTML.</Empty>
                )}
              </section>
            </div>
            <section class="card" id="send">
              <h2>Send or schedule</h2>
              <p data-testid="audience">
                Audience: <strong>{audience.toLocaleString("en")}</strong> subscribed contacts. Sending reserves{" "}
                <strong>{audience.toLocaleString("en")}</strong> sending credits (one per recipient; {available.toLocaleString("en")} available).
              </p>
              {checks ? (
                <p data-testid="verification-estimate">
                  Verification first: <strong>{checks.toCheck.toLocaleString("en")}</strong> addresses to check, costing{" "}
                  <strong>{checks.toCheck.toLocaleString("en")}</strong> verification credits ({balances.verifyBalance.toLocaleString("en")}{" "}
                  available); {checks.fresh.toLocaleString("en")} checked recently are reused free.
                </p>
              ) : null}
              <p class="hint" data-testid="sends-saved">
                This sends the draft as last saved: save your changes in the editor above first.
              </p>
              <form method="post" action={`/dashboard/campaigns/${campaign.id}/send`} class="inline">
                <Csrf token={csrfToken} />
                <label>
                  Send at, in UTC (YYYY-MM-DD HH:MM, 24-hour; empty: now)
                  {/* Not datetime-local: browsers show that in the reader's locale (often 12-hour) with no zone, under a UTC label. */}
                  <input
                    name="send_at"
                    type="text"
                    inputmode="numeric"
                    autocomplete="off"
                    pattern={SEND_AT_PATTERN}
                    placeholder={formatTime(new Date(now.getTime() + 86_400_000).toISOString()).slice(0, 16)}
                  />
                </label>
                <button type="submit">Send or schedule</button>
              </form>
              <p class="hint" data-testid="utc-now">
                It is {formatTime(now.toISOString()).slice(0, 16)} UTC now; at most {MAX_SCHEDULE_DAYS} days ahead.
              </p>
              <form method="post" action={`/dashboard/campaigns/${campaign.id}/test`} class="inline">
                <Csrf token={csrfToken} />
                {contact ? <input type="hidden" name="contact" value={contact.id} /> : null}
                <label>
                  Test send to
                  <input name="to" type="email" required placeholder="you@example.com" />
                </label>
                <button type="submit" class="secondary">
                  Send a test
                </button>
              </form>
            </section>
          </>
        ) : (
          <section class="card">
            <h2>Content</h2>
            <dl class="facts">
              <dt>Sender</dt>
              <dd>{options.senders.find((sender) => sender.id === campaign.senderId)?.email ?? "—"}</dd>
              <dt>Lists</dt>
              <dd>{namesOf(options.lists, campaign.lists)}</dd>
              <dt>Segments</dt>
              <dd>{namesOf(options.segments, campaign.segments)}</dd>
              <dt>Excluded lists</dt>
              <dd>{namesOf(options.lists, campaign.excludeLists)}</dd>
              <dt>{templated ? "Subject template" : "Subject"}</dt>
              <dd data-testid="subject">
                {templated ? <code>{resolved.subject}</code> : (resolved.subject ?? "—")}
                {example && contact ? (
                  <div class="hint" data-testid="subject-example">
                    Filled in for {contact.email}: “{example.subject}”
                  </div>
                ) : null}
              </dd>
              <dt>Credits reserved</dt>
              <dd>{campaign.creditsReserved}</dd>
            </dl>
          </section>
        )}
        {report ? <Report report={report} counters={counters.get(campaign.id)!} /> : null}
        <a href="/dashboard/campaigns">← Campaigns</a>
      </Shell>,
    );
  })
  .get("/campaigns/:id/progress", async (c) => {
    const campaign = await ownedCampaign(c);
    const counters = await campaignCounters(c.var.ctx.db, [campaign.id]);
    return c.html(<CampaignProgress campaign={campaign} counters={counters.get(campaign.id)!} />);
  })
  .get("/campaigns/:id/preview", async (c) => {
    const campaign = await withTemplate(c.var.ctx.db, await ownedCampaign(c));
    const contact = await previewContact(c.var.ctx.db, campaign, c.req.query("contact"));
    // The message as this contact would get it (placeholders filled, unsubscribe link), shown to the campaign's author
    // in a sandboxed frame: no script runs, no request leaves but images.
    const rendered = contact
      ? await renderCampaignMessage(c.env, { messageId: `preview_${campaign.id}`, tag: tagOf(c.var.ctx.db) }, { campaign, contact })
      : undefined;
    const body = rendered
      ? (rendered.html ?? `<pre>${escapeHtml(rendered.text ?? "")}</pre>`)
      : (campaign.html ?? `<pre>${escapeHtml(campaign.text ?? "")}</pre>`);
    const subject = rendered?.subject ?? campaign.subject ?? "";
    c.header("Content-Security-Policy", framedMailCsp({ remoteImages: true }));
    c.header("X-Frame-Options", "SAMEORIGIN");
    return c.body(`<p style="font:14px sans-serif;color:#374151"><b>Subject:</b> ${escapeHtml(subject)}</p><hr>${body}`, 200, {
      "Content-Type": "text/html; charset=utf-8",
    });
  })
  .post("/campaigns/:id", liveKeyOnly("Changing a campaign"), async (c) => {
    const saved = await ownedCampaign(c);
    const change = editorBody(await c.req.parseBody({ all: true }), saved);
    // Nothing changed: nothing to write (the API's PATCH would refuse an empty body).
    if (Object.keys(change).length === 0) return c.redirect(`/dashboard/campaigns/${saved.id}`, 303);
    const body = parsedOrThrow(campaignChangeInput, change, "The campaign cannot be saved");
    const campaign = savedOrThrow(await updateDraft(c.var.ctx.db, c.get("auth").account.id, saved.id, campaignFields(body)));
    return c.redirect(`/dashboard/campaigns/${campaign.id}`, 303);
  })
  // A test send is a message through POST /send's pipeline: it needs what /send needs.
  .post("/campaigns/:id/test", liveKeyOnly("Sending a test"), needs("test_email", "email_api", "smtp_relay"), async (c) => {
    const auth = c.get("auth");
    const form = await c.req.parseBody();
    const to = parseMailbox(field(form, "to"));
    if (!to.ok) throw validationError({ to: [to.error] });
    const campaign = await withTemplate(c.var.ctx.db, await ownedCampaign(c));
    const from = await testSender(c.var.ctx.db, campaign);
    const contact = await previewContact(c.var.ctx.db, campaign, field(form, "contact") || undefined);
    if (!contact) throw validationError({ to: ["A test is filled in for one of your contacts: add a contact first"] }, "The test cannot be sent");
    // Rendered here for the previewed contact; its unsubscribe link names this test, not a message of the campaign.
    const rendered = await renderCampaignMessage(c.env, { messageId: `test_${campaign.id}`, tag: tagOf(c.var.ctx.db) }, { campaign, contact });
    const outcome = await acceptMessage(
      c.var.ctx,
      { account: auth.account, testMode: auth.apiKey.mode === "test" },
      {
        source: "api",
        // A test goes to the marketer's own address: the broadcast audience's unsubscribes are not about it.
        stream: "transactional",
        from,
        recipients: [to.mailbox.address],
        tags: ["campaign-test"],
        metadata: { campaign_id: campaign.id },
        compose: () => ({
          subject: `[Test] ${rendered.subject}`,
          content: { kind: "compose", to: [to.mailbox.address], html: rendered.html, text: rendered.text, variables: {}, attachments: [] },
        }),
      },
    );
    if (outcome.kind !== "accepted") throw acceptRefusalError(outcome);
    return c.redirect(`/dashboard/campaigns/${campaign.id}?tested=${encodeURIComponent(to.mailbox.address)}`, 303);
  })
  .post("/campaigns/:id/send", liveKeyOnly("Sending a campaign"), async (c) => {
    const when = field(await c.req.parseBody(), "send_at").trim();
    const time = new RegExp(`^${SEND_AT_PATTERN}$`).exec(when);
    if (when && !time)
      throw validationError(
        { send_at: ["Write the time in UTC as YYYY-MM-DD HH:MM, 24-hour: 2026-12-01 14:30"] },
        "The campaign cannot be scheduled",
      );
    // The form says UTC; sendCampaign checks the time (a real one, ahead, not too far), as it does for the API.
    const sendAt = time ? new Date(`${time[1]}T${time[2]}:00Z`) : undefined;
    const outcome = await sendCampaign(c.var.ctx, c.get("auth").account.id, c.req.param("id"), sendAt);
    if (outcome.kind !== "started") throw sendRefusal(outcome);
    return c.redirect(`/dashboard/campaigns/${outcome.campaign.id}${outcome.campaign.status === "scheduled" ? "?scheduled=1" : ""}`, 303);
  })
  .post("/campaigns/:id/cancel", liveKeyOnly("Cancelling a campaign"), async (c) => {
    const outcome = await cancelCampaign(c.var.ctx, c.get("auth").account.id, c.req.param("id"));
    if (outcome.kind === "not_found") throw notFound("Campaign");
    if (outcome.kind === "not_cancellable")
      throw new AppError("conflict", `The campaign is ${outcome.status}; only a scheduled or sending campaign can be cancelled`);
    return c.redirect(`/dashboard/campaigns/${outcome.campaign.id}`, 303);
  });
