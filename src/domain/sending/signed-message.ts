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

/** `campaignRecipient`: for a campaign message, its campaign and contact (loaded for the whole batch). */
export async function buildSignedMessage(
  env: Env,
  message: MessageRow,
  content: MessageContent,
  domain: SigningDomain,
  keys: SigningKeys,
  campaignRecipient?: CampaignRecipient,
): Promise<Uint8Array> {
  let unsigned: Uint8Array;
  if (content.kind === "raw") {
    unsigned = withRequiredHeaders(
      Uint8Array.from(atob(content.raw), (char) => char.charCodeAt(0)),
      message,
    );
  } else if (content.kind === "campaign") {
    if (!campaignRecipient) throw new Error(`campaign message ${message.id} has no loaded campaign and contact`);
    const rendered = await renderCampaignMessage(env, message.id, campaignRecipient);
    unsigned = encoder.encode(
      buildMimeMessage({
        from: { name: message.fromName ?? undefined, address: message.fromAddress },
        to: [rendered.to],
        replyTo: message.replyTo ?? undefined,
        subject: rendered.subject,
        html: rendered.html,
        text: rendered.text,
        attachments: [],
        headers: rendered.headers,
        messageId: buildMessageId(message.id, message.fromAddress),
        date: new Date(),
      }),
    );
  } else {
    const variables = content.variables;
    unsigned = encoder.encode(
      buildMimeMessage({
        from: { name: message.fromName ?? undefined, address: message.fromAddress },
        to: content.to,
        replyTo: message.replyTo ?? undefined,
        subject: message.subject,
        html: content.html === undefined ? undefined : renderTemplate(content.html, variables, { html: true }),
        text: content.text === undefined ? undefined : renderTemplate(content.text, variables, { html: false }),
        attachments: content.attachments.map((attachment) => ({
          filename: attachment.filename,
          contentBase64: attachment.content,
          contentType: attachment.content_type,
        })),
        // One-click unsubscribe names one recipient, so it is only offered on single-recipient messages.
        headers: content.to.length === 1 ? await listUnsubscribeHeaders(config(env), message.id, content.to[0]!) : undefined,
        messageId: buildMessageId(message.id, message.fromAddress),
        date: new Date(),
      }),
    );
  }
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

/** A relayed message keeps its own headers; only a missing Message-ID or Date is added (RFC 5322 requires Date). */
function withRequiredHeaders(raw: Uint8Array, message: MessageRow): Uint8Array {
  const text = new TextDecoder("latin1").decode(raw.subarray(0, Math.min(raw.length, 64 * 1024)));
  const headerEnd = text.search(/\r?\n\r?\n/);
  const header = headerEnd >= 0 ? text.slice(0, headerEnd) : text;
  const add: string[] = [];
  if (!/^message-id:/im.test(header)) add.push(`Message-ID: ${buildMessageId(message.id, message.fromAddress)}`);
  if (!/^date:/im.test(header)) add.push(`Date: ${formatRfc5322Date(new Date())}`);
  if (add.length === 0) return raw;
  const prefix = encoder.encode(`${add.join("\r\n")}\r\n`);
  const out = new Uint8Array(prefix.length + raw.length);
  out.set(prefix, 0);
  out.set(raw, prefix.length);
  return out;
}
