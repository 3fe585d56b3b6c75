import type { SQL } from "drizzle-orm";
import { Hono, type Context } from "hono";
// The API's request schemas and mappings, so the editor accepts exactly what PATCH /campaigns/{id} accepts.
import { savedOrThrow, sendRefusal } from "../../http/campaigns";
import { campaignChangeInput, campaignFields, campaignInput, newCampaignFields, senderInput } from "../../domain/campaigns/input";
import { audiencePage, audienceWhere, countAudience, type Audience } from "../../domain/campaigns/audience";
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
  type CampaignRow,
} from "../../domain/campaigns/campaigns";
import { campaignOutcome, type CampaignCounters } from "../../domain/campaigns/lifecycle";
import { renderCampaignMessage } from "../../domain/campaigns/delivery";
import { contactChecksNeeded } from "../../domain/contacts/verify";
import { listSegments, type SegmentRow } from "../../domain/segments/segments";
import { createSender, findSender, listSenders, type SenderRow } from "../../domain/campaigns/senders";
import { findContact, listContacts, type ContactRow } from "../../domain/contacts/contacts";
import { listLists, type ListWithCounts } from "../../domain/contacts/lists";
import { campaignReport, type CampaignReport } from "../../domain/reports/reports";
import { acceptMessage } from "../../domain/sending/accept";
import { parseMailbox } from "../../domain/sending/addresses";
import { escapeHtml, placeholderNames } from "../../domain/sending/render";
import { findTemplate, listTemplates, type TemplateRow } from "../../domain/templates/templates";
import { AppError, notFound, validationError, type FieldErrors } from "../../errors";
import { acceptRefusalError, orRefuse } from "../../http/refusals";
import { field, liveKeyOnly, needs, parsedOrThrow } from "../guard";
import { PostButton } from "../components/post-button";
import { Table } from "../components/table";
import { Csrf, Empty, Notice, Progress, Shell, StatusBadge, formatTime, framedMailCsp, percent } from "../layout";
import { allTopics, type TopicRow } from "../../domain/topics/topics";
import type { DashboardEnv } from "../session";

type Page = Context<DashboardEnv>;

type Form = Record<string, string | File | (string | File)[]>;

const strings = (form: Form, name: string) =>
  ([] as unknown[]).concat(form[name] ?? []).filter((value): value is string => typeof value === "string");
/** A text field as the API takes it: absent stays absent, empty is null. */
const nullable = (form: Form, name: string) => {
  const value = form[name];
  if (typeof value !== "string") return undefined;
  return value.trim() === "" ? null : value;
};
/** Browsers send a textarea with CRLF line ends and drop one leading newline: equal after that is unchanged. */
const sameText = (a: string | null, b: string | null) =>
  (a ?? "").replace(/\r\n?/g, "\n").replace(/^\n/, "") === (b ?? "").replace(/\r\n?/g, "\n").replace(/^\n/, "");

/**
 * Ids chosen with checkboxes: only the ids the form offered (`<name>_offered`) can be added or removed, so ids it did
 * not show (lists past the first page, or a field the form has no control for) stay as saved.
 */
function chosenIds(form: Form, name: string, saved: string[] | undefined): string[] | undefined {
  const checked = strings(form, name).filter(Boolean);
  // Without the marker only a new draft takes the ids given (a form posted without the editor's markup).
  if (!(`${name}_offered` in form)) return saved === undefined && name in form ? [...new Set(checked)] : undefined;
  const offered = new Set(strings(form, `${name}_offered`));
  return [...new Set([...(saved ?? []).filter((id) => !offered.has(id)), ...checked])];
}

const textFields = {
  name: "name",
  subject: "subject",
  preheader: "preheader",
  html: "html",
  text: "text",
  sender_id: "senderId",
  template_id: "templateId",
  topic_id: "topicId",
} as const;
const idFields = { lists: "lists", segments: "segments", exclude_lists: "excludeLists" } as const;

/**
 * The request body the editor's form stands for, in the API's field names: only fields the form has, and on an
 * existing draft only those whose value differs from the saved one, so a save changes only what the person changed.
 */
function editorBody(form: Form, saved?: CampaignRow): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [name, key] of Object.entries(textFields)) {
    const value = name === "name" ? (typeof form.name === "string" ? form.name : undefined) : nullable(form, name);
    if (value === undefined || (saved && sameText(value, saved[key]))) continue;
    body[name] = value;
  }
  if (typeof form.tags === "string") {
    const tags = form.tags
      .split(",")
      .map((tag) => tag.trim())
      .filter(Boolean);
    if (!saved || tags.join(",") !== saved.tags.join(",")) body.tags = tags;
  }
  if (typeof form.verification === "string" && form.verification !== saved?.verification) body.verification = form.verification;
  for (const [name, key] of Object.entries(idFields)) {
    const ids = chosenIds(form, name, saved?.[key]);
    if (ids === undefined) continue;
    if (saved && ids.length === saved[key].length && ids.every((id) => saved[key].includes(id))) continue;
    body[name] = ids;
  }
  return body;
}

const verificationChoices = [
  ["off", "off: send to the whole audience"],
  ["skip_invalid", "skip invalid addresses"],
  ["valid_only", "send to valid addresses only"],
] as const;

type EditorOptions = { senders: SenderRow[]; lists: ListWithCounts[]; segments: SegmentRow[]; templates: TemplateRow[]; topics: TopicRow[] };

function IdChoices({
  name,
  legend,
  options,
  saved,
  empty,
}: {
  name: string;
  legend: string;
  options: { id: string; label: string }[];
  saved: string[];
  empty: string;
}) {
  const hidden = saved.filter((id) => !options.some((option) => option.id === id)).length;
  return (
    <fieldset>
      <legend>{legend}</legend>
      {options.length === 0 ? <span class="hint">{empty}</span> : null}
      {options.map((option) => (
        <label class="check">
          <input type="hidden" name={`${name}_offered`} value={option.id} />
          <input type="checkbox" name={name} value={option.id} checked={saved.includes(option.id)} /> {option.label}
        </label>
      ))}
      {hidden > 0 ? <span class="hint">{hidden} more chosen but not listed here; saving keeps them.</span> : null}
    </fieldset>
  );
}

function Editor({ campaign, options, csrfToken }: { campaign?: CampaignRow; options: EditorOptions; csrfToken: string }) {
  const action = campaign ? `/dashboard/campaigns/${campaign.id}` : "/dashboard/campaigns";
  const listOptions = options.lists.map((list) => ({ id: list.id, label: `${list.name} (${list.subscriberCount.toLocaleString("en")})` }));
  const audienceUrl = `/dashboard/campaigns/audience${campaign ? `?campaign=${campaign.id}` : ""}`;
  return (
    <form method="post" action={action} class="stack">
      <Csrf token={csrfToken} />
      <label for="cmp-name">Name (internal)</label>
      <input id="cmp-name" name="name" type="text" required maxlength={200} value={campaign?.name ?? ""} />
      <label for="cmp-sender">Sender</label>
      <select id="cmp-sender" name="sender_id">
        <option value="">choose later</option>
        {options.senders.map((sender) => (
          <option value={sender.id} selected={campaign?.senderId === sender.id}>
            {sender.name} &lt;{sender.email}&gt;
          </option>
        ))}
      </select>
      <div class="audience-controls" hx-get={audienceUrl} hx-trigger="change" hx-target="next .audience-count" hx-include="this" hx-swap="innerHTML">
        <IdChoices
          name="lists"
          legend="Lists"
          options={listOptions}
          saved={campaign?.lists ?? []}
          empty="No lists yet: create one on the Contacts page."
        />
        <IdChoices
          name="segments"
          legend="Segments"
          options={options.segments.map((segment) => ({ id: segment.id, label: segment.name }))}
          saved={campaign?.segments ?? []}
          empty="No segments yet: build one on the Segments page."
        />
        <IdChoices
          name="exclude_lists"
          legend="Exclude lists"
          options={listOptions}
          saved={campaign?.excludeLists ?? []}
          empty="No lists to exclude."
        />
        <label for="cmp-topic">Topic (only contacts subscribed to it; its unsubscribe link leaves that topic only)</label>
        <select id="cmp-topic" name="topic_id">
          <option value="">none: every subscribed contact; unsubscribing leaves all marketing</option>
          {options.topics.map((topic) => (
            <option value={topic.id} selected={campaign?.topicId === topic.id}>
              {topic.name}
            </option>
          ))}
        </select>
      </div>
      <p class="audience-count hint" aria-live="polite" data-testid="editor-audience">
        The audience is counted as you choose lists and segments.
      </p>
      <label for="cmp-verification">Verify addresses before sending (1 verification credit per address without a recent check)</label>
      <select id="cmp-verification" name="verification">
        {verificationChoices.map(([value, label]) => (
          <option value={value} selected={(campaign?.verification ?? "off") === value}>
            {label}
          </option>
        ))}
      </select>
      <label for="cmp-template">Template</label>
      <select id="cmp-template" name="template_id">
        <option value="">none: write the content below</option>
        {options.templates.map((template) => (
          <option value={template.id} selected={campaign?.templateId === template.id}>
            {template.name}
          </option>
        ))}
      </select>
      <label for="cmp-subject">Subject (empty: the template's)</label>
      <input id="cmp-subject" name="subject" type="text" maxlength={998} value={campaign?.subject ?? ""} />
      <label for="cmp-preheader">Preheader</label>
      <input id="cmp-preheader" name="preheader" type="text" maxlength={500} value={campaign?.preheader ?? ""} />
      <label for="cmp-html">HTML body, when no template is chosen ({"{{first_name}}"} and other contact fields are filled in per recipient)</label>
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

async function editorOptions(d1: D1Database, accountId: string): Promise<EditorOptions> {
  const [senders, lists, segments, templates, topics] = await Promise.all([
    listSenders(d1, accountId, { limit: 100 }),
    listLists(d1, accountId, { limit: 100 }),
    listSegments(d1, accountId, { limit: 100 }),
    listTemplates(d1, accountId, { limit: 100 }),
    allTopics(d1, accountId),
  ]);
  return {
    senders: senders.slice(0, 100),
    lists: lists.slice(0, 100),
    segments: segments.slice(0, 100),
    templates: templates.slice(0, 100),
    topics,
  };
}

/** The campaign as it would be sent: a template fills in what the campaign leaves empty, as sendCampaign does. */
async function withTemplate(d1: D1Database, campaign: CampaignRow): Promise<CampaignRow> {
  if (!campaign.templateId) return campaign;
  const template = await findTemplate(d1, campaign.accountId, campaign.templateId);
  if (!template) return campaign;
  return { ...campaign, subject: campaign.subject ?? template.subject, html: campaign.html ?? template.html, text: campaign.text ?? template.text };
}

/** The SQL condition selecting the campaign's audience, its segments read once. */
async function audienceSql(d1: D1Database, audience: Audience & Pick<CampaignRow, "segments">): Promise<SQL> {
  return audienceWhere(audience, await segmentConditions(d1, audience));
}

/**
 * The contact to preview for: the chosen one, else the first of the audience (`where`, when the caller has it
 * already), else the account's newest.
 */
async function previewContact(d1: D1Database, campaign: CampaignRow, chosen: string | undefined, where?: SQL): Promise<ContactRow | undefined> {
  if (chosen) {
    const contact = await findContact(d1, campaign.accountId, chosen);
    if (contact) return contact;
  }
  const [first] = await audiencePage(d1, where ?? (await audienceSql(d1, campaign)), "", 1);
  if (first) return findContact(d1, campaign.accountId, first.id);
  const newest = await listContacts(d1, campaign.accountId, {}, { limit: 1 });
  return newest.kind === "page" ? newest.rows[0] : undefined;
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

/** The schedule field: a date and a 24-hour time in UTC, as the dashboard shows times (`T` accepted too). */
const SEND_AT_PATTERN = "(\\d{4}-\\d{2}-\\d{2})[ T](\\d{2}:\\d{2})";

const inFlight = (campaign: CampaignRow) => campaign.status === "scheduled" || campaign.status === "sending";

function CampaignProgress({ campaign, counters }: { campaign: CampaignRow; counters: CampaignCounters }) {
  // Contacts the campaign's verification left out have no message, but are done with all the same.
  const skipped = counters.skipped.invalid + counters.skipped.risky + counters.skipped.unknown;
  const finished = counters.recipients - counters.pending + skipped;
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
          <Progress label="Campaign sending" done={finished} total={Math.max(campaign.creditsReserved, counters.recipients + skipped)} />
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
            {campaign.verification === "off" ? null : (
              <div>
                <dt>Skipped by verification</dt>
                <dd data-testid="skipped">
                  {counters.skipped.invalid} invalid, {counters.skipped.risky} risky, {counters.skipped.unknown} unknown
                </dd>
              </div>
            )}
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

/** How many contacts the audience has; `where` is its condition (`audienceSql`). */
async function audienceOf(d1: D1Database, audience: Pick<CampaignRow, "lists" | "segments">, where: SQL): Promise<number> {
  if (audience.lists.length === 0 && audience.segments.length === 0) return 0;
  return countAudience(d1, where);
}

/** Each draft's audience as the editor counts it: a draft has no recipients of its own until it is sent. */
async function draftAudiences(d1: D1Database, campaigns: CampaignRow[]): Promise<Map<string, number>> {
  const drafts = campaigns.filter((campaign) => campaign.status === "draft");
  return new Map(await Promise.all(drafts.map(async (draft) => [draft.id, await audienceOf(d1, draft, await audienceSql(d1, draft))] as const)));
}

/**
 * A campaign's recipients in the list: a draft's audience if sent now, a scheduled campaign's as counted when it was
 * scheduled (its recipients are made when it starts), else the recipients it was sent to.
 */
function ListedRecipients({
  campaign,
  counters,
  audience,
}: {
  campaign: CampaignRow;
  counters: CampaignCounters | undefined;
  audience: number | undefined;
}) {
  if (campaign.status === "draft") {
    return (
      <>
        {(audience ?? 0).toLocaleString("en")} <span class="hint">if sent now</span>
      </>
    );
  }
  if (campaign.status === "scheduled") {
    return (
      <>
        {campaign.creditsReserved.toLocaleString("en")} <span class="hint">when scheduled</span>
      </>
    );
  }
  return <>{(counters?.recipients ?? 0).toLocaleString("en")}</>;
}

const namesOf = (rows: { id: string; name: string }[], ids: string[]) =>
  rows
    .filter((row) => ids.includes(row.id))
    .map((row) => row.name)
    .join(", ") || "—";

/** What a test send needs that a draft may still lack: a sender and some content (the full checks run at send). */
async function testSender(d1: D1Database, campaign: CampaignRow): Promise<{ name: string; address: string }> {
  const sender = campaign.senderId ? await findSender(d1, campaign.accountId, campaign.senderId) : undefined;
  const errors: FieldErrors = {};
  if (!sender) errors.sender_id = ["Choose a sender first"];
  if (campaign.html === null && campaign.text === null) errors.html = ["Write the content or choose a template first"];
  if (!campaign.subject) errors.subject = ["Give a subject first"];
  if (!sender || Object.keys(errors).length > 0) throw validationError(errors, "The test cannot be sent");
  return { name: sender.name, address: sender.email };
}

/** The sent campaign's outcome at a glance: each figure with its share of the recipients, then its links by clicks. */
function Report({ report, counters }: { report: CampaignReport; counters: CampaignCounters }) {
  const base = Math.max(counters.recipients, 1);
  const figures: [string, number][] = [
    ["Delivered", counters.delivered],
    ["Bounced", counters.hard_bounces],
    ["Opened", counters.unique_opens],
    ["Clicked", counters.unique_clicks],
    ["Unsubscribed", counters.unsubscribes],
    ["Complained", counters.complaints],
  ];
  return (
    <section class="card">
      <h2>Report</h2>
      <dl class="counts" data-testid="report">
        {figures.map(([label, value]) => (
          <div>
            <dt>{label}</dt>
            <dd>
              {value.toLocaleString("en")} <span class="hint">{percent(value / base)}</span>
            </dd>
          </div>
        ))}
      </dl>
      <h3>Links</h3>
      <Table
        head={["Link", "Clicks", "Unique"]}
        rows={report.links}
        empty="No tracked link has been clicked yet."
        row={(link) => (
          <tr>
            <td class="wrap">
              <code>{link.url}</code>
            </td>
            <td>{link.clicks}</td>
            <td>{link.unique_clicks}</td>
          </tr>
        )}
      />
    </section>
  );
}

async function ownedCampaign(c: Page): Promise<CampaignRow> {
  const campaign = await findCampaign(c.env.DB, c.get("auth").account.id, c.req.param("id") ?? "");
  if (!campaign) throw notFound("Campaign");
  return campaign;
}

export const campaignPages = new Hono<DashboardEnv>()
  .get("/campaigns", async (c) => {
    const auth = c.get("auth");
    const [rows, options] = await Promise.all([listCampaigns(c.env.DB, auth.account.id, { limit: 50 }), editorOptions(c.env.DB, auth.account.id)]);
    const page = rows.slice(0, 50);
    const [counters, audiences] = await Promise.all([
      campaignCounters(
        c.env.DB,
        page.map((row) => row.id),
      ),
      draftAudiences(c.env.DB, page),
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
    orRefuse(await createSender(c.env.DB, c.get("auth").account.id, { name: body.name, email: body.email, replyTo: null }));
    return c.redirect("/dashboard/campaigns", 303);
  })
  // The live count beside the editor's audience controls (htmx): the audience the checked lists and segments give.
  .get("/campaigns/audience", async (c) => {
    const accountId = c.get("auth").account.id;
    const saved = c.req.query("campaign") ? await findCampaign(c.env.DB, accountId, c.req.query("campaign") ?? "") : undefined;
    const query = c.req.queries();
    const form: Form = Object.fromEntries(Object.entries(query).map(([name, values]) => [name, values]));
    const audience = {
      accountId,
      lists: chosenIds(form, "lists", saved?.lists) ?? saved?.lists ?? [],
      segments: chosenIds(form, "segments", saved?.segments) ?? saved?.segments ?? [],
      excludeLists: chosenIds(form, "exclude_lists", saved?.excludeLists) ?? saved?.excludeLists ?? [],
      topicId: (query.topic_id ? query.topic_id[0] : saved?.topicId) || null,
    };
    const total = await audienceOf(c.env.DB, audience, await audienceSql(c.env.DB, audience));
    return c.html(
      <>
        Audience: <strong>{total.toLocaleString("en")}</strong> subscribed contacts
      </>,
    );
  })
  .post("/campaigns", liveKeyOnly("Creating a campaign"), async (c) => {
    const body = parsedOrThrow(campaignInput, editorBody(await c.req.parseBody({ all: true })), "The campaign cannot be saved");
    const campaign = savedOrThrow(await createCampaign(c.env.DB, c.get("auth").account.id, newCampaignFields(body)));
    return c.redirect(`/dashboard/campaigns/${campaign.id}`, 303);
  })
  .get("/campaigns/:id", async (c) => {
    const auth = c.get("auth");
    const campaign = await ownedCampaign(c);
    // Only a draft shows its audience and a preview; the audience's condition serves both, its segments read once.
    const where = campaign.status === "draft" ? await audienceSql(c.env.DB, campaign) : undefined;
    const [counters, options, audience, checks, report, resolved] = await Promise.all([
      campaignCounters(c.env.DB, [campaign.id]),
      editorOptions(c.env.DB, auth.account.id),
      where ? audienceOf(c.env.DB, campaign, where) : 0,
      where && campaign.verification !== "off" ? contactChecksNeeded(c.env, where) : undefined,
      campaign.status === "draft" ? undefined : campaignReport(c.env.DB, campaign.id),
      withTemplate(c.env.DB, campaign),
    ]);
    // A draft's preview, or the one example a sent campaign's subject template is shown filled in for.
    const templated = placeholderNames(resolved.subject ?? "").length > 0;
    const contact = where || templated ? await previewContact(c.env.DB, campaign, c.req.query("contact"), where) : undefined;
    const example = !where && contact ? await renderCampaignMessage(c.env, `preview_${campaign.id}`, { campaign: resolved, contact }) : undefined;
    const csrfToken = c.get("csrfToken");
    const now = new Date();
    const available = Math.max(0, auth.account.sendBalance - auth.account.sendReserved);
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
                  <strong>{checks.toCheck.toLocaleString("en")}</strong> verification credits ({auth.account.verifyBalance.toLocaleString("en")}{" "}
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
    const counters = await campaignCounters(c.env.DB, [campaign.id]);
    return c.html(<CampaignProgress campaign={campaign} counters={counters.get(campaign.id)!} />);
  })
  .get("/campaigns/:id/preview", async (c) => {
    const campaign = await withTemplate(c.env.DB, await ownedCampaign(c));
    const contact = await previewContact(c.env.DB, campaign, c.req.query("contact"));
    // The message as this contact would get it (placeholders filled, unsubscribe link), shown to the campaign's author
    // in a sandboxed frame: no script runs, no request leaves but images.
    const rendered = contact ? await renderCampaignMessage(c.env, `preview_${campaign.id}`, { campaign, contact }) : undefined;
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
    const campaign = savedOrThrow(await updateDraft(c.env.DB, c.get("auth").account.id, saved.id, campaignFields(body)));
    return c.redirect(`/dashboard/campaigns/${campaign.id}`, 303);
  })
  // A test send is a message through POST /send's pipeline: it needs what /send needs.
  .post("/campaigns/:id/test", liveKeyOnly("Sending a test"), needs("test_email", "email_api", "smtp_relay"), async (c) => {
    const auth = c.get("auth");
    const form = await c.req.parseBody();
    const to = parseMailbox(field(form, "to"));
    if (!to.ok) throw validationError({ to: [to.error] });
    const campaign = await withTemplate(c.env.DB, await ownedCampaign(c));
    const from = await testSender(c.env.DB, campaign);
    const contact = await previewContact(c.env.DB, campaign, field(form, "contact") || undefined);
    if (!contact) throw validationError({ to: ["A test is filled in for one of your contacts: add a contact first"] }, "The test cannot be sent");
    // Rendered here for the previewed contact; its unsubscribe link names this test, not a message of the campaign.
    const rendered = await renderCampaignMessage(c.env, `test_${campaign.id}`, { campaign, contact });
    const outcome = await acceptMessage(
      c.env,
      c.executionCtx,
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
    const outcome = await sendCampaign(c.env, c.get("auth").account.id, c.req.param("id"), sendAt);
    if (outcome.kind !== "started") throw sendRefusal(outcome);
    return c.redirect(`/dashboard/campaigns/${outcome.campaign.id}${outcome.campaign.status === "scheduled" ? "?scheduled=1" : ""}`, 303);
  })
  .post("/campaigns/:id/cancel", liveKeyOnly("Cancelling a campaign"), async (c) => {
    const outcome = await cancelCampaign(c.env, c.get("auth").account.id, c.req.param("id"));
    if (outcome.kind === "not_found") throw notFound("Campaign");
    if (outcome.kind === "not_cancellable")
      throw new AppError("conflict", `The campaign is ${outcome.status}; only a scheduled or sending campaign can be cancelled`);
    return c.redirect(`/dashboard/campaigns/${outcome.campaign.id}`, 303);
  });
