// Mail arriving at BOUNCE_DOMAIN through Cloudflare Email Routing: delivery status notifications (RFC 3464,
// multipart/report; report-type=delivery-status) sent to a message's VERP return path, and feedback-loop complaints
// (ARF, RFC 5965, report-type=feedback-report) sent to any address there. postal-mime parses the MIME; the report
// parts are header blocks, which postal-mime also parses (each block is handed to it as a header section).
// A report is tied to a message and ONE of its recipients only through a signed token (return-path.ts): the envelope
// recipient, or else the return path of the original message quoted in the report. Reports without a valid token are
// dropped and logged, never applied; a report block about another recipient than the token's is ignored and logged,
// since anyone who received the message can write one. For the same reason a mailed report never refunds (record.ts).

import { inDatabase, type Ctx } from "../../db/client";
import PostalMime, { type Attachment, type Email, type Header } from "postal-mime";
import { config } from "../../config";
import { sha256Hex } from "../../lib/crypto";
import { logWarning } from "../../lib/log";
import { bounceType } from "../sending/outcome";
import { recordFeedback, type Feedback, type FeedbackResult } from "./record";
import { ownerOfReturnPath, type ReturnPathOwner } from "./return-path";

// Reports carry at most the original message; a larger mail to the bounce domain is not a report we want.
const MAX_REPORT_BYTES = 5 * 1024 * 1024;

type Fields = Map<string, string>;

/** Header blocks separated by blank lines (a delivery-status body) as field maps, names lower-cased. */
async function fieldBlocks(text: string): Promise<Fields[]> {
  const blocks = text
    .replace(/\r\n/g, "\n")
    .split(/\n[ \t]*\n/)
    .filter((block) => block.trim());
  return Promise.all(blocks.map(async (block) => headerMap((await PostalMime.parse(`${block.trim()}\n\n`)).headers)));
}

function headerMap(headers: Header[]): Fields {
  const fields: Fields = new Map();
  for (const header of headers) if (!fields.has(header.key)) fields.set(header.key, header.value.replace(/\s+/g, " ").trim());
  return fields;
}

const partText = (part: Attachment) => (typeof part.content === "string" ? part.content : new TextDecoder().decode(part.content));

/** `rfc822; jane@example.com` → `jane@example.com`. */
const addressOf = (value: string | undefined) =>
  value
    ?.replace(/^[^;]*;/, "")
    .trim()
    .replace(/^<|>$/g, "") || undefined;

/** The headers of the original message a report quotes (message/rfc822 or text/rfc822-headers). */
async function originalHeaders(email: Email): Promise<Fields | undefined> {
  const part = email.attachments.find((attachment) => attachment.mimeType === "message/rfc822" || attachment.mimeType === "text/rfc822-headers");
  if (!part) return undefined;
  const text = partText(part).replace(/\r\n/g, "\n");
  const head = text.split(/\n[ \t]*\n/)[0] ?? "";
  return headerMap((await PostalMime.parse(`${head}\n\n`)).headers);
}

type ParsedReport = {
  type: "dsn" | "arf";
  /**
   * Each report with the addresses it names as its recipient (a DSN block's Original- and Final-Recipient, an ARF's
   * Original-Rcpt-To); none when an ARF report redacts it.
   */
  reports: (Omit<Feedback, "target" | "sourceId" | "source" | "recipient"> & { named: string[] })[];
  returnPaths: string[];
  /** The report's own Message-ID, which identifies it (undefined when it has none). */
  messageId: string | undefined;
};

/** The reports one mail carries, with the return paths that may name its message (envelope first). */
async function parseReport(raw: ArrayBuffer | string): Promise<ParsedReport | undefined> {
  const email = await PostalMime.parse(raw, { forceRfc822Attachments: true });
  const contentType = email.headers.find((header) => header.key === "content-type")?.value.toLowerCase() ?? "";
  if (!contentType.startsWith("multipart/report")) return undefined;
  const original = await originalHeaders(email);
  const quotedReturnPath = original?.get("return-path");

  const deliveryStatus = email.attachments.find((part) => part.mimeType === "message/delivery-status");
  if (deliveryStatus) {
    const [, ...recipientBlocks] = await fieldBlocks(partText(deliveryStatus));
    const reports = recipientBlocks.flatMap((fields): ParsedReport["reports"] => {
      const named = [addressOf(fields.get("original-recipient")), addressOf(fields.get("final-recipient"))].filter(
        (address): address is string => address !== undefined,
      );
      const action = fields.get("action")?.toLowerCase();
      const status = fields.get("status")?.match(/^\d\.\d{1,3}\.\d{1,3}/)?.[0];
      const diagnostic = fields.get("diagnostic-code")?.replace(/^[^;]*;\s*/, "");
      if (named.length === 0 || !action) return [];
      if (action === "failed") {
        // A permanent failure is classified as a synchronous refusal with the same enhanced code would be.
        const type = status?.startsWith("4.") ? "soft" : bounceType({ enhanced: status });
        return [{ named, kind: "bounced", bounceType: type, status, diagnostic, final: type === "soft" }];
      }
      if (action === "delayed") return [{ named, kind: "deferred", bounceType: "soft", status, diagnostic }];
      if (action === "delivered" || action === "relayed" || action === "expanded") return [{ named, kind: "delivered", status, diagnostic }];
      return [];
    });
    return { type: "dsn", reports, returnPaths: quotedReturnPath ? [quotedReturnPath] : [], messageId: email.messageId };
  }

  const feedbackReport = email.attachments.find((part) => part.mimeType === "message/feedback-report");
  if (feedbackReport) {
    const [fields = new Map<string, string>()] = await fieldBlocks(partText(feedbackReport));
    // Only the envelope recipient counts: the quoted To header lists every visible recipient of the message, and
    // feedback loops often redact Original-Rcpt-To (RFC 6590), leaving the token to say whose copy it was.
    const recipient = addressOf(fields.get("original-rcpt-to"));
    const feedbackType = fields.get("feedback-type")?.toLowerCase() ?? "abuse";
    const returnPaths = [fields.get("original-mail-from"), quotedReturnPath].filter((value): value is string => Boolean(value));
    // `not-spam` and `virus` reports are not complaints about the sender's mail.
    const complaint = feedbackType === "abuse" || feedbackType === "fraud" || feedbackType === "other";
    return {
      type: "arf",
      reports: complaint ? [{ named: recipient ? [recipient] : [], kind: "complained", feedbackType }] : [],
      returnPaths,
      messageId: email.messageId,
    };
  }
  return undefined;
}

/**
 * Applies the report in one mail to BOUNCE_DOMAIN. `to` is the envelope recipient (a VERP address for DSNs). `ctx`
 * is not routed to an account: the return path names the message, and so its account database.
 * Returns what was recorded, or undefined when the mail was dropped.
 */
async function ingestReport(ctx: Ctx, to: string, raw: ArrayBuffer | string): Promise<FeedbackResult | undefined> {
  const { env } = ctx;
  const settings = config(env);
  const parsed = await parseReport(raw).catch(() => undefined);
  if (!parsed || parsed.reports.length === 0) {
    logWarning("feedback mail dropped: not a delivery-status or abuse report", { to });
    return undefined;
  }
  let owner: Extract<ReturnPathOwner, { recipient: string }> | undefined;
  for (const candidate of [to, ...parsed.returnPaths]) {
    const found = await ownerOfReturnPath(ctx, settings, candidate);
    if ("recipient" in found) {
      owner = found;
      break;
    }
    if (found.rejected !== "not ours")
      logWarning("feedback return path refused", { address: candidate, reason: found.rejected, message_id: found.messageId });
  }
  if (!owner) {
    logWarning("feedback mail dropped: no valid return-path token", { to, type: parsed.type });
    return undefined;
  }
  const { messageId, recipient, database } = owner;
  const wanted = recipient.toLowerCase();
  const about = parsed.reports.filter((report) => report.named.length === 0 || report.named.some((address) => address.toLowerCase() === wanted));
  const others = [...new Set(parsed.reports.flatMap((report) => (about.includes(report) ? [] : report.named)))];
  if (others.length > 0) {
    logWarning("feedback ignored: the report names recipients its return path does not belong to", {
      type: parsed.type,
      message_id: messageId,
      recipient,
      named: others,
    });
  }
  // The report's own Message-ID identifies it; without one, its bytes do.
  const sourceId = parsed.messageId ?? (await sha256Hex(typeof raw === "string" ? raw : new TextDecoder().decode(raw)));
  return recordFeedback(
    inDatabase(ctx, database),
    about.map(({ named: _named, ...report }) => ({ ...report, recipient, target: { messageId }, source: parsed.type, sourceId })),
  );
}

/** The Worker's email() handler. */
export async function handleFeedbackEmail(message: ForwardableEmailMessage, ctx: Ctx): Promise<void> {
  if (message.rawSize > MAX_REPORT_BYTES) {
    message.setReject("Message too large for a delivery report");
    return;
  }
  await ingestReport(ctx, message.to, await new Response(message.raw).arrayBuffer());
}
