// Mail for a receiving domain, handed to the Worker's email() handler by Cloudflare Email Routing (docs/inbound.md).
// Everything that decides whether mail is taken happens before the handler returns, so a refusal reaches the sending
// server as an SMTP reply: setReject (permanent) for a domain or address that does not receive, a message over the
// size or attachment caps, or MIME postal-mime cannot read; a thrown InboundDeferral (Email Routing answers a failed
// Worker with a temporary error, and the sender retries) for a domain past its hourly cap.
//
// Accepted mail is written R2 first (raw bytes, attachments), then one D1 batch: the row, guarded by the hourly cap,
// its `email.received` event, and for a reply to a message we sent the `replied` event on that message and the
// rollups' `replies`. The row's id is derived from the recipient, the Message-ID and a digest of the content, so a
// redelivery stores nothing twice and emits no second event, while another mail reusing a Message-ID is kept.

import { and, eq, inArray, sql } from "drizzle-orm";
import { config } from "../../config";
import { inDatabase, statement, type AccountDb, type Ctx, batch } from "../../db/client";
import { tagOf } from "../../db/hints";
import { messageRecipients, messages } from "../../db/schema";
import { sha256Hex } from "../../lib/crypto";
import { idFromDigest } from "../../lib/ids";
import { logWarning } from "../../lib/log";
import { eventStatement, type EventInput } from "../events/events";
import { asProvider, providerOfDomain, recipientDomain } from "../reports/providers";
import { rollupStatements, sendingDomain } from "../reports/rollups";
import { dispatchEventInputs } from "../webhooks/dispatch";
import { MAX_INBOUND_ATTACHMENTS, MAX_INBOUND_BYTES, parseInbound, textExcerpt, type ParsedInbound } from "./parse";
import { acceptsLocalPart, receivingDomain, storedSince } from "./receiving";
import { attachmentKey, bodyKey, objectKeys, rawKey, signedDownloadUrl } from "./store";

/** A refusal the sending server should retry later (4xx): the handler throws it instead of calling setReject. */
export class InboundDeferral extends Error {
  override name = "InboundDeferral";
}

/** Bodies up to this many characters (text and HTML together) stay in the row; larger ones go to R2. */
const INLINE_BODY_CHARS = 100_000;
const hourMs = 3_600_000;

/** Our Message-ID form (src/domain/sending/mime.ts, buildMessageId): `<msg_…@sender domain>`. */
const ourMessageId = /^<(msg_[0-9A-Za-z]{22})@([^<>\s]+)>$/;

export type ThreadedMessage = {
  id: string;
  campaignId: string | null;
  fromAddress: string;
  stream: "transactional" | "broadcast";
  provider: string | null;
};

/**
 * The messages of the account that `parsed` answers, with the provider of the recipient who answers: those its
 * In-Reply-To and References name (our Message-ID form) that were sent to the reply's envelope sender or From address
 * (compared without case, a `+tag` kept as written). Anyone can write a Message-ID into In-Reply-To; only a
 * recipient's answer is a reply. None when it names none.
 */
function threadCandidatesQuery(db: AccountDb, accountId: string, parsed: ParsedInbound, envelopeFrom: string) {
  const candidates = [parsed.inReplyTo, ...[...parsed.references].reverse()].flatMap((value) => {
    const match = value ? ourMessageId.exec(value) : null;
    return match ? [{ id: match[1]!, domain: match[2]!.toLowerCase() }] : [];
  });
  const senders = [...new Set([parsed.fromAddress?.toLowerCase(), envelopeFrom.trim().toLowerCase()])].filter(
    (address): address is string => !!address,
  );
  if (candidates.length === 0 || senders.length === 0) return undefined;
  const query = db
    .select({
      id: messages.id,
      campaignId: messages.campaignId,
      fromAddress: messages.fromAddress,
      stream: messages.stream,
      provider: messageRecipients.provider,
    })
    .from(messages)
    .innerJoin(messageRecipients, and(eq(messageRecipients.messageId, messages.id), inArray(sql`lower(${messageRecipients.email})`, senders)))
    .where(
      and(
        eq(messages.accountId, accountId),
        inArray(
          messages.id,
          candidates.slice(0, 90).map((candidate) => candidate.id),
        ),
      ),
    );
  return { candidates, query };
}

/**
 * The message `parsed` answers among `rows`: In-Reply-To first, then References from the most recent. A candidate
 * counts only when its Message-ID's domain is the message's From domain, as we wrote it.
 */
function threadedMessage(candidates: { id: string; domain: string }[], rows: ThreadedMessage[]): ThreadedMessage | undefined {
  return candidates
    .map((candidate) => rows.find((row) => row.id === candidate.id && sendingDomain(row.fromAddress) === candidate.domain))
    .find((row) => row !== undefined);
}

/**
 * What makes two deliveries one mail: the same body bytes and the same From, To, Cc, Subject and Date. A redelivery
 * (Email Routing retrying after a failed handler) is that mail again, with perhaps other trace headers (Received,
 * ARC-*) on top; another mail that reuses a Message-ID (a careless or hostile sender) differs here and is kept.
 */
async function contentDigest(raw: Uint8Array, parsed: ParsedInbound): Promise<string> {
  const body = raw.subarray(headerEnd(raw));
  const headers = JSON.stringify([parsed.fromHeader, parsed.to, parsed.cc, parsed.subject, parsed.date]);
  const bytes = new Uint8Array(headers.length * 3 + 1 + body.byteLength);
  const { written } = new TextEncoder().encodeInto(`${headers}\n`, bytes);
  bytes.set(body, written);
  return sha256Hex(bytes.subarray(0, written + body.byteLength));
}

/** Where the body starts: after the first empty line (CRLF or bare LF), or the end when there is none. */
function headerEnd(raw: Uint8Array): number {
  for (let index = 0; index < raw.byteLength - 1; index++) {
    if (raw[index] !== 0x0a) continue;
    if (raw[index + 1] === 0x0a) return index + 2;
    if (raw[index + 1] === 0x0d && raw[index + 2] === 0x0a) return index + 3;
  }
  return raw.byteLength;
}

export type InboundOutcome =
  | { kind: "stored"; id: string; threadedTo?: string }
  | { kind: "duplicate"; id: string }
  | { kind: "rejected"; reason: string };

function reject(message: ForwardableEmailMessage, reason: string, details: Record<string, unknown>): InboundOutcome {
  message.setReject(reason);
  logWarning("inbound mail refused", { reason, to: message.to, ...details });
  return { kind: "rejected", reason };
}

/**
 * The email() handler's path for mail that is not to BOUNCE_DOMAIN. `unrouted` is the handler's context: the
 * recipient's domain (in `DB`) names the account, and the mail is stored in that account's database.
 */
export async function handleInboundEmail(message: ForwardableEmailMessage, unrouted: Ctx): Promise<InboundOutcome> {
  const { env } = unrouted;
  const settings = config(env);
  const recipient = message.to.trim().toLowerCase();
  const at = recipient.lastIndexOf("@");
  const localPart = recipient.slice(0, at);
  const domainName = recipient.slice(at + 1);
  const since = new Date(Date.now() - hourMs).toISOString();
  const cap = settings.inboundMaxPerHour;
  const found = at > 0 ? await receivingDomain(unrouted.shared, domainName) : undefined;
  if (!found) return reject(message, `5.1.2 <${recipient}>: this domain does not receive mail here`, { domain: domainName });
  const { domain } = found;
  if (!acceptsLocalPart(domain, localPart)) return reject(message, `5.1.1 <${recipient}>: no such mailbox`, { domain_id: domain.id });
  if (message.rawSize > MAX_INBOUND_BYTES) {
    return reject(message, `5.3.4 Message too big: ${message.rawSize} bytes, the limit is ${MAX_INBOUND_BYTES}`, { domain_id: domain.id });
  }
  // The account's rows are being copied to another database: mail stored now could be left behind, so it waits.
  if (found.movingTo !== null) {
    logWarning("inbound mail deferred: account moving", { domain_id: domain.id, moving_to: found.movingTo });
    throw new InboundDeferral(`4.3.0 ${domain.name} is briefly not receiving; try again later`);
  }
  const ctx = inDatabase(unrouted, found.database);
  const { db } = ctx;

  const raw = new Uint8Array(await new Response(message.raw).arrayBuffer());
  if (raw.byteLength > MAX_INBOUND_BYTES) {
    return reject(message, `5.3.4 Message too big: ${raw.byteLength} bytes, the limit is ${MAX_INBOUND_BYTES}`, { domain_id: domain.id });
  }
  let parsed: ParsedInbound;
  try {
    parsed = await parseInbound(raw);
  } catch (error) {
    return reject(message, "5.6.0 The message could not be read as MIME", {
      domain_id: domain.id,
      error: error instanceof Error ? error.message : String(error),
    });
  }
  if (parsed.attachments.length > MAX_INBOUND_ATTACHMENTS) {
    return reject(message, `5.3.4 Too many attachments: ${parsed.attachments.length}, the limit is ${MAX_INBOUND_ATTACHMENTS}`, {
      domain_id: domain.id,
    });
  }

  const identity = `${recipient}\n${parsed.messageId ?? ""}\n${await contentDigest(raw, parsed)}`;
  const id = idFromDigest("inb", new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(identity))));
  // How much of the domain's hourly cap is used, whether this mail is stored already, and what it answers: one round trip.
  const stateQuery = db
    .select({
      stored: sql<number>`${storedSince(domain.id, since, cap)}`,
      existing: sql<string | null>`(SELECT id FROM inbound_emails WHERE id = ${id})`,
    })
    .from(sql`(SELECT 1)`);
  const threading = threadCandidatesQuery(db, domain.accountId, parsed, message.from);
  const [[state], threadRows] = threading ? await db.batch([stateQuery, threading.query]) : [await stateQuery, []];
  if (state?.existing) return { kind: "duplicate", id };
  if ((state?.stored ?? 0) >= cap) {
    logWarning("inbound mail deferred: hourly cap", { domain_id: domain.id, cap });
    throw new InboundDeferral(`4.7.1 ${domain.name} has received its ${cap} messages this hour; try again later`);
  }
  const thread = threading ? threadedMessage(threading.candidates, threadRows) : undefined;
  const largeBody = (parsed.text?.length ?? 0) + (parsed.html?.length ?? 0) > INLINE_BODY_CHARS;
  await Promise.all([
    env.BLOBS.put(rawKey(id), raw, { httpMetadata: { contentType: "message/rfc822" } }),
    ...parsed.attachments.map((attachment, index) =>
      env.BLOBS.put(attachmentKey(id, index), attachment.content, { httpMetadata: { contentType: attachment.content_type } }),
    ),
    ...(largeBody ? [env.BLOBS.put(bodyKey(id), JSON.stringify({ text: parsed.text, html: parsed.html }))] : []),
  ]);

  const attachments = parsed.attachments.map(({ content: _content, ...meta }) => meta);
  const row = {
    id,
    account_id: domain.accountId,
    domain_id: domain.id,
    envelope_from: message.from.slice(0, 998),
    envelope_to: recipient,
    from_header: parsed.fromHeader,
    from_address: parsed.fromAddress,
    to_addresses: JSON.stringify(parsed.to),
    cc_addresses: JSON.stringify(parsed.cc),
    reply_to: parsed.replyTo,
    subject: parsed.subject,
    date: parsed.date,
    message_id_header: parsed.messageId,
    in_reply_to: parsed.inReplyTo,
    references: JSON.stringify(parsed.references),
    text: largeBody ? null : parsed.text,
    html: largeBody ? null : parsed.html,
    body_key: largeBody ? bodyKey(id) : null,
    attachments: JSON.stringify(attachments),
    size: raw.byteLength,
    raw_key: rawKey(id),
    authentication: JSON.stringify(parsed.authentication),
    auto_submitted: parsed.autoSubmitted,
    in_reply_to_message_id: thread?.id ?? null,
    campaign_id: thread?.campaignId ?? null,
  };
  const columns = Object.keys(row);
  const insert = statement(
    db,
    sql`INSERT INTO inbound_emails (${sql.raw(columns.map((column) => `"${column}"`).join(", "))})
      SELECT ${sql.join(
        Object.values(row).map((value) => sql`${value}`),
        sql`, `,
      )}
      WHERE ${storedSince(domain.id, since, cap)} < ${cap}
      ON CONFLICT (id) DO NOTHING`,
  );
  const stored = sql`EXISTS (SELECT 1 FROM inbound_emails WHERE id = ${id})`;

  const links = await Promise.all(attachments.map((_, index) => signedDownloadUrl(settings, { id, tag: tagOf(db) }, index)));
  const received: EventInput = {
    accountId: domain.accountId,
    type: "email.received",
    subjectId: id,
    dedupeKey: `email.received:${id}`,
    data: {
      inbound_id: id,
      domain_id: domain.id,
      envelope_from: row.envelope_from,
      envelope_to: recipient,
      from: parsed.fromHeader,
      to: parsed.to,
      cc: parsed.cc,
      subject: parsed.subject,
      date: parsed.date,
      message_id: parsed.messageId,
      in_reply_to: parsed.inReplyTo,
      references: parsed.references,
      text_excerpt: textExcerpt(parsed),
      attachments: attachments.map((attachment, index) => ({
        index,
        filename: attachment.filename,
        content_type: attachment.content_type,
        size: attachment.size,
        content_id: attachment.content_id,
        download_url: links[index]!.url,
        download_expires_at: links[index]!.expiresAt,
      })),
      size: raw.byteLength,
      authentication: { spf: parsed.authentication.spf, dkim: parsed.authentication.dkim, dmarc: parsed.authentication.dmarc },
      auto_submitted: parsed.autoSubmitted,
      in_reply_to_message_id: thread?.id ?? null,
      campaign_id: thread?.campaignId ?? null,
    },
  };
  // An auto-reply (an out-of-office) is linked to its message but is not a reply: no event, not counted.
  const replied: EventInput | undefined =
    thread && !parsed.autoSubmitted
      ? {
          accountId: domain.accountId,
          type: "replied",
          subjectId: thread.id,
          dedupeKey: `replied:${id}`,
          data: { message_id: thread.id, campaign_id: thread.campaignId, inbound_id: id, from: parsed.fromHeader, subject: parsed.subject },
        }
      : undefined;
  const firstReply = replied
    ? sql`${stored} AND NOT EXISTS (SELECT 1 FROM events WHERE account_id = ${domain.accountId} AND dedupe_key = ${replied.dedupeKey})`
    : undefined;
  const results = await batch(db, [
    insert,
    eventStatement(db, received, stored),
    // Before the event it checks for: counted once however often the mail is delivered.
    ...(replied && thread && firstReply
      ? [
          ...rollupStatements(
            db,
            {
              accountId: domain.accountId,
              domain: sendingDomain(thread.fromAddress),
              provider: asProvider(thread.provider) ?? (parsed.fromAddress ? providerOfDomain(recipientDomain(parsed.fromAddress)) : undefined),
              campaignId: thread.campaignId,
              stream: thread.stream,
            },
            { replies: 1 },
            firstReply,
          ),
          eventStatement(db, replied, stored),
        ]
      : []),
  ]);
  if (results[0]!.meta.changes === 0) {
    // Nothing inserted: the same mail stored meanwhile by a concurrent delivery, or the cap reached by others.
    const now = await db.$client.prepare("SELECT 1 AS found FROM inbound_emails WHERE id = ?").bind(id).first();
    if (now) return { kind: "duplicate", id };
    await env.BLOBS.delete(objectKeys({ id, attachments, bodyKey: row.body_key }));
    throw new InboundDeferral(`4.7.1 ${domain.name} has received its ${cap} messages this hour; try again later`);
  }
  await dispatchEventInputs(ctx, replied ? [received, replied] : [received]);
  return { kind: "stored", id, threadedTo: thread?.id };
}
