// The bytes a message leaves with: composed (or the relay's original bytes), then DKIM-signed with the domain's keys.

import { config } from "../../config";
import type { domains, messages } from "../../db/schema";
import { decryptDkimKey, ed25519Selector } from "../domains/domains";
import type { MessageContent } from "./content";
import { importDkimPrivateKey, signDkim, type DkimPrivateKey } from "./dkim";
import { buildMessageId, buildMimeMessage, formatRfc5322Date } from "./mime";
import { renderTemplate } from "./render";
import { listUnsubscribeHeaders } from "./unsubscribe";
import { renderCampaignMessage, type CampaignRecipient } from "../campaigns/delivery";
import { trackHtml } from "../tracking/rewrite";
import { trackRelayedMessage } from "../tracking/track-relayed";
import { soleAddress } from "./addresses";

export type SigningDomain = Pick<
  typeof domains.$inferSelect,
  "id" | "name" | "dkimSelector" | "dkimPrivateKey" | "dkimEd25519PrivateKey" | "records"
>;
type MessageRow = typeof messages.$inferSelect;

/** The domain's signing keys: RSA always, Ed25519 once its DNS record has been found. */
export type SigningKeys = { rsa: DkimPrivateKey; ed25519?: DkimPrivateKey };

const encoder = new TextEncoder();

export async function loadSigningKeys(env: Env, domain: SigningDomain): Promise<SigningKeys> {
  const rsa = await importDkimPrivateKey(await decryptDkimKey(domain, env));
  const published = domain.records.some((record) => record.purpose === "dkim_ed25519" && record.status === "verified");
  if (!domain.dkimEd25519PrivateKey || !published) return { rsa };
  return { rsa, ed25519: await importDkimPrivateKey(await decryptDkimKey({ dkimPrivateKey: domain.dkimEd25519PrivateKey }, env)) };
}

/**
 * `tag`: the tag of the account database the message is in (src/db/hints.ts), carried by its tracking and unsubscribe
 * links so that a click finds it without asking every database.
 * `campaignRecipient`: for a campaign message, its campaign and contact (loaded for the whole batch).
 * `envelopeRecipients`: who these bytes go to; a tracked relayed message names its recipient when there is one.
 * Returns the signed bytes and the subject they carry (a campaign's is personalised here).
 */
export async function buildSignedMessage(
  env: Env,
  message: MessageRow,
  tag: string,
  content: MessageContent,
  domain: SigningDomain,
  keys: SigningKeys,
  campaignRecipient?: CampaignRecipient,
  envelopeRecipients: readonly string[] = [],
): Promise<{ raw: Uint8Array; subject: string }> {
  let unsigned: Uint8Array;
  let subject = message.subject;
  if (content.kind === "raw") {
    let raw: Uint8Array = Uint8Array.from(atob(content.raw), (char) => char.charCodeAt(0));
    if (message.trackOpens || message.trackClicks) {
      const recipient = envelopeRecipients.length === 1 ? envelopeRecipients[0]! : null;
      raw = await trackRelayedMessage(
        raw,
        { messageId: message.id, fallbackMessageIdHeader: buildMessageId(message.id, message.fromAddress) },
        (html) => tracked(env, message, tag, html, recipient),
      );
    }
    // Relayed broadcast mail to one recipient gets one-click unsubscribe unless it brought its own List-Unsubscribe.
    const sole = envelopeRecipients.length === 1 ? envelopeRecipients[0]! : null;
    const unsubscribe =
      sole !== null && offersUnsubscribe(message) && !/^list-unsubscribe:/im.test(headerSection(raw))
        ? await listUnsubscribeHeaders(config(env), { messageId: message.id, recipient: sole, tag })
        : {};
    unsigned = withRequiredHeaders(raw, message, unsubscribe);
  } else if (content.kind === "campaign") {
    if (!campaignRecipient) throw new Error(`campaign message ${message.id} has no loaded campaign and contact`);
    const rendered = await renderCampaignMessage(env, { messageId: message.id, tag }, campaignRecipient);
    subject = rendered.subject;
    unsigned = encoder.encode(
      buildMimeMessage({
        from: { name: message.fromName ?? undefined, address: message.fromAddress },
        to: [rendered.to],
        replyTo: message.replyTo ?? undefined,
        subject: rendered.subject,
        html: rendered.html === undefined ? undefined : await tracked(env, message, tag, rendered.html, rendered.to),
        text: rendered.text,
        attachments: [],
        headers: rendered.headers,
        messageId: buildMessageId(message.id, message.fromAddress),
        date: new Date(),
      }),
    );
  } else {
    const variables = content.variables;
    const sole = soleAddress([...content.to, ...(content.cc ?? []), ...(content.bcc ?? [])]);
    const html =
      content.html === undefined ? undefined : await tracked(env, message, tag, renderTemplate(content.html, variables, { html: true }), sole);
    unsigned = encoder.encode(
      buildMimeMessage({
        from: { name: message.fromName ?? undefined, address: message.fromAddress },
        to: content.to,
        // Bcc recipients are in the envelope only.
        cc: content.cc,
        replyTo: message.replyTo ?? undefined,
        subject: message.subject,
        html,
        text: content.text === undefined ? undefined : renderTemplate(content.text, variables, { html: false }),
        attachments: content.attachments.map((attachment) => ({
          filename: attachment.filename,
          contentBase64: attachment.content,
          contentType: attachment.content_type,
          contentId: attachment.content_id,
        })),
        // One-click unsubscribe names one recipient, so it is only offered on single-recipient messages of the broadcast
        // stream, or transactional ones that asked (the sender's own List-Unsubscribe is refused on those at
        // acceptance, so the two never meet). A password reset must not invite an unsubscribe.
        headers: {
          ...content.headers,
          ...(sole === null || !offersUnsubscribe(message)
            ? {}
            : await listUnsubscribeHeaders(config(env), { messageId: message.id, recipient: sole, tag })),
        },
        messageId: buildMessageId(message.id, message.fromAddress),
        date: new Date(),
      }),
    );
  }
  return { raw: await signMessage(unsigned, domain, keys), subject };
}

/** The message with the domain's DKIM signatures in front of its headers. */
export async function signMessage(
  unsigned: Uint8Array,
  domain: Pick<SigningDomain, "name" | "dkimSelector">,
  keys: SigningKeys,
): Promise<Uint8Array> {
  // Both signatures cover the same unsigned message; receivers that do not know ed25519-sha256 ignore that one.
  const signature =
    (keys.ed25519
      ? await signDkim(unsigned, { domain: domain.name, selector: ed25519Selector(domain.dkimSelector), privateKey: keys.ed25519 })
      : "") + (await signDkim(unsigned, { domain: domain.name, selector: domain.dkimSelector, privateKey: keys.rsa }));
  const signatureBytes = encoder.encode(signature);
  const signed = new Uint8Array(signatureBytes.length + unsigned.length);
  signed.set(signatureBytes, 0);
  signed.set(unsigned, signatureBytes.length);
  return signed;
}

/** The HTML as it leaves: with the open pixel and click redirects when the message asks for them (after placeholders). */
function tracked(env: Env, message: MessageRow, tag: string, html: string, recipient: string | null): Promise<string> {
  return trackHtml(config(env), html, { messageId: message.id, recipient, tag, opens: message.trackOpens, clicks: message.trackClicks });
}

/** The header section of relayed bytes (within their first 64 KB). */
function headerSection(raw: Uint8Array): string {
  const text = new TextDecoder("latin1").decode(raw.subarray(0, Math.min(raw.length, 64 * 1024)));
  const headerEnd = text.search(/\r?\n\r?\n/);
  return headerEnd >= 0 ? text.slice(0, headerEnd) : text;
}

const messageIdField = /^message-id:/im;

/** Whether relayed bytes leave with a Message-ID of their own; without one, ours is added (`withRequiredHeaders`). */
export const hasOwnMessageId = (raw: Uint8Array) => messageIdField.test(headerSection(raw));

/** A relayed message keeps its own headers; only a missing Message-ID or Date is added (RFC 5322 requires Date). */
/** Whether the message carries one-click List-Unsubscribe: broadcast mail always, transactional mail when asked. */
const offersUnsubscribe = (message: Pick<MessageRow, "stream" | "listUnsubscribe">) => message.stream === "broadcast" || message.listUnsubscribe;

function withRequiredHeaders(raw: Uint8Array, message: MessageRow, extra: Record<string, string>): Uint8Array {
  const header = headerSection(raw);
  const add: string[] = Object.entries(extra).map(([name, value]) => `${name}: ${value}`);
  if (!messageIdField.test(header)) add.push(`Message-ID: ${buildMessageId(message.id, message.fromAddress)}`);
  if (!/^date:/im.test(header)) add.push(`Date: ${formatRfc5322Date(new Date())}`);
  if (add.length === 0) return raw;
  const prefix = encoder.encode(`${add.join("\r\n")}\r\n`);
  const out = new Uint8Array(prefix.length + raw.length);
  out.set(prefix, 0);
  out.set(raw, prefix.length);
  return out;
}
