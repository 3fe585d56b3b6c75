// VERP return paths: with BOUNCE_DOMAIN set, each recipient's copy of a message goes out in its own SMTP transaction
// with the envelope sender `bounces+<message id>-<signature>@BOUNCE_DOMAIN`, the signature binding the message AND
// that one recipient. A DSN (sent to the envelope sender) or an ARF report (quoting it) then names exactly one
// recipient: every recipient sees its own Return-Path, so a report forged by one of them can only be about itself,
// and the signature keeps anyone from filing a report for a message by guessing its id.
//
// Tokens written before return paths were per recipient (still in flight, or quoted by a late report) sign the message
// id alone. Such a token was seen by every recipient of its message, so it is believed only for a message with exactly
// one recipient, where it can name nobody else.

import type { Ctx } from "../../db/client";
import type { Config } from "../../config";
import { hmacSha256Hex, timingSafeEqualString } from "../../lib/crypto";
import { findNamedMessage } from "../sending/messages";
import type { Envelope } from "../transport/types";

type Keys = Pick<Config, "encryptionKey" | "bounceDomain">;

const signingKey = (config: Keys) => `return-path:${config.encryptionKey}`;
// 64 bits: a forged token has to be guessed online, one DSN per guess.
const signatureLength = 16;
const localPrefix = "bounces+";

const signature = async (config: Keys, signed: string) => (await hmacSha256Hex(signingKey(config), signed)).slice(0, signatureLength);
// The message-only form can never equal this one: a message id has no newline.
const recipientSigned = (messageId: string, recipient: string) => `${messageId}\n${recipient.trim().toLowerCase()}`;

/** The envelope sender (MAIL FROM) of one recipient's copy: its VERP address, or the From address without BOUNCE_DOMAIN. */
export async function returnPath(config: Keys, messageId: string, recipient: string, fromAddress: string): Promise<string> {
  if (!config.bounceDomain) return fromAddress;
  return `${localPrefix}${messageId}-${await signature(config, recipientSigned(messageId, recipient))}@${config.bounceDomain}`;
}

/**
 * The SMTP transactions a message goes out in: one per recipient when its return paths are per recipient (VERP),
 * otherwise one for all of them, since every copy has the same envelope sender.
 */
export async function envelopesOf(config: Keys, messageId: string, fromAddress: string, recipients: readonly string[]): Promise<Envelope[]> {
  if (!config.bounceDomain) return [{ mailFrom: fromAddress, rcptTo: [...recipients] }];
  return Promise.all(
    recipients.map(async (recipient) => ({ mailFrom: await returnPath(config, messageId, recipient, fromAddress), rcptTo: [recipient] })),
  );
}

/** The message id and signature of one of our VERP addresses, unverified; undefined for any other address. */
function tokenOf(config: Keys, address: string): { messageId: string; signature: string } | undefined {
  const bare = address.trim().replace(/^<|>$/g, "");
  const at = bare.lastIndexOf("@");
  if (!config.bounceDomain || at < 0 || bare.slice(at + 1).toLowerCase() !== config.bounceDomain) return undefined;
  const local = bare.slice(0, at);
  if (!local.toLowerCase().startsWith(localPrefix)) return undefined;
  const token = local.slice(localPrefix.length);
  const dash = token.lastIndexOf("-");
  if (dash <= 0 || token.length > 64) return undefined;
  return { messageId: token.slice(0, dash), signature: token.slice(dash + 1).toLowerCase() };
}

export type ReturnPathOwner =
  | { messageId: string; recipient: string }
  | { rejected: "not ours" | "unknown message" | "bad signature" | "legacy token of a message with several recipients"; messageId?: string };

/**
 * The message and the one recipient a return path belongs to, when it is one of ours with a valid signature;
 * otherwise why not (another address, a forged or truncated token, an unknown message, a message-only token of a
 * message with several recipients). The recipient is spelt as the message stores it.
 */
export async function ownerOfReturnPath(ctx: Ctx, config: Keys, address: string): Promise<ReturnPathOwner> {
  const { db } = ctx;
  const token = tokenOf(config, address);
  if (!token) return { rejected: "not ours" };
  const { messageId } = token;
  const named = await findNamedMessage(db, messageId);
  if (!named) return { rejected: "unknown message", messageId };
  for (const recipient of named.recipients) {
    if (await timingSafeEqualString(token.signature, await signature(config, recipientSigned(messageId, recipient)))) {
      return { messageId, recipient };
    }
  }
  if (await timingSafeEqualString(token.signature, await signature(config, messageId))) {
    const [only, ...others] = named.recipients;
    return only && others.length === 0
      ? { messageId, recipient: only }
      : { rejected: "legacy token of a message with several recipients", messageId };
  }
  return { rejected: "bad signature", messageId };
}
