import { base64ToBytes, bytesToBase64, hmacSha256Hex } from "../../lib/crypto";

// Two signatures on every delivery, computed from the same secret:
// - `X-Service-Signature: t=<unix>,v1=<hex>`, the spec's scheme: HMAC-SHA256 over `<t>.<raw body>`, keyed with the
//   secret string exactly as shown to the user (UTF-8 bytes, `whsec_` prefix included);
// - the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`), keyed with
//   the base64-decoded bytes after `whsec_`, so the `standardwebhooks` libraries (and Svix's) verify them unchanged.
// While a rotated secret is still valid each scheme carries one signature per secret, newest first.

export const SECRET_PREFIX = "whsec_";
// 24 bytes encode to 32 base64 characters without padding (the length Svix uses) and give a 192-bit HMAC key.
const SECRET_BYTES = 24;

export function generateWebhookSecret(): string {
  return SECRET_PREFIX + bytesToBase64(crypto.getRandomValues(new Uint8Array(SECRET_BYTES)));
}

/** Enough to tell two secrets apart in a list, never enough to use: `whsec_…abcd`. */
export function maskWebhookSecret(secret: string): string {
  return `${SECRET_PREFIX}…${secret.slice(-4)}`;
}

export type SignatureHeaders = {
  "X-Service-Signature": string;
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
};

/** The Standard Webhooks key: the bytes the base64 after `whsec_` encodes. */
function standardWebhooksKey(secret: string): Uint8Array<ArrayBuffer> {
  return base64ToBytes(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret);
}

async function hmacSha256Base64(key: Uint8Array<ArrayBuffer>, message: string): Promise<string> {
  const cryptoKey = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return bytesToBase64(new Uint8Array(await crypto.subtle.sign("HMAC", cryptoKey, new TextEncoder().encode(message))));
}

/**
 * Signature headers for one delivery attempt. `secrets` are the endpoint's valid secrets, newest first (two during
 * a rotation); `timestamp` is unix seconds, taken fresh for every attempt so a retry is not refused as a replay.
 */
export async function signWebhook(input: {
  secrets: readonly string[];
  eventId: string;
  timestamp: number;
  body: string;
}): Promise<SignatureHeaders> {
  const t = String(input.timestamp);
  const [service, standard] = await Promise.all([
    Promise.all(input.secrets.map((secret) => hmacSha256Hex(secret, `${t}.${input.body}`))),
    Promise.all(input.secrets.map((secret) => hmacSha256Base64(standardWebhooksKey(secret), `${input.eventId}.${t}.${input.body}`))),
  ]);
  return {
    "X-Service-Signature": [`t=${t}`, ...service.map((hex) => `v1=${hex}`)].join(","),
    "webhook-id": input.eventId,
    "webhook-timestamp": t,
    // Standard Webhooks separates several signatures with spaces.
    "webhook-signature": standard.map((b64) => `v1,${b64}`).join(" "),
  };
}
