import { bytesToBase64Url, hmacSha256Hex, timingSafeEqualString } from "../../lib/crypto";
import { and, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../../config";
import { messageRecipients, messages } from "../../db/schema";
import { asProvider, providerOfDomain, recipientDomain } from "../reports/providers";
import { rollupStatements, sendingDomain } from "../reports/rollups";
import { eventStatement } from "../events/events";
import { suppressionStatements } from "../suppressions/suppressions";
import { parseMailbox } from "./addresses";

type Keys = Pick<Config, "encryptionKey">;

// The token names one recipient of one message and is signed, so a link cannot be edited to unsubscribe someone
// else. The signing key is derived from DKIM_ENCRYPTION_KEY (already a secret) with its own label.
const signingKey = (config: Keys) => `unsubscribe:${config.encryptionKey}`;
const signatureLength = 32;

function base64UrlToString(value: string): string {
  const base64 = value.replace(/-/g, "+").replace(/_/g, "/");
  return new TextDecoder().decode(Uint8Array.from(atob(base64), (char) => char.charCodeAt(0)));
}

export async function unsubscribeToken(config: Keys, messageId: string, email: string): Promise<string> {
  const payload = bytesToBase64Url(new TextEncoder().encode(JSON.stringify([messageId, email])));
  const signature = (await hmacSha256Hex(signingKey(config), payload)).slice(0, signatureLength);
  return `${payload}.${signature}`;
}

export async function readUnsubscribeToken(config: Keys, token: string): Promise<{ messageId: string; email: string } | undefined> {
  const [payload, signature, extra] = token.split(".");
  if (!payload || !signature || extra !== undefined || payload.length > 1000) return undefined;
  const expected = (await hmacSha256Hex(signingKey(config), payload)).slice(0, signatureLength);
  if (!(await timingSafeEqualString(signature, expected))) return undefined;
  try {
    const [messageId, email] = JSON.parse(base64UrlToString(payload)) as unknown[];
    return typeof messageId === "string" && typeof email === "string" ? { messageId, email } : undefined;
  } catch {
    return undefined;
  }
}

export async function listUnsubscribeHeaders(config: Pick<Config, "encryptionKey" | "siteUrl">, messageId: string, recipient: string) {
  // The recipient may be written `Name <address>`; the link must name the address, which is what gets suppressed.
  const parsed = parseMailbox(recipient);
  const email = parsed.ok ? parsed.mailbox.address : recipient;
  const url = new URL(`/u/${await unsubscribeToken(config, messageId, email)}`, config.siteUrl);
  // RFC 8058 one-click: mailbox providers POST `List-Unsubscribe=One-Click` to the https URL.
  return { "List-Unsubscribe": `<${url.href}>`, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" };
}

/**
 * Unsubscribes the recipient a token names: the address is suppressed, every contact of it becomes `unsubscribed`
 * and an `unsubscribed` event is recorded, in one batch. Undefined when the message no longer exists.
 */
export async function unsubscribeRecipient(
  env: Env,
  target: { messageId: string; email: string },
): Promise<{ accountId: string; dedupeKey: string } | undefined> {
  const message = await drizzle(env.DB)
    .select({
      accountId: messages.accountId,
      campaignId: messages.campaignId,
      fromAddress: messages.fromAddress,
      testMode: messages.testMode,
      provider: messageRecipients.provider,
    })
    .from(messages)
    .leftJoin(messageRecipients, and(eq(messageRecipients.messageId, messages.id), eq(messageRecipients.email, target.email)))
    .where(eq(messages.id, target.messageId))
    .get();
  if (!message) return undefined;
  const dedupeKey = `unsubscribed:${target.messageId}:${target.email.toLowerCase()}`;
  const key = {
    accountId: message.accountId,
    domain: sendingDomain(message.fromAddress),
    provider: asProvider(message.provider) ?? providerOfDomain(recipientDomain(target.email)),
    campaignId: message.campaignId,
  };
  await env.DB.batch([
    // Counted once per recipient and message: before the event is written, while it does not exist yet.
    ...(message.testMode
      ? []
      : rollupStatements(
          env.DB,
          key,
          { unsubscribes: 1 },
          sql`NOT EXISTS (SELECT 1 FROM events WHERE account_id = ${message.accountId} AND dedupe_key = ${dedupeKey})`,
        )),
    ...suppressionStatements(env.DB, { accountId: message.accountId, email: target.email, reason: "unsubscribe", sourceMessageId: target.messageId }),
    eventStatement(env.DB, {
      accountId: message.accountId,
      type: "unsubscribed",
      subjectId: target.messageId,
      dedupeKey,
      data: { message_id: target.messageId, campaign_id: message.campaignId, email: target.email, method: "one_click" },
    }),
  ]);
  return { accountId: message.accountId, dedupeKey };
}
