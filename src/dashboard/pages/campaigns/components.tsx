// The campaign pages' pieces: the editor (its audience counted as you choose), a campaign's progress and outcome, the
// list's recipients column and a sent campaign's report.

import type { CampaignRow } from "../../../domain/campaigns/campaigns";
import { campaignOutcome, type CampaignCounters } from "../../../domain/campaigns/lifecycle";
import type { CampaignReport } from "../../../domain/reports/reports";
import { Table } from "../../components/table";
import { Csrf, Notice, Progress, StatusBadge, formatTime, percent } from "../../layout";
import type { EditorOptions } from "./loaders";

const verificationChoices = [
  ["off", "off: send to the whole audience"],
  ["skip_invalid", "skip invalid addresses"],
  ["valid_only", "send to valid addresses only"],
] as const;

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

export function Editor({ campaign, options, csrfToken }: { campaign?: CampaignRow; options: EditorOptions; csrfToken: string }) {
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

export const inFlight = (campaign: CampaignRow) => campaign.status === "scheduled" || campaign.status === "sending";

export function CampaignProgress({ campaign, counters }: { campaign: CampaignRow; counters: CampaignCounters }) {
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

export function ListedOutcome({ campaign, counters }: { campaign: CampaignRow; counters: CampaignCounters | undefined }) {
  const outcome = counters ? campaignOutcome(campaign, counters) : null;
  return outcome && outcome !== "delivered" ? <OutcomeBadge outcome={outcome} /> : null;
}

/**
 * A campaign's recipients in the list: a draft's audience if sent now, a scheduled campaign's as counted when it was
 * scheduled (its recipients are made when it starts), else the recipients it was sent to.
 */
export function ListedRecipients({
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

export const namesOf = (rows: { id: string; name: string }[], ids: string[]) =>
  rows
    .filter((row) => ids.includes(row.id))
    .map((row) => row.name)
    .join(", ") || "—";

/** The sent campaign's outcome at a glance: each figure with its share of the recipients, then its links by clicks. */
export function Report({ report, counters }: { report: CampaignReport; counters: CampaignCounters }) {
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
