// VERP return paths: with BOUNCE_DOMAIN set, each message's envelope sender is `bounces+<message id>-<signature>@
// BOUNCE_DOMAIN`, so a DSN (sent to the envelope sender) names the message it is about, and the signature keeps
// anyone from filing a bounce for a message by guessing its id.

import type { Config } from "../../config";
import { hmacSha256Hex, timingSafeEqualString } from "../../lib/crypto";

type Keys = Pick<Config, "encryptionKey" | "bounceDomain">;

const signingKey = (config: Keys) => `return-path:${config.encryptionKey}`;
// 64 bits: a forged token has to be guessed online, one DSN per guess.
const signatureLength = 16;
const localPrefix = "bounces+";

/** The envelope sender (MAIL FROM) of a message: its VERP address, or the From address without BOUNCE_DOMAIN. */
export async function returnPath(config: Keys, messageId: string, fromAddress: string): Promise<string> {
  if (!config.bounceDomain) return fromAddress;
  const signature = (await hmacSha256Hex(signingKey(config), messageId)).slice(0, signatureLength);
  return `${localPrefix}${messageId}-${signature}@${config.bounceDomain}`;
}

/**
 * The message id a return path names, when it is one of ours with a valid signature; undefined otherwise (another
 * address, a forged or truncated token, a different bounce domain).
 */
export async function messageOfReturnPath(config: Keys, address: string): Promise<string | undefined> {
  const bare = address.trim().replace(/^<|>$/g, "");
  const at = bare.lastIndexOf("@");
  if (!config.bounceDomain || at < 0 || bare.slice(at + 1).toLowerCase() !== config.bounceDomain) return undefined;
  const local = bare.slice(0, at);
  if (!local.toLowerCase().startsWith(localPrefix)) return undefined;
  const token = local.slice(localPrefix.length);
  const dash = token.lastIndexOf("-");
  if (dash <= 0 || token.length > 64) return undefined;
  const messageId = token.slice(0, dash);
  const expected = (await hmacSha256Hex(signingKey(config), messageId)).slice(0, signatureLength);
  return (await timingSafeEqualString(token.slice(dash + 1).toLowerCase(), expected)) ? messageId : undefined;
}
