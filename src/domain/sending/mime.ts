// Builds the RFC 5322 message for an accepted send request. mimetext assembles the multipart structure
// (alternative / related / mixed, boundaries, part headers); this module supplies what it leaves to the caller:
//   - mimetext writes body and attachment data verbatim, so text and html are quoted-printable encoded here
//     (7-bit safe, lines <= 76) and attachment base64 is re-wrapped at 76 columns;
//   - its Subject and display-name encoders emit one unfolded `=?utf-8?B?...?=` word of any length (RFC 2047
//     caps a word at 75 chars) and B-encode even plain ASCII names, so those header dumps are replaced with
//     the folding encoders below (mimetext exposes its header fields for exactly this);
//   - attachment filenames go into `name="..."` unescaped, so the part headers are rewritten with RFC 2047 /
//     RFC 2231 parameters when a filename is not plain ASCII;
//   - Date and Message-ID are set explicitly (its generators use the clock and Math.random).
// Every header value is checked for CR/LF before it is written: a value that could start a new header line is
// rejected with a MimeError instead of being cleaned, so injection attempts surface as validation errors.
// mimetext is pinned to an exact version in package.json: this module replaces its header fields and part headers,
// which are internals a minor release may change; the MIME tests are the check before moving the pin.

import { createMimeMessage, type MIMEMessage, Mailbox } from "mimetext/browser";
// `.js` suffix: test/node and the benchmark type-check this file under Node's `nodenext` resolution, which
// requires one; the Worker's bundler and vite map it to crypto.ts.
import { bytesToBase64 } from "../../lib/crypto.js";
import { textFromHtml } from "./plain-text.js";

export interface MimeAddress {
  name?: string;
  address: string;
}

export interface MimeAttachment {
  filename: string;
  /** Standard base64; whitespace and line breaks are ignored and the output is re-wrapped. */
  contentBase64: string;
  contentType: string;
  /** Makes the attachment an inline part (`Content-Disposition: inline`) that html references as `cid:<contentId>`. */
  contentId?: string;
}

export interface MimeMessageInput {
  from: MimeAddress;
  to: readonly (string | MimeAddress)[];
  cc?: readonly (string | MimeAddress)[];
  replyTo?: string | MimeAddress;
  subject: string;
  html?: string;
  /** Without it, an html message gets one generated from the html (multipart/alternative). */
  text?: string;
  attachments?: readonly MimeAttachment[];
  /** Extra headers in order, e.g. `List-Unsubscribe`, `List-Unsubscribe-Post`, `X-…`. */
  headers?: Readonly<Record<string, string>>;
  /** Full header value, `<id@sender-domain>`: see {@link buildMessageId}. */
  messageId: string;
  date: Date;
}

export type MimeErrorCode =
  | "header_injection"
  | "invalid_header_name"
  | "reserved_header"
  | "header_too_long"
  | "invalid_address"
  | "invalid_message_id"
  | "invalid_attachment"
  | "missing_body";

export class MimeError extends Error {
  override name = "MimeError";
  constructor(
    readonly code: MimeErrorCode,
    /** The header or input field at fault, e.g. `subject`, `headers.X-Campaign`, `attachments[2].filename`. */
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

const CRLF = "\r\n";
const MAX_LINE = 78;
const HARD_MAX_LINE = 998;

// Headers this module writes itself, plus trace and signature headers a sender must not forge.
const RESERVED_HEADERS: ReadonlySet<string> = new Set([
  "from",
  "sender",
  "to",
  "cc",
  "bcc",
  "reply-to",
  "subject",
  "date",
  "message-id",
  "mime-version",
  "content-type",
  "content-transfer-encoding",
  "content-disposition",
  "content-id",
  "dkim-signature",
  "return-path",
  "received",
]);

// What receiving servers write about a message's path and its checks (RFC 5321 trace fields, RFC 8601, RFC 8617,
// RFC 7208): given by a sender, they would claim checks that never ran. `X-Mailforge-*` are ours (tracking opt-in).
const RECEIVER_HEADERS: ReadonlySet<string> = new Set(["authentication-results", "received-spf", "delivered-to", "x-original-to"]);
const RECEIVER_PREFIXES = ["arc-", "x-mailforge-"] as const;

/**
 * Whether a sender may set this header: not one of RESERVED_HEADERS, no `Content-*` (the MIME structure is ours), and
 * none of the trace and authentication headers a receiver adds, nor our own `X-Mailforge-*`.
 */
export function isReservedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return (
    RESERVED_HEADERS.has(lower) ||
    RECEIVER_HEADERS.has(lower) ||
    lower.startsWith("content-") ||
    RECEIVER_PREFIXES.some((prefix) => lower.startsWith(prefix))
  );
}

export const HEADER_NAME = /^[!-9;-~]+$/; // printable US-ASCII except ':' (RFC 5322 §2.2)
// Deliberately narrow: no whitespace, angle brackets, commas, quotes or parentheses, so an address can never
// close its `<...>` and smuggle a second mailbox into To/From.
const ADDRESS = /^[^\s<>,;:"()[\]\\@]+@[^\s<>,;:"()[\]\\@]+$/;
const MESSAGE_ID = /^<[^\s<>@]+@[^\s<>@]+>$/;
const MIME_TYPE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$/;
// ASCII text that may appear in a header unencoded (printable plus space/tab).
const PLAIN_ASCII = /^[\x20-\x7e\t]*$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const encoder = new TextEncoder();

function assertNoLineBreak(field: string, value: string): void {
  if (/[\r\n]/.test(value)) {
    throw new MimeError("header_injection", field, `${field} must not contain CR or LF`);
  }
}

function checkAddress(field: string, address: string): string {
  assertNoLineBreak(field, address);
  if (!ADDRESS.test(address)) throw new MimeError("invalid_address", field, `${field} is not a valid address`);
  return address;
}

export function domainOf(address: string): string {
  return address.slice(address.lastIndexOf("@") + 1).toLowerCase();
}

/** The sender as the message record and its events show it: `Name <address>`, or the bare address. */
export function displayFrom(name: string | null | undefined, address: string): string {
  return name ? `${name} <${address}>` : address;
}

/** `<localId@domain of the sender>`: receivers and DMARC reports tie a Message-ID's domain to the From domain. */
export function buildMessageId(localId: string, fromAddress: string): string {
  return `<${localId}@${domainOf(fromAddress)}>`;
}

/** RFC 5322 date, always in UTC: `Tue, 05 Mar 2024 10:00:00 +0000`. */
export function formatRfc5322Date(date: Date): string {
  return date.toUTCString().replace(/GMT$/, "+0000");
}

// --- RFC 2047 encoded words -------------------------------------------------------------------------------------

/**
 * `=?UTF-8?B?...?=` words joined by folding whitespace; each word <= 75 chars and cut on UTF-8 character
 * boundaries (RFC 2047 §5: a word must decode to whole characters). `firstLineRoom` is what is left on the first
 * line after `Name: `.
 */
function encodeWords(value: string, firstLineRoom: number): string {
  const bytes = encoder.encode(value);
  const words: string[] = [];
  let start = 0;
  let room = firstLineRoom;
  while (start < bytes.length) {
    // 12 chars of `=?UTF-8?B??=` around the payload; 4 base64 chars per 3 bytes.
    const maxBytes = Math.max(3, Math.floor((Math.min(room, 75) - 12) / 4) * 3);
    let end = Math.min(start + maxBytes, bytes.length);
    // Back off from a continuation byte (10xxxxxx) so the cut falls between characters.
    while (end < bytes.length && end > start + 1 && (bytes[end]! & 0xc0) === 0x80) end--;
    words.push(`=?UTF-8?B?${bytesToBase64(bytes.subarray(start, end))}?=`);
    start = end;
    room = MAX_LINE - 1;
  }
  return words.join(`${CRLF} `);
}

/** Folds an ASCII value at spaces so lines stay within 78 columns where the value allows it. */
function foldAscii(value: string, firstLineRoom: number): string {
  if (value.length <= firstLineRoom) return value;
  let out = "";
  let line = "";
  let room = firstLineRoom;
  for (const [index, word] of value.split(" ").entries()) {
    const piece = index === 0 ? word : ` ${word}`;
    // Never break before an empty word (double space): a continuation line of only whitespace is not allowed.
    if (line.length > 0 && word.length > 0 && line.length + piece.length > room) {
      out += line + CRLF;
      line = piece.startsWith(" ") ? piece : ` ${piece}`;
      room = MAX_LINE;
    } else {
      line += piece;
    }
  }
  return out + line;
}

function unstructuredValue(field: string, headerName: string, value: string): string {
  assertNoLineBreak(field, value);
  const room = MAX_LINE - headerName.length - 2;
  const folded = PLAIN_ASCII.test(value) ? foldAscii(value, room) : encodeWords(value, room);
  for (const line of folded.split(CRLF)) {
    if (line.length > HARD_MAX_LINE - headerName.length - 2) {
      throw new MimeError("header_too_long", field, `${field} has a word longer than a header line may be`);
    }
  }
  return folded;
}

function displayName(name: string): string {
  if (PLAIN_ASCII.test(name)) {
    // Quoted-string keeps `,` `.` `@` etc. from being read as address syntax.
    return `"${name.replace(/[\\"]/g, "\\$&")}"`;
  }
  return encodeWords(name, MAX_LINE - 10);
}

function formatMailbox(mailbox: Mailbox): string {
  return mailbox.name.length > 0 ? `${displayName(mailbox.name)} <${mailbox.addr}>` : `<${mailbox.addr}>`;
}

function formatMailboxList(value: unknown): string {
  const list = Array.isArray(value) ? value : [value];
  return list
    .filter((item): item is Mailbox => item instanceof Mailbox)
    .map(formatMailbox)
    .join(`,${CRLF} `);
}

// `Display Name <address>` or `"Display, Name" <address>`; the name may not contain angle brackets.
const NAME_ADDR = /^\s*(?:"((?:[^"\\\r\n]|\\.)*)"|([^<>"\r\n]*?))\s*<([^<>\s]+)>\s*$/;

/** Splits `Name <address>` (the form POST /send accepts); a string without angle brackets is a bare address. */
export function splitMailbox(input: string): MimeAddress | undefined {
  const match = NAME_ADDR.exec(input);
  if (!match) return undefined;
  const name = (match[1]?.replace(/\\(.)/g, "$1") ?? match[2] ?? "").trim();
  return { ...(name ? { name } : {}), address: match[3]! };
}

function toMailbox(field: string, input: string | MimeAddress): { addr: string; name?: string } {
  const { address, name } = typeof input === "string" ? (splitMailbox(input) ?? { address: input }) : input;
  checkAddress(`${field}.address`, address);
  if (name !== undefined) assertNoLineBreak(`${field}.name`, name);
  return name ? { addr: address, name } : { addr: address };
}

// --- bodies -----------------------------------------------------------------------------------------------------

const HEX_DIGITS = new TextEncoder().encode("0123456789ABCDEF");
const qpDecoder = new TextDecoder();

/** `From ` at the start of a line, which mbox-style stores rewrite to `>From `. */
function startsFromLine(bytes: Uint8Array, i: number): boolean {
  return bytes[i] === 0x46 && bytes[i + 1] === 0x72 && bytes[i + 2] === 0x6f && bytes[i + 3] === 0x6d && bytes[i + 4] === 0x20;
}

/**
 * Quoted-printable (RFC 2045 §6.7) of the UTF-8 text, with every line break written as CRLF and output lines of at
 * most 76 chars. Also escapes trailing whitespace and a leading `From `, which transports may alter.
 * One pass into a preallocated buffer: it runs over every html and text body, so it is kept allocation-free.
 */
export function encodeQuotedPrintable(text: string): string {
  const bytes = encoder.encode(text);
  // Worst case: every byte becomes `=XX`, plus a 3-byte soft break per 25 escapes.
  const out = new Uint8Array(bytes.length * 3 + Math.ceil(bytes.length / 25) * 3 + 3);
  let o = 0;
  let column = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (byte === 0x0d || byte === 0x0a) {
      if (byte === 0x0d && bytes[i + 1] === 0x0a) i++;
      out[o++] = 0x0d;
      out[o++] = 0x0a;
      column = 0;
      continue;
    }
    const next = bytes[i + 1];
    const atLineEnd = next === undefined || next === 0x0d || next === 0x0a;
    const whitespace = byte === 0x20 || byte === 0x09;
    let literal = whitespace ? !atLineEnd : byte >= 0x21 && byte <= 0x7e && byte !== 0x3d;
    // A soft break `=` must fit after the char unless the char ends the line.
    if (column + (literal ? 1 : 3) > (atLineEnd ? 76 : 75)) {
      out[o++] = 0x3d;
      out[o++] = 0x0d;
      out[o++] = 0x0a;
      column = 0;
    }
    if (column === 0 && byte === 0x46 && startsFromLine(bytes, i)) literal = false;
    if (literal) {
      out[o++] = byte;
      column += 1;
    } else {
      out[o++] = 0x3d;
      out[o++] = HEX_DIGITS[byte >> 4]!;
      out[o++] = HEX_DIGITS[byte & 15]!;
      column += 3;
    }
  }
  return qpDecoder.decode(out.subarray(0, o));
}

function wrapBase64(field: string, contentBase64: string): string {
  // Clients usually send unbroken base64: test that first and only strip whitespace when the test fails.
  let compact = contentBase64;
  if (!BASE64.test(compact)) {
    compact = contentBase64.replace(/\s+/g, "");
    if (!BASE64.test(compact)) throw new MimeError("invalid_attachment", field, `${field} is not valid base64`);
  }
  if (compact.length % 4 !== 0) throw new MimeError("invalid_attachment", field, `${field} is not valid base64`);
  const lines: string[] = [];
  for (let i = 0; i < compact.length; i += 76) lines.push(compact.slice(i, i + 76));
  return lines.join(CRLF);
}

/** RFC 2231 `filename*=UTF-8''...` value: percent-encodes everything outside attr-char. */
function rfc2231Value(value: string): string {
  return encodeURIComponent(value).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

// --- message ----------------------------------------------------------------------------------------------------

function replaceHeaderDump(message: MIMEMessage, name: string, dump: (value: unknown) => string): void {
  const field = message.headers.fields.find((candidate) => candidate.name === name);
  if (!field) throw new Error(`mimetext has no built-in ${name} header field`);
  field.dump = dump;
}

/** The complete message (headers and body), CRLF line endings, ending with CRLF; 7-bit clean unless the caller's
 * addresses are internationalised. */
export function buildMimeMessage(input: MimeMessageInput): string {
  if (input.html === undefined && input.text === undefined) {
    throw new MimeError("missing_body", "html", "a message needs html or text");
  }
  const message = createMimeMessage();
  replaceHeaderDump(message, "From", formatMailboxList);
  replaceHeaderDump(message, "Reply-To", formatMailboxList);
  replaceHeaderDump(message, "To", formatMailboxList);
  replaceHeaderDump(message, "Cc", formatMailboxList);
  replaceHeaderDump(message, "Subject", (value) => (typeof value === "string" ? value : ""));

  message.setSender(toMailbox("from", input.from));
  if (input.to.length > 0) message.setTo(input.to.map((to, i) => toMailbox(`to[${i}]`, to)));
  if (input.cc && input.cc.length > 0) message.setCc(input.cc.map((cc, i) => toMailbox(`cc[${i}]`, cc)));
  if (input.replyTo !== undefined) {
    message.setHeader("Reply-To", new Mailbox(toMailbox("replyTo", input.replyTo), { type: "To" }));
  }
  message.setSubject(unstructuredValue("subject", "Subject", input.subject));
  message.setHeader("Date", formatRfc5322Date(input.date));
  assertNoLineBreak("messageId", input.messageId);
  if (!MESSAGE_ID.test(input.messageId)) {
    throw new MimeError("invalid_message_id", "messageId", "messageId must look like <id@domain>");
  }
  message.setHeader("Message-ID", input.messageId);

  for (const [name, value] of Object.entries(input.headers ?? {})) {
    const field = `headers.${name}`;
    if (!HEADER_NAME.test(name)) throw new MimeError("invalid_header_name", field, `${name} is not a valid header name`);
    if (isReservedHeader(name)) {
      throw new MimeError("reserved_header", field, `${name} is set by the sender and cannot be overridden`);
    }
    message.setHeader(name, unstructuredValue(field, name, value));
  }

  const text = input.text ?? (input.html === undefined ? undefined : textFromHtml(input.html));
  if (text !== undefined) {
    message.addMessage({ contentType: "text/plain", encoding: "quoted-printable", data: encodeQuotedPrintable(text) });
  }
  if (input.html !== undefined) {
    message.addMessage({ contentType: "text/html", encoding: "quoted-printable", data: encodeQuotedPrintable(input.html) });
  }

  for (const [i, attachment] of (input.attachments ?? []).entries()) {
    const field = `attachments[${i}]`;
    assertNoLineBreak(`${field}.filename`, attachment.filename);
    assertNoLineBreak(`${field}.contentType`, attachment.contentType);
    if (!MIME_TYPE.test(attachment.contentType)) {
      throw new MimeError("invalid_attachment", `${field}.contentType`, `${attachment.contentType} is not a media type`);
    }
    const contentId = attachment.contentId;
    if (contentId !== undefined) {
      assertNoLineBreak(`${field}.contentId`, contentId);
      if (!/^<?[^\s<>]+>?$/.test(contentId)) {
        throw new MimeError("invalid_attachment", `${field}.contentId`, "contentId must not contain spaces or <>");
      }
    }
    const part = message.addAttachment({
      filename: "attachment",
      contentType: attachment.contentType,
      data: wrapBase64(`${field}.contentBase64`, attachment.contentBase64),
      inline: contentId !== undefined,
      ...(contentId !== undefined ? { headers: { "Content-ID": `<${contentId.replace(/^<|>$/g, "")}>` } } : {}),
    });
    const disposition = contentId !== undefined ? "inline" : "attachment";
    // mimetext classifies parts with `disposition.includes("inline")`, so a file named `inline.pdf` would count
    // as both kinds and be written twice; decide from the disposition type alone.
    part.isAttachment = () => disposition === "attachment";
    part.isInlineAttachment = () => disposition === "inline";
    // Written here rather than by mimetext, which puts the raw filename between quotes.
    const filename = attachment.filename;
    const asciiName = /^[\x20-\x7e]*$/.test(filename) ? filename.replace(/[\\"]/g, "\\$&") : null;
    part.setHeader("Content-Type", `${attachment.contentType}; name="${asciiName ?? encodeWords(filename, MAX_LINE).replace(/\r\n /g, " ")}"`);
    part.setHeader(
      "Content-Disposition",
      asciiName !== null ? `${disposition}; filename="${asciiName}"` : `${disposition}; filename*=UTF-8''${rfc2231Value(filename)}`,
    );
  }

  return message.asRaw() + CRLF;
}
