// What the campaign pages read, through the domain's functions: the editor's choices, a campaign as it would be sent,
// its audience and the contact a preview or test is filled in for.

import type { AccountDb } from "../../../db/client";
import type { SQL } from "drizzle-orm";
import type { Context } from "hono";
import { audiencePage, audienceWhere, countAudience, type Audience } from "../../../domain/campaigns/audience";
import { findCampaign, segmentConditions, type CampaignRow } from "../../../domain/campaigns/campaigns";
import { findSender, listSenders, type SenderRow } from "../../../domain/campaigns/senders";
import { findContact, listContacts, type ContactRow } from "../../../domain/contacts/contacts";
import { listLists, type ListWithCounts } from "../../../domain/contacts/lists";
import { listSegments, type SegmentRow } from "../../../domain/segments/segments";
import { findTemplate, listTemplates, type TemplateRow } from "../../../domain/templates/templates";
import { allTopics, type TopicRow } from "../../../domain/topics/topics";
import { notFound, validationError, type FieldErrors } from "../../../errors";
import type { DashboardEnv } from "../../session";

export type EditorOptions = { senders: SenderRow[]; lists: ListWithCounts[]; segments: SegmentRow[]; templates: TemplateRow[]; topics: TopicRow[] };

export async function editorOptions(db: AccountDb, accountId: string): Promise<EditorOptions> {
  const [senders, lists, segments, templates, topics] = await Promise.all([
    listSenders(db, accountId, { limit: 100 }),
    listLists(db, accountId, { limit: 100 }),
    listSegments(db, accountId, { limit: 100 }),
    listTemplates(db, accountId, { limit: 100 }),
    allTopics(db, accountId),
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
export async function withTemplate(db: AccountDb, campaign: CampaignRow): Promise<CampaignRow> {
  if (!campaign.templateId) return campaign;
  const template = await findTemplate(db, campaign.accountId, campaign.templateId);
  if (!template) return campaign;
  return { ...campaign, subject: campaign.subject ?? template.subject, html: campaign.html ?? template.html, text: campaign.text ?? template.text };
}

/** The SQL condition selecting the campaign's audience, its segments read once. */
export async function audienceSql(db: AccountDb, audience: Audience & Pick<CampaignRow, "segments">): Promise<SQL> {
  return audienceWhere(audience, await segmentConditions(db, audience));
}

/**
 * The contact to preview for: the chosen one, else the first of the audience (`where`, when the caller has it
 * already), else the account's newest.
 */
export async function previewContact(db: AccountDb, campaign: CampaignRow, chosen: string | undefined, where?: SQL): Promise<ContactRow | undefined> {
  if (chosen) {
    const contact = await findContact(db, campaign.accountId, chosen);
    if (contact) return contact;
  }
  const [first] = await audiencePage(db, where ?? (await audienceSql(db, campaign)), "", 1);
  if (first) return findContact(db, campaign.accountId, first.id);
  const newest = await listContacts(db, campaign.accountId, {}, { limit: 1 });
  return newest.kind === "page" ? newest.rows[0] : undefined;
}

/** How many contacts the audience has; `where` is its condition (`audienceSql`). */
export async function audienceOf(db: AccountDb, audience: Pick<CampaignRow, "lists" | "segments">, where: SQL): Promise<number> {
  if (audience.lists.length === 0 && audience.segments.length === 0) return 0;
  return countAudience(db, where);
}

/** Each draft's audience as the editor counts it: a draft has no recipients of its own until it is sent. */
export async function draftAudiences(db: AccountDb, campaigns: CampaignRow[]): Promise<Map<string, number>> {
  const drafts = campaigns.filter((campaign) => campaign.status === "draft");
  return new Map(await Promise.all(drafts.map(async (draft) => [draft.id, await audienceOf(db, draft, await audienceSql(db, draft))] as const)));
}

/** What a test send needs that a draft may still lack: a sender and some content (the full checks run at send). */
export async function testSender(db: AccountDb, campaign: CampaignRow): Promise<{ name: string; address: string }> {
  const sender = campaign.senderId ? await findSender(db, campaign.accountId, campaign.senderId) : undefined;
  const errors: FieldErrors = {};
  if (!sender) errors.sender_id = ["Choose a sender first"];
  if (campaign.html === null && campaign.text === null) errors.html = ["Write the content or choose a template first"];
  if (!campaign.subject) errors.subject = ["Give a subject first"];
  if (!sender || Object.keys(errors).length > 0) throw validationError(errors, "The test cannot be sent");
  return { name: sender.name, address: sender.email };
}

export async function ownedCampaign(c: Context<DashboardEnv>): Promise<CampaignRow> {
  const campaign = await findCampaign(c.var.ctx.db, c.get("auth").account.id, c.req.param("id") ?? "");
  if (!campaign) throw notFound("Campaign");
  return campaign;
}
