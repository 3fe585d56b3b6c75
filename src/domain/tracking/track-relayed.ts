// SMTP relay messages leave with the bytes the client wrote. A client that opts in to tracking (the
// `X-Mailforge-Track` header, docs/tracking.md) asks for new bytes: its html part must carry the pixel and the click
// redirects. Rewriting one part inside someone else's MIME tree would mean re-encoding it in place, so the message is
// rebuilt from its parsed parts instead (postal-mime reads it, the same MIME builder as POST /send writes it): its
// text, html, attachments, inline images and the headers a client sets (In-Reply-To, References, List-*, X-*) are
// kept; only the MIME structure is ours. Signed or encrypted messages are never rebuilt: that would break them.

import PostalMime, { type Address, type Email } from "postal-mime";
import { logError } from "../../lib/log";
import { buildMimeMessage, isReservedHeader, MimeError, type MimeAddress, type MimeAttachment } from "../sending/mime";

/** The opt-in header: `X-Mailforge-Track: opens, clicks` (either or both). Removed before the message is stored. */
export const relayTrackingHeader = "x-mailforge-track";

/** What a relayed message asks for in its `X-Mailforge-Track` header(s); undefined when it does not opt in. */
export function relayTracking(headers: readonly { key: string; value: string }[]): { opens: boolean; clicks: boolean } | undefined {
  const words = headers
    .filter((header) => header.key === relayTrackingHeader)
    .flatMap((header) => header.value.toLowerCase().split(/[\s,]+/))
    .filter((word) => word !== "");
  const opens = words.includes("opens");
  const clicks = words.includes("clicks");
  return opens || clicks ? { opens, clicks } : undefined;
}

const mailboxes = (addresses: readonly Address[] | undefined): MimeAddress[] =>
  (addresses ?? [])
    .flatMap((address) => (address.group ? address.group : [address]))
    .map(({ name, address }) => (name ? { name, address } : { address }));

function attachmentsOf(email: Email): MimeAttachment[] {
  return email.attachments.map((attachment, i) => ({
    filename: attachment.filename ?? `attachment-${i + 1}`,
    contentBase64: typeof attachment.content === "string" ? attachment.content : "",
    contentType: attachment.mimeType,
    ...(attachment.disposition === "inline" && attachment.contentId ? { contentId: attachment.contentId } : {}),
  }));
}

/**
 * The relayed message with its html part passed through `trackHtml`, or the original bytes when there is nothing to
 * track (no html), when rebuilding would break it (signed, encrypted) or when it cannot be rebuilt (a header the
 * builder refuses): tracking is skipped then, the message is never held back.
 */
export async function trackRelayedMessage(
  raw: Uint8Array,
  ids: { messageId: string; fallbackMessageIdHeader: string },
  trackHtml: (html: string) => Promise<string>,
): Promise<Uint8Array> {
  const email = await PostalMime.parse(raw, { attachmentEncoding: "base64" });
  const contentType = email.headers.find((header) => header.key === "content-type")?.value ?? "";
  if (email.html === undefined || /multipart\/(signed|encrypted)|pkcs7-mime/i.test(contentType)) return raw;
  const headers: Record<string, string> = {};
  for (const header of email.headers) {
    // The builder writes its own (and refuses them given), and ours (X-Mailforge-Track) the stored bytes no longer carry.
    if (!isReservedHeader(header.key) && !(header.originalKey in headers)) headers[header.originalKey] = header.value;
  }
  const from = mailboxes(email.from ? [email.from] : [])[0];
  if (!from) return raw;
  try {
    const rebuilt = buildMimeMessage({
      from,
      to: mailboxes(email.to),
      cc: mailboxes(email.cc),
      replyTo: mailboxes(email.replyTo)[0],
      subject: email.subject ?? "",
      html: await trackHtml(email.html),
      text: email.text,
      attachments: attachmentsOf(email),
      headers,
      messageId: email.messageId && /^<[^\s<>@]+@[^\s<>@]+>$/.test(email.messageId) ? email.messageId : ids.fallbackMessageIdHeader,
      date: email.date && !Number.isNaN(Date.parse(email.date)) ? new Date(email.date) : new Date(),
    });
    return new TextEncoder().encode(rebuilt);
  } catch (error) {
    if (!(error instanceof MimeError)) throw error;
    logError("relayed message not rebuilt for tracking; sent as received", { message_id: ids.messageId, field: error.field, error: error.message });
    return raw;
  }
}
