// A received message as stored (docs/inbound.md): postal-mime parses the MIME (charsets, encodings, broken
// structure it tolerates); this module picks the fields a row keeps and bounds each, so no header can make a D1 row
// too large. Forwarded messages (message/rfc822 parts) stay attachments rather than merging into the body.

import PostalMime, { type Address, type Attachment, type Header } from "postal-mime";
import type { InboundAttachment, InboundAuthentication } from "../../db/schema";

/** Email Routing's own limit, and ours: a larger message is refused at SMTP time. */
export const MAX_INBOUND_BYTES = 25 * 1024 * 1024;
/** Attachments (inline parts included) one message may carry; more is refused at SMTP time. */
export const MAX_INBOUND_ATTACHMENTS = 100;
/** postal-mime refuses a message whose headers, over every part, pass this size. */
const MAX_HEADERS_BYTES = 2 * 1024 * 1024;

const MAX_SUBJECT_CHARS = 2_000;
const MAX_ADDRESSES = 100;
const MAX_REFERENCES = 100;
const MAX_HEADER_CHARS = 2_000;
const MAX_FILENAME_CHARS = 255;
export const TEXT_EXCERPT_CHARS = 1_000;

export type ParsedAttachment = InboundAttachment & { content: Uint8Array };

export type ParsedInbound = {
  fromHeader: string | null;
  fromAddress: string | null;
  to: string[];
  cc: string[];
  replyTo: string | null;
  subject: string | null;
  date: string | null;
  messageId: string | null;
  inReplyTo: string | null;
  references: string[];
  text: string | null;
  html: string | null;
  attachments: ParsedAttachment[];
  authentication: InboundAuthentication;
  autoSubmitted: string | null;
};

const clip = (value: string | undefined | null, max: number) => (value ? value.slice(0, max) : null);

function mailboxes(addresses: Address[] | Address | undefined): { name: string; address: string }[] {
  const list = addresses === undefined ? [] : Array.isArray(addresses) ? addresses : [addresses];
  return list.flatMap((entry) => (entry.group ? entry.group : entry.address !== undefined ? [entry] : []));
}

const display = (mailbox: { name: string; address: string }) => (mailbox.name ? `${mailbox.name} <${mailbox.address}>` : mailbox.address);

/** `<a@b> <c@d>` (any folding or commas between) → `["<a@b>", "<c@d>"]`. */
export function messageIds(value: string | undefined | null): string[] {
  return value?.match(/<[^<>\s]+>/g) ?? [];
}

function bytesOf(content: Attachment["content"]): Uint8Array {
  if (typeof content === "string") return new TextEncoder().encode(content);
  return content instanceof Uint8Array ? content : new Uint8Array(content);
}

const firstHeader = (headers: Header[], ...keys: string[]) => headers.find((header) => keys.includes(header.key))?.value;

/**
 * The results Email Routing wrote above the message. Only the topmost Authentication-Results (or ARC-Authentication-
 * Results) header is read: it is the one Email Routing adds; any lower one came with the message and proves nothing.
 */
function authenticationOf(headers: Header[]): InboundAuthentication {
  const header = firstHeader(headers, "authentication-results", "arc-authentication-results");
  const result = (method: string) => header?.match(new RegExp(`(?:^|[;\\s])${method}=([a-z]+)`, "i"))?.[1]?.toLowerCase() ?? null;
  return {
    spf: result("spf"),
    dkim: result("dkim"),
    dmarc: result("dmarc"),
    header: clip(header?.replace(/\s+/g, " ").trim(), MAX_HEADER_CHARS),
    received_spf: clip(firstHeader(headers, "received-spf")?.replace(/\s+/g, " ").trim(), MAX_HEADER_CHARS),
  };
}

/** RFC 3834: anything but `no` marks mail sent by a machine (an out-of-office, a notification). */
function autoSubmittedOf(headers: Header[]): string | null {
  const value = firstHeader(headers, "auto-submitted")?.trim().toLowerCase();
  return value && value !== "no" ? clip(value, 100) : null;
}

function isoDate(value: string | undefined): string | null {
  if (!value) return null;
  const time = Date.parse(value);
  return Number.isNaN(time) ? null : new Date(time).toISOString();
}

/** Parses raw bytes; throws when postal-mime cannot make a message of them (its header size limit included). */
export async function parseInbound(raw: Uint8Array): Promise<ParsedInbound> {
  const email = await PostalMime.parse(raw, { forceRfc822Attachments: true, maxHeadersSize: MAX_HEADERS_BYTES });
  const [from] = mailboxes(email.from);
  const [replyTo] = mailboxes(email.replyTo);
  return {
    fromHeader: from ? clip(display(from), MAX_HEADER_CHARS) : null,
    fromAddress: from ? clip(from.address.toLowerCase(), 320) : null,
    to: mailboxes(email.to).slice(0, MAX_ADDRESSES).map(display),
    cc: mailboxes(email.cc).slice(0, MAX_ADDRESSES).map(display),
    replyTo: replyTo ? clip(display(replyTo), MAX_HEADER_CHARS) : null,
    subject: clip(email.subject, MAX_SUBJECT_CHARS),
    date: isoDate(email.date),
    messageId: clip(messageIds(email.messageId)[0] ?? email.messageId?.trim(), 998),
    inReplyTo: clip(messageIds(email.inReplyTo)[0] ?? email.inReplyTo?.trim(), 998),
    // The thread's root first, then the most recent: the ends are what threading reads.
    references: ((ids) => (ids.length > MAX_REFERENCES ? [ids[0]!, ...ids.slice(-(MAX_REFERENCES - 1))] : ids))(messageIds(email.references)),
    text: email.text ?? null,
    html: email.html ?? null,
    attachments: email.attachments.map((attachment): ParsedAttachment => {
      const content = bytesOf(attachment.content);
      return {
        filename: clip(attachment.filename, MAX_FILENAME_CHARS),
        content_type: attachment.mimeType.slice(0, 255),
        size: content.byteLength,
        content_id: clip(attachment.contentId, 998),
        disposition: attachment.disposition === "inline" ? "inline" : attachment.disposition === "attachment" ? "attachment" : null,
        content,
      };
    }),
    authentication: authenticationOf(email.headers),
    autoSubmitted: autoSubmittedOf(email.headers),
  };
}

/** The first characters of the text body, or of the HTML body's text when there is no text part. */
export function textExcerpt(parsed: Pick<ParsedInbound, "text" | "html">): string {
  const text =
    parsed.text ??
    (parsed.html ?? "")
      .replace(/<(script|style)[\s\S]*?<\/\1>/gi, " ")
      .replace(/<[^>]*>/g, " ")
      .replace(/&nbsp;/g, " ");
  return text.replace(/\s+/g, " ").trim().slice(0, TEXT_EXCERPT_CHARS);
}
