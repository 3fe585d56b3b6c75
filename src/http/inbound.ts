// Received mail as the API and the dashboard both show it: the message's fields and its attachments as downloads.

import { attachmentKey, bodiesOf, type InboundRow } from "../domain/inbound/store";

/** A received message in lists (GET /inbound). */
export const inboundSummary = (row: InboundRow) => ({
  id: row.id,
  domain_id: row.domainId,
  envelope_from: row.envelopeFrom,
  envelope_to: row.envelopeTo,
  from: row.fromHeader,
  to: row.toAddresses,
  cc: row.ccAddresses,
  subject: row.subject,
  date: row.date,
  size: row.size,
  attachment_count: row.attachments.length,
  auto_submitted: row.autoSubmitted,
  in_reply_to_message_id: row.inReplyToMessageId,
  campaign_id: row.campaignId,
  received_at: row.createdAt,
});

/** The whole message as GET /inbound/{id} shows it (the dashboard's detail page reads the same). */
export async function inboundDetail(env: Env, row: InboundRow) {
  const bodies = await bodiesOf(env, row);
  return {
    ...inboundSummary(row),
    reply_to: row.replyTo,
    message_id: row.messageIdHeader,
    in_reply_to: row.inReplyTo,
    references: row.references,
    text: bodies.text,
    html: bodies.html,
    attachments: row.attachments.map((attachment, index) => ({
      index,
      filename: attachment.filename,
      content_type: attachment.content_type,
      size: attachment.size,
      content_id: attachment.content_id,
      disposition: attachment.disposition,
    })),
    authentication: row.authentication,
  };
}

// Received bytes are someone else's content: served as downloads, never rendered on our origin.
export const downloadHeaders = (contentType: string, filename: string) => ({
  "Content-Type": contentType,
  "Content-Disposition": `attachment; filename="${filename.replace(/[^\w.-]+/g, "_")}"`,
  "X-Content-Type-Options": "nosniff",
  "Content-Security-Policy": "sandbox; default-src 'none'",
  "Cache-Control": "private, no-store",
});

/** An attachment's bytes from R2 as a download response, or undefined when there is no such attachment. */
export async function attachmentResponse(env: Env, row: InboundRow, index: number): Promise<Response | undefined> {
  const meta = row.attachments[index];
  if (!meta) return undefined;
  const object = await env.BLOBS.get(attachmentKey(row.id, index));
  if (!object) return undefined;
  return new Response(object.body, { headers: downloadHeaders(meta.content_type, meta.filename ?? `attachment-${index}`) });
}
