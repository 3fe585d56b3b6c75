// VERP return paths: with BOUNCE_DOMAIN set, each recipient's copy of a message goes out in its own SMTP transaction
// with the envelope sender `bounces+<message id>-<signature>@BOUNCE_DOMAIN`, the signature binding the message AND
// that one recipient. A DSN (sent to the envelope sender) or an ARF report (quoting it) then names exactly one
// recipient: every recipient sees its own Return-Path, so a report forged by one of them can only be about itself,
// and the signature keeps anyone from filing a report for a message by guessing its id.
//
// Since account databases, the token starts with the tag of the message's account database and a dot
// (`bounces+1.msg_…-<signature>`; none for `DB`, whose tag is empty, as before), so a report finds the message at once;
// ids and signatures have no dot. The tag is not signed: the message found must still match the signature, and a tag
// that names the wrong database (the account moved since) only costs a look in the others.
//
// Tokens written before return paths were per recipient (still in flight, or quoted by a late report) sign the message
// id alone. Such a token was seen by every recipient of its message, so it is believed only for a message with exactly
// one recipient, where it can name nobody else.

import { findInAccountDatabases, type Ctx, type DatabaseName } from "../../db/client";
import { hintedDatabase } from "../../db/hints";
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

/** A message and the tag of the account database it is in (src/db/hints.ts). */
type MessageOf = { messageId: string; tag: string };

/** The envelope sender (MAIL FROM) of one recipient's copy: its VERP address, or the From address without BOUNCE_DOMAIN. */
export async function returnPath(config: Keys, message: MessageOf, recipient: string, fromAddress: string): Promise<string> {
  if (!config.bounceDomain) return fromAddress;
  const { messageId, tag } = message;
  const hint = tag === "" ? "" : `${tag}.`;
  return `${localPrefix}${hint}${messageId}-${await signature(config, recipientSigned(messageId, recipient))}@${config.bounceDomain}`;
}

/**
 * The SMTP transactions a message goes out in: one per recipient when its return paths are per recipient (VERP),
 * otherwise one for all of them, since every copy has the same envelope sender.
 */
export async function envelopesOf(config: Keys, message: MessageOf, fromAddress: string, recipients: readonly string[]): Promise<Envelope[]> {
  if (!config.bounceDomain) return [{ mailFrom: fromAddress, rcptTo: [...recipients] }];
  return Promise.all(
    recipients.map(async (recipient) => ({ mailFrom: await returnPath(config, message, recipient, fromAddress), rcptTo: [recipient] })),
  );
}

/** The database tag, message id and signature of one of our VERP addresses, unverified; undefined for any other address. */
function tokenOf(config: Keys, address: string): { tag: string | undefined; messageId: string; signature: string } | undefined {
  const bare = address.trim().replace(/^<|>$/g, "");
  const at = bare.lastIndexOf("@");
  if (!config.bounceDomain || at < 0 || bare.slice(at + 1).toLowerCase() !== config.bounceDomain) return undefined;
  const local = bare.slice(0, at);
  if (!local.toLowerCase().startsWith(localPrefix)) return undefined;
  const token = local.slice(localPrefix.length);
  const dash = token.lastIndexOf("-");
  if (dash <= 0 || token.length > 64) return undefined;
  const dot = token.indexOf(".");
  const tag = dot >= 0 && dot < dash ? token.slice(0, dot) : undefined;
  return { tag, messageId: token.slice(tag === undefined ? 0 : dot + 1, dash), signature: token.slice(dash + 1).toLowerCase() };
}

export type ReturnPathOwner =
  /** `database`: the account database the message is in. */
  | { messageId: string; recipient: string; database: DatabaseName }
  | { rejected: "not ours" | "unknown message" | "bad signature" | "legacy token of a message with several recipients"; messageId?: string };

/**
 * The message and the one recipient a return path belongs to, when it is one of ours with a valid signature;
 * otherwise why not (another address, a forged or truncated token, an unknown message, a message-only token of a
 * message with several recipients). The recipient is spelt as the message stores it. The message is looked for in
 * the database the token's tag names, then in the others (a token made before account databases, or before its
 * account moved). `ctx` need not be routed to an account.
 */
export async function ownerOfReturnPath(ctx: Ctx, config: Keys, address: string): Promise<ReturnPathOwner> {
  const token = tokenOf(config, address);
  if (!token) return { rejected: "not ours" };
  const { messageId } = token;
  const found = await findInAccountDatabases(
    ctx.env,
    hintedDatabase(ctx.env, token.tag),
    (db) => findNamedMessage(db, messageId),
    (named) => named.message.accountId,
  );
  if (!found) return { rejected: "unknown message", messageId };
  const { found: named } = found;
  const database = found.database;
  for (const recipient of named.recipients) {
    if (await timingSafeEqualString(token.signature, await signature(config, recipientSigned(messageId, recipient)))) {
      return { messageId, recipient, database };
    }
  }
  if (await timingSafeEqualString(token.signature, await signature(config, messageId))) {
    const [only, ...others] = named.recipients;
    return only && others.length === 0
      ? { messageId, recipient: only, database }
      : { rejected: "legacy token of a message with several recipients", messageId };
  }
  return { rejected: "bad signature", messageId };
}
