// What the send consumer needs for campaign messages: the campaigns and contacts of a whole batch in one D1 round
// trip, the decision to skip a recipient who unsubscribed (or was suppressed) since the audience was materialised or
// whose campaign was cancelled or failed, and the personalised subject and bodies with a visible unsubscribe link.

import type { AccountDb } from "../../db/client";
import { sql } from "drizzle-orm";
import { config } from "../../config";
import { campaigns, contacts, messages } from "../../db/schema";
import { messageContentSchema } from "../sending/content";
import { placeholderNames, renderTemplate } from "../sending/render";
import { listUnsubscribeHeaders, unsubscribeUrl as unsubscribeLink } from "../sending/unsubscribe";
import { contactVariables } from "../contacts/contacts";
import { blocksBroadcastSql } from "../suppressions/suppressions";
import type { CampaignRow } from "./campaigns";

type MessageRow = typeof messages.$inferSelect;
type ContactRow = typeof contacts.$inferSelect;

export type CampaignRecipient = { campaign: CampaignRow; contact: ContactRow };
export type CampaignSkip = { skip: "suppressed" | "cancelled"; reason: string };

const contactIdOf = (message: MessageRow) => {
  const content = messageContentSchema.safeParse(message.content ? JSON.parse(message.content) : undefined);
  return content.success && content.data.kind === "campaign" ? content.data.contact_id : undefined;
};

/**
 * The reads campaign messages need, for the send consumer's first round trip (beside its claim, so a failed read
 * claims nothing): the campaigns and the contacts (with whether their address is suppressed) of the messages `ids`.
 */
export function campaignRecipientReads(db: AccountDb, ids: string[]) {
  const batch = sql`(SELECT value FROM json_each(${JSON.stringify(ids)}))`;
  return [
    db.select().from(campaigns).where(sql`${campaigns.id} IN (SELECT ${messages.campaignId} FROM ${messages} WHERE ${messages.id} IN ${batch})`),
    db
      .select({
        contact: contacts,
        suppressed:
          sql<number>`EXISTS (SELECT 1 FROM suppressions AS s WHERE s.account_id = ${contacts.accountId} AND s.email = lower(${contacts.emailKey}) AND ${blocksBroadcastSql})`.mapWith(
            Number,
          ),
        // The topics the contact left: one left since the audience was made is not mailed.
        leftTopics:
          sql<string>`(SELECT json_group_array(ct.topic_id) FROM contact_topics AS ct WHERE ct.contact_id = ${contacts.id} AND ct.subscribed = 0)`.mapWith(
            (value: string) => JSON.parse(value) as string[],
          ),
      })
      .from(contacts)
      .where(
        sql`${contacts.id} IN (SELECT ${messages.content} ->> '$.contact_id' FROM ${messages} WHERE ${messages.id} IN ${batch} AND ${messages.source} = 'campaign')`,
      ),
  ] as const;
}

type CampaignReadResults = [CampaignRow[], { contact: ContactRow; suppressed: number; leftTopics: string[] }[]];

/** Per claimed campaign message: what to render it from, or why it is skipped (unsubscribed since, or its campaign cancelled or failed). */
export function campaignRecipientsOf(
  claimed: MessageRow[],
  [campaignRows, contactRows]: CampaignReadResults,
): Map<string, CampaignRecipient | CampaignSkip> {
  const result = new Map<string, CampaignRecipient | CampaignSkip>();
  const campaignsById = new Map(campaignRows.map((row) => [row.id, row]));
  const contactsById = new Map(contactRows.map((row) => [row.contact.id, row]));
  for (const message of claimed) {
    if (message.source !== "campaign") continue;
    const campaign = message.campaignId ? campaignsById.get(message.campaignId) : undefined;
    const contactId = contactIdOf(message);
    const found = contactId ? contactsById.get(contactId) : undefined;
    if (!campaign || campaign.status === "cancelled" || campaign.status === "failed")
      result.set(message.id, { skip: "cancelled", reason: `campaign ${campaign?.status ?? "deleted"} before this message was sent` });
    else if (!found || found.contact.accountId !== message.accountId)
      result.set(message.id, { skip: "suppressed", reason: "contact deleted before this message was sent" });
    else if (found.suppressed === 1 || found.contact.status !== "subscribed") {
      result.set(message.id, {
        skip: "suppressed",
        reason: `contact ${found.suppressed === 1 ? "suppressed" : found.contact.status} before this message was sent`,
      });
    } else if (campaign.topicId && found.leftTopics.includes(campaign.topicId)) {
      result.set(message.id, { skip: "suppressed", reason: "contact unsubscribed from the campaign's topic before this message was sent" });
    } else result.set(message.id, { campaign, contact: found.contact });
  }
  return result;
}

export type RenderedCampaignMessage = { to: string; subject: string; html?: string; text?: string; headers: Record<string, string> };

const footerHtml = (url: string) =>
  `<p style="margin-top:32px;font-size:12px;color:#6b7280;text-align:center"><a href="${url}" style="color:#6b7280">Unsubscribe</a></p>`;

/**
 * The campaign personalised for one contact: placeholders from the contact (`{{first_name|there}}`, `{{email}}`,
 * `{{custom_fields.plan}}`) over the campaign's variables, HTML-escaped in the html part as POST /send does, the
 * preheader as hidden text at the top, and `{{unsubscribe_url}}`, or a footer link when the body does not use it.
 */
export async function renderCampaignMessage(
  env: Env,
  { messageId, tag }: { messageId: string; tag: string },
  { campaign, contact }: CampaignRecipient,
): Promise<RenderedCampaignMessage> {
  const to = contact.emailKey;
  // The same signed token as the List-Unsubscribe header's (it names this message, its database and the address).
  const unsubscribeUrl = await unsubscribeLink(config(env), { messageId, email: to, tag });
  const variables = { ...campaign.variables, ...contactVariables(contact), unsubscribe_url: unsubscribeUrl };
  const usesLink = (body: string) => placeholderNames(body).includes("unsubscribe_url");
  let html: string | undefined;
  if (campaign.html !== null) {
    html = renderTemplate(campaign.html, variables, { html: true });
    if (campaign.preheader) {
      const hidden = `<div style="display:none;max-height:0;overflow:hidden">${renderTemplate(campaign.preheader, variables, { html: true })}</div>`;
      html = /<body[^>]*>/i.test(html) ? html.replace(/<body[^>]*>/i, (tag) => `${tag}${hidden}`) : `${hidden}${html}`;
    }
    if (!usesLink(campaign.html))
      html = /<\/body>/i.test(html) ? html.replace(/<\/body>/i, `${footerHtml(unsubscribeUrl)}</body>`) : `${html}${footerHtml(unsubscribeUrl)}`;
  }
  let text: string | undefined;
  if (campaign.text !== null) {
    text = renderTemplate(campaign.text, variables, { html: false });
    if (!usesLink(campaign.text)) text = `${text}\n\nUnsubscribe: ${unsubscribeUrl}\n`;
  }
  return {
    to,
    subject: renderTemplate(campaign.subject ?? "", variables, { html: false }).replace(/[\r\n]+/g, " "),
    html,
    text,
    headers: await listUnsubscribeHeaders(config(env), { messageId, recipient: to, tag }),
  };
}
