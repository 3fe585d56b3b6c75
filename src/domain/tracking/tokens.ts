// Tracking tokens: the path segment of `/t/o/<token>` (open pixel) and `/t/c/<token>` (click redirect). A token is
// `<payload>.<signature>`: the payload (base64url JSON) names the message, the recipient, for a click the exact URL
// that was in the message, and last the tag of the account database the message is in (src/db/hints.ts; tokens made
// before account databases have no tag, and are still read); the signature is an HMAC over it with a key derived from DKIM_ENCRYPTION_KEY under its
// own label. Editing any character of either half makes the token unreadable, so a click can only ever redirect to a
// URL we signed into a message, and a token can only name the message it was made for.

import type { Config } from "../../config";
import { base64ToBytes, bytesToBase64Url, timingSafeEqualString, type WebCryptoKey } from "../../lib/crypto";

type Keys = Pick<Config, "encryptionKey">;

export type OpenTarget = {
  messageId: string;
  recipient: string | null;
  /** The message's database tag as the token was made; undefined in a token made before account databases. */
  tag: string | undefined;
};
export type ClickTarget = OpenTarget & { url: string };

// Bounds the work a request can cause before the signature check; a signed click token of a 4,000-character URL fits.
export const maxTokenLength = 8_192;
// 128 bits of HMAC-SHA256: unforgeable, and 22 characters in a link.
const signatureBytes = 16;

const encoder = new TextEncoder();
const keys = new Map<string, Promise<WebCryptoKey>>();

// Importing the key is most of an HMAC's cost on a short message; the click redirect signs on every request.
function signingKey(config: Keys): Promise<WebCryptoKey> {
  let key = keys.get(config.encryptionKey);
  if (!key) {
    key = crypto.subtle.importKey("raw", encoder.encode(`tracking:${config.encryptionKey}`), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    keys.set(config.encryptionKey, key);
  }
  return key;
}

async function sign(config: Keys, payload: string): Promise<string> {
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", await signingKey(config), encoder.encode(payload)));
  return bytesToBase64Url(mac.subarray(0, signatureBytes));
}

async function token(config: Keys, fields: unknown[]): Promise<string> {
  const payload = bytesToBase64Url(encoder.encode(JSON.stringify(fields)));
  return `${payload}.${await sign(config, payload)}`;
}

type Made<T> = Omit<T, "tag"> & { tag: string };

export const openToken = (config: Keys, target: Made<OpenTarget>) => token(config, ["o", target.messageId, target.recipient, target.tag]);
export const clickToken = (config: Keys, target: Made<ClickTarget>) =>
  token(config, ["c", target.messageId, target.recipient, target.url, target.tag]);

async function readFields(config: Keys, value: string): Promise<unknown[] | undefined> {
  if (value.length > maxTokenLength) return undefined;
  const [payload, signature, extra] = value.split(".");
  if (!payload || !signature || extra !== undefined) return undefined;
  if (!(await timingSafeEqualString(signature, await sign(config, payload)))) return undefined;
  try {
    const fields: unknown = JSON.parse(new TextDecoder().decode(base64ToBytes(payload)));
    return Array.isArray(fields) ? fields : undefined;
  } catch {
    return undefined;
  }
}

const isRecipient = (value: unknown): value is string | null => value === null || typeof value === "string";

/** The fields a token kind has, and the tag after them when it has one (a token made since account databases). */
function tagged(fields: unknown[] | undefined, count: number): { fields: unknown[]; tag: string | undefined } | undefined {
  if (fields?.length === count) return { fields, tag: undefined };
  const tag = fields?.[count];
  return fields?.length === count + 1 && typeof tag === "string" ? { fields: fields.slice(0, count), tag } : undefined;
}

/** The open a token names, or undefined for anything we did not sign (or a click token). */
export async function readOpenToken(config: Keys, value: string): Promise<OpenTarget | undefined> {
  const read = tagged(await readFields(config, value), 3);
  if (!read) return undefined;
  const [kind, messageId, recipient] = read.fields;
  if (kind !== "o" || typeof messageId !== "string" || !isRecipient(recipient)) return undefined;
  return { messageId, recipient, tag: read.tag };
}

/** The click a token names, or undefined for anything we did not sign (or an open token). */
export async function readClickToken(config: Keys, value: string): Promise<ClickTarget | undefined> {
  const read = tagged(await readFields(config, value), 4);
  if (!read) return undefined;
  const [kind, messageId, recipient, url] = read.fields;
  if (kind !== "c" || typeof messageId !== "string" || !isRecipient(recipient) || typeof url !== "string") return undefined;
  return { messageId, recipient, url, tag: read.tag };
}
