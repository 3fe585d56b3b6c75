import { Hono, type Context } from "hono";
import { audienceWhere, countAudience } from "../../domain/campaigns/audience";
import {
  campaignCounters,
  cancelCampaign,
  createCampaign,
  findCampaign,
  listCampaigns,
  MAX_SCHEDULE_DAYS,
  segmentConditions,
  sendCampaign,
  updateDraft,
  type CampaignInput,
  campaignOutcome,
  type CampaignCounters,
  type CampaignRow,
  type SaveOutcome,
} from "../../domain/campaigns/campaigns";
import { createSender, listSenders, type SenderRow } from "../../domain/campaigns/senders";
import { listLists, type ListWithCounts } from "../../domain/contacts/lists";
import { campaignReport } from "../../domain/reports/reports";
import { AppError, notFound } from "../../errors";
import { describeErrors, field, requireLiveKey, requireSection } from "../guard";
import { Csrf, Empty, Notice, Progress, Shell, StatusBadge, formatTime, percent } from "../layout";
import type { DashboardEnv } from "../session";

type Page = Context<DashboardEnv>;

function guard(c: Page, change?: string) {
  requireSection(c, "campaigns", "campaigns");
  if (change) requireLiveKey(c, change);
}

/** The draft fields of the editor form; ids the account does not own are refused by the domain's reference check. */
function draftInput(
  form: Record<string, string | File | (string | File)[]>,
): Omit<CampaignInput, "templateId" | "variables" | "segments" | "trackOpens" | "trackClicks"> {
  const text = (name: string) => {
    const value = form[name];
    return typeof value === "string" && value.trim() !== "" ? value : null;
  };
  const lists = ([] as unknown[]).concat(form.lists ?? []).filter((value): value is string => typeof value === "string" && value !== "");
  const tags = (text("tags") ?? "")
    .split(",")
    .map((tag) => tag.trim())
    .filter(Boolean);
  return {
    name: (text("name") ?? "").trim(),
    senderId: text("sender_id"),
    subject: text("subject")?.trim() ?? null,
    preheader: text("preheader")?.trim() ?? null,
    html: text("html"),
    text: text("text"),
    tags,
    lists,
    excludeLists: [],
  };
}

function savedOrThrow(outcome: SaveOutcome): CampaignRow {
  if (outcome.kind === "saved") return outcome.campaign;
  if (outcome.kind === "invalid") throw new AppError("validation_failed", `The campaign cannot be saved: ${describeErrors(outcome.errors)}`);
  if (outcome.kind === "not_draft") throw new AppError("campaign_not_draft", `The campaign is ${outcome.status}; only a draft can be changed`);
  throw notFound("Campaign");
}

function Editor({
  campaign,
  senders,
  lists,
  csrfToken,
}: {
  campaign?: CampaignRow;
  senders: SenderRow[];
  lists: ListWithCounts[];
  csrfToken: string;
}) {
  const action = campaign ? `/dashboard/campaigns/${campaign.id}` : "/dashboard/campaigns";
  return (
    <form method="post" action={action} class="stack">
      <Csrf token={csrfToken} />
      <label for="cmp-name">Name (internal)</label>
      <input id="cmp-name" name="name" type="text" required maxlength={200} value={campaign?.name ?? ""} />
      <label for="cmp-sender">Sender</label>
      <select id="cmp-sender" name="sender_id">
        <option value="">choose later</option>
        {senders.map((sender) => (
          <option value={sender.id} selected={campaign?.senderId === sender.id}>
            {sender.name} &lt;{sender.email}&gt;
          </option>
        ))}
      </select>
      <fieldset>
        <legend>Lists</legend>
        {lists.length === 0 ? <span class="hint">No lists yet: create one on the Contacts page.</span> : null}
        {lists.map((list) => (
          <label>
            <input type="checkbox" name="lists" value={list.id} checked={campaign?.lists.includes(list.id)} /> {list.name} ({list.subscriberCount})
          </label>
        ))}
      </fieldset>
      <label for="cmp-subject">Subject</label>
      <input id="cmp-subject" name="subject" type="text" maxlength={998} value={campaign?.subject ?? ""} />
      <label for="cmp-preheader">Preheader</label>
      <input id="cmp-preheader" name="preheader" type="text" maxlength={500} value={campaign?.preheader ?? ""} />
      <label for="cmp-html">HTML body ({"{{first_name}}"} and other contact fields are filled in per recipient)</label>
      <textarea id="cmp-html" name="html">
        {campaign?.html ?? ""}
      </textarea>
      <label for="cmp-text">Text body</label>
      <textarea id="cmp-text" name="text">
        {campaign?.text ?? ""}
      </textarea>
      <label for="cmp-tags">Tags (comma separated)</label>
      <input id="cmp-tags" name="tags" type="text" value={campaign?.tags.join(", ") ?? ""} />
      <button type="submit">{campaign ? "Save draft" : "Create draft"}</button>
    </form>
  );
}

const outcomeLabels = { delivered: "delivered", partially_delivered: "partly delivered", undelivered: "undelivered" } as const;

/** A finished campaign's outcome beside its status, so a campaign nobody received never reads as a plain success. */
function OutcomeBadge({ outcome }: { outcome: keyof typeof outcomeLabels }) {
  const tone = outcome === "delivered" ? "ok" : outcome === "undelivered" ? "bad" : "warn";
  return <span class={`badge ${tone}`}>{outcomeLabels[outcome]}</span>;
}

function OutcomeSummary({ counters }: { counters: CampaignCounters }) {
  const accepted = counters.sent - counters.hard_bounces - counters.failed;
  return (
    <p class="outcome">
      {accepted} of {counters.recipients - counters.cancelled} recipients accepted: {counters.hard_bounces} bounced, {counters.failed} failed,{" "}
      {counters.suppressed} suppressed.
    </p>
  );
}

const inFlight = (campaign: CampaignRow) => campaign.status === "scheduled" || campaign.status === "sending";

function CampaignProgress({ campaign, counters }: { campaign: CampaignRow; counters: CampaignCounters }) {
  const finished = counters.recipients - counters.pending;
  const outcome = campaignOutcome(campaign, counters);
  return (
    <div
      id="campaign-progress"
      hx-get={inFlight(campaign) ? `/dashboard/campaigns/${campaign.id}/progress` : undefined}
      hx-trigger={inFlight(campaign) ? "every 2s" : undefined}
      hx-swap="outerHTML"
      aria-live="polite"
    >
      <p>
        <StatusBadge status={campaign.status} />
        {campaign.status === "scheduled" ? ` for ${formatTime(campaign.sendAt)}` : ""}
        {outcome ? <OutcomeBadge outcome={outcome} /> : null}
      </p>
      {outcome ? <OutcomeSummary counters={counters} /> : null}
      {campaign.status === "draft" ? null : (
        <>
          <Progress label="Campaign sending" done={finished} total={Math.max(campaign.creditsReserved, counters.recipients)} />
          <dl class="counts">
            <div>
              <dt>Sent</dt>
              <dd>{counters.sent}</dd>
            </div>
            <div>
              <dt>Delivered</dt>
              <dd>{counters.delivered}</dd>
            </div>
            <div>
              <dt>Bounced</dt>
              <dd>{counters.hard_bounces}</dd>
            </div>
            <div>
              <dt>Failed</dt>
              <dd>{counters.failed}</dd>
            </div>
            <div>
              <dt>Opened</dt>
              <dd>{counters.unique_opens}</dd>
            </div>
            <div>
              <dt>Clicked</dt>
              <dd>{counters.unique_clicks}</dd>
            </div>
          </dl>
        </>
      )}
      {campaign.error ? <Notice kind="error">{campaign.error}</Notice> : null}
    </div>
  );
}

function ListedOutcome({ campaign, counters }: { campaign: CampaignRow; counters: CampaignCounters | undefined }) {
  const outcome = counters ? campaignOutcome(campaign, counters) : null;
  return outcome && outcome !== "delivered" ? <OutcomeBadge outcome={outcome} /> : null;
}

async function audienceOf(env: Env, campaign: CampaignRow): Promise<number> {
  if (campaign.lists.length === 0 && campaign.segments.length === 0) return 0;
  return countAudience(env.DB, audienceWhere(campaign, await segmentConditions(env.DB, campaign)));
}

async function ownedCampaign(c: Page): Promise<CampaignRow> {
  const campaign = await findCampaign(c.env.DB, c.get("auth").account.id, c.req.param("id") ?? "");
  if (!campaign) throw notFound("Campaign");
  return campaign;
}

export const campaignPages = new Hono<DashboardEnv>()
  .get("/campaigns", async (c) => {
    guard(c);
    const auth = c.get("auth");
    const [rows, senders, lists] = await Promise.all([
      listCampaigns(c.env.DB, auth.account.id, { limit: 50 }),
      listSenders(c.env.DB, auth.account.id, { limit: 100 }),
      listLists(c.env.DB, auth.account.id, { limit: 100 }),
    ]);
    const page = rows.slice(0, 50);
    const counters = await campaignCounters(
      c.env.DB,
      page.map((row) => row.id),
    );
    return c.html(
      <Shell title="Campaigns" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/campaigns">
        <section class="card">
          <h2>Campaigns</h2>
          {page.length === 0 ? (
            <Empty>No campaigns yet. Create a draft below; nothing is sent until you send or schedule it.</Empty>
          ) : (
            <div class="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Status</th>
                    <th scope="col">Recipients</th>
                    <th scope="col">Opened</th>
                    <th scope="col">Updated</th>
                  </tr>
                </thead>
                <tbody>
                  {page.map((campaign) => (
                    <tr>
                      <td>
                        <a href={`/dashboard/campaigns/${campaign.id}`}>{campaign.name}</a>
                      </td>
                      <td>
                        <StatusBadge status={campaign.status} />
                        <ListedOutcome campaign={campaign} counters={counters.get(campaign.id)} />
                      </td>
                      <td>{counters.get(campaign.id)?.recipients ?? 0}</td>
                      <td>{counters.get(campaign.id)?.unique_opens ?? 0}</td>
                      <td>{formatTime(campaign.updatedAt)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </section>
        <div class="grid two">
          <section class="card">
            <h2>New draft</h2>
            <Editor senders={senders} lists={lists} csrfToken={c.get("csrfToken")} />
          </section>
          <section class="card">
            <h2>Senders</h2>
            {senders.length === 0 ? (
              <Empty>No senders yet. A sender is a name and an address on a verified domain.</Empty>
            ) : (
              <ul>
                {senders.map((sender) => (
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
  .post("/campaigns/senders", async (c) => {
    guard(c, "Adding a sender");
    const form = await c.req.parseBody();
    const name = field(form, "name");
    if (!name) throw new AppError("validation_failed", "Give the sender a name");
    const outcome = await createSender(c.env.DB, c.get("auth").account.id, { name, email: field(form, "email"), replyTo: null });
    if (outcome.kind === "invalid_email") throw new AppError("validation_failed", outcome.error);
    if (outcome.kind === "domain_not_verified")
      throw new AppError("domain_not_verified", `The domain ${outcome.domain} is not verified in this account`);
    return c.redirect("/dashboard/campaigns", 303);
  })
  .post("/campaigns", async (c) => {
    guard(c, "Creating a campaign");
    const input = draftInput(await c.req.parseBody({ all: true }));
    if (!input.name) throw new AppError("validation_failed", "Give the campaign a name");
    const campaign = savedOrThrow(
      await createCampaign(c.env.DB, c.get("auth").account.id, {
        ...input,
        templateId: null,
        variables: {},
        segments: [],
        trackOpens: true,
        trackClicks: true,
      }),
    );
    return c.redirect(`/dashboard/campaigns/${campaign.id}`, 303);
  })
  .get("/campaigns/:id", async (c) => {
    guard(c);
    const auth = c.get("auth");
    const campaign = await ownedCampaign(c);
    const [counters, senders, lists, audience, report] = await Promise.all([
      campaignCounters(c.env.DB, [campaign.id]),
      listSenders(c.env.DB, auth.account.id, { limit: 100 }),
      listLists(c.env.DB, auth.account.id, { limit: 100 }),
      audienceOf(c.env, campaign),
      campaign.status === "draft" ? undefined : campaignReport(c.env.DB, campaign.id),
    ]);
    const csrfToken = c.get("csrfToken");
    const maxDate = new Date(Date.now() + MAX_SCHEDULE_DAYS * 86_400_000).toISOString().slice(0, 16);
    return c.html(
      <Shell title={campaign.name} auth={auth} csrfToken={csrfToken} current="/dashboard/campaigns">
        {c.req.query("scheduled") ? <Notice kind="ok">Campaign scheduled; credits for its audience are reserved.</Notice> : null}
        <section class="card">
          <h2>Status</h2>
          <CampaignProgress campaign={campaign} counters={counters.get(campaign.id)!} />
          {inFlight(campaign) ? (
            <form method="post" action={`/dashboard/campaigns/${campaign.id}/cancel`}>
              <Csrf token={csrfToken} />
              <button type="submit" class="danger">
                Cancel campaign
              </button>
            </form>
          ) : null}
        </section>
        {campaign.status === "draft" ? (
          <>
            <section class="card">
              <h2>Send or schedule</h2>
              <p data-testid="audience">
                Audience: <strong>{audience.toLocaleString("en")}</strong> subscribed contacts (each costs one sending credit, reserved when you
                send).
              </p>
              <form method="post" action={`/dashboard/campaigns/${campaign.id}/send`} class="inline">
                <Csrf token={csrfToken} />
                <label>
                  Send at (UTC; empty: now)
                  <input name="send_at" type="datetime-local" max={maxDate} />
                </label>
                <button type="submit">Send or schedule</button>
              </form>
            </section>
            <div class="grid two">
              <section class="card">
                <h2>Edit draft</h2>
                <Editor campaign={campaign} senders={senders} lists={lists} csrfToken={csrfToken} />
              </section>
              <section class="card">
                <h2>Preview</h2>
                <p class="hint">Subject: {campaign.subject ?? "(none yet)"}</p>
                {campaign.html ? (
                  <iframe class="preview" title="HTML preview" sandbox="" src={`/dashboard/campaigns/${campaign.id}/preview`} />
                ) : campaign.text ? (
                  <pre class="card">{campaign.text}</pre>
                ) : (
                  <Empty>No content yet.</Empty>
                )}
              </section>
            </div>
          </>
        ) : (
          <section class="card">
            <h2>Content</h2>
            <dl class="facts">
              <dt>Sender</dt>
              <dd>{senders.find((sender) => sender.id === campaign.senderId)?.email ?? "—"}</dd>
              <dt>Lists</dt>
              <dd>
                {lists
                  .filter((list) => campaign.lists.includes(list.id))
                  .map((list) => list.name)
                  .join(", ") || "—"}
              </dd>
              <dt>Subject</dt>
              <dd>{campaign.subject ?? "—"}</dd>
              <dt>Credits reserved</dt>
              <dd>{campaign.creditsReserved}</dd>
            </dl>
          </section>
        )}
        {report ? (
          <section class="card">
            <h2>Report</h2>
            <dl class="counts">
              <div>
                <dt>Delivery rate</dt>
                <dd>{percent(report.rates.delivery_rate)}</dd>
              </div>
              <div>
                <dt>Open rate</dt>
                <dd>{percent(report.rates.open_rate)}</dd>
              </div>
              <div>
                <dt>Click rate</dt>
                <dd>{percent(report.rates.click_rate)}</dd>
              </div>
              <div>
                <dt>Unsubscribes</dt>
                <dd>{report.totals.unsubscribes}</dd>
              </div>
              <div>
                <dt>Complaints</dt>
                <dd>{report.totals.complaints}</dd>
              </div>
            </dl>
            <h3>Link clicks</h3>
            {report.links.length === 0 ? (
              <Empty>No tracked link has been clicked yet.</Empty>
            ) : (
              <div class="table-wrap">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Link</th>
                      <th scope="col">Clicks</th>
                      <th scope="col">Unique</th>
                    </tr>
                  </thead>
                  <tbody>
                    {report.links.map((link) => (
                      <tr>
                        <td>
                          <code>{link.url}</code>
                        </td>
                        <td>{link.clicks}</td>
                        <td>{link.unique_clicks}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </section>
        ) : null}
        <a href="/dashboard/campaigns">← Campaigns</a>
      </Shell>,
    );
  })
  .get("/campaigns/:id/progress", async (c) => {
    guard(c);
    const campaign = await ownedCampaign(c);
    const counters = await campaignCounters(c.env.DB, [campaign.id]);
    return c.html(<CampaignProgress campaign={campaign} counters={counters.get(campaign.id)!} />);
  })
  .get("/campaigns/:id/preview", async (c) => {
    guard(c);
    const campaign = await ownedCampaign(c);
    // The campaign's own HTML, shown to its author in a sandboxed frame: no script runs, no request leaves but images.
    c.header("Content-Security-Policy", "sandbox; default-src 'none'; img-src https: data:; style-src 'unsafe-inline'; frame-ancestors 'self'");
    c.header("X-Frame-Options", "SAMEORIGIN");
    return c.body(campaign.html ?? "", 200, { "Content-Type": "text/html; charset=utf-8" });
  })
  .post("/campaigns/:id", async (c) => {
    guard(c, "Changing a campaign");
    const input = draftInput(await c.req.parseBody({ all: true }));
    if (!input.name) throw new AppError("validation_failed", "Give the campaign a name");
    const campaign = savedOrThrow(await updateDraft(c.env.DB, c.get("auth").account.id, c.req.param("id"), input));
    return c.redirect(`/dashboard/campaigns/${campaign.id}`, 303);
  })
  .post("/campaigns/:id/send", async (c) => {
    guard(c, "Sending a campaign");
    const when = field(await c.req.parseBody(), "send_at");
    let sendAt: Date | undefined;
    if (when) {
      // datetime-local has no zone; the form says UTC.
      sendAt = new Date(`${when}${when.length === 16 ? ":00" : ""}Z`);
      const ahead = sendAt.getTime() - Date.now();
      if (Number.isNaN(ahead) || ahead <= 0) throw new AppError("validation_failed", "The send time must be in the future");
      if (ahead > MAX_SCHEDULE_DAYS * 86_400_000) throw new AppError("validation_failed", `Schedule at most ${MAX_SCHEDULE_DAYS} days ahead`);
    }
    const outcome = await sendCampaign(c.env, c.get("auth").account.id, c.req.param("id"), sendAt);
    switch (outcome.kind) {
      case "not_found":
        throw notFound("Campaign");
      case "not_draft":
        throw new AppError("campaign_not_draft", `The campaign is ${outcome.status}; only a draft can be sent`);
      case "invalid":
        throw new AppError("validation_failed", `The campaign cannot be sent: ${describeErrors(outcome.errors)}`);
      case "insufficient_credits":
        throw new AppError("insufficient_credits", `Not enough sending credits: the audience is ${outcome.needed}, ${outcome.available} available`);
      case "unavailable":
        throw new AppError("upstream_unavailable", "The campaign could not be started; it failed and its credits were released");
      case "started":
        return c.redirect(`/dashboard/campaigns/${outcome.campaign.id}${outcome.campaign.status === "scheduled" ? "?scheduled=1" : ""}`, 303);
    }
  })
  .post("/campaigns/:id/cancel", async (c) => {
    guard(c, "Cancelling a campaign");
    const outcome = await cancelCampaign(c.env, c.get("auth").account.id, c.req.param("id"));
    if (outcome.kind === "not_found") throw notFound("Campaign");
    if (outcome.kind === "not_cancellable")
      throw new AppError("conflict", `The campaign is ${outcome.status}; only a scheduled or sending campaign can be cancelled`);
    return c.redirect(`/dashboard/campaigns/${outcome.campaign.id}`, 303);
  });
