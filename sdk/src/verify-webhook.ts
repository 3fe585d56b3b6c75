// Verifies the `X-Service-Signature` header of a Mailforge webhook. Self-contained and WebCrypto-only, so this one
// file can be copied into a Node 18+, Deno, Bun, browser or Cloudflare Workers project as it is.
//
//   const result = await verifyWebhook(process.env.MAILFORGE_WEBHOOK_SECRET, request.headers, rawBody);
//   if (!result.ok) return reply(400, result.reason);
//
// `rawBody` must be the body exactly as received (before any JSON parsing and re-serialising).

export const WEBHOOK_TOLERANCE_SECONDS = 300;

export type VerifyWebhookResult =
  | { ok: true; timestamp: number }
  | { ok: false; reason: "malformed_header" | "timestamp_out_of_tolerance" | "signature_mismatch" };

const encoder = new TextEncoder();

/** The request's headers (a fetch `Headers`, or Node's `request.headers`), or the `X-Service-Signature` value alone. */
export type WebhookHeaders = string | Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

function signatureHeader(headers: WebhookHeaders): string {
  if (typeof headers === "string") return headers;
  if (headers instanceof Headers) return headers.get("x-service-signature") ?? "";
  const name = Object.keys(headers).find((key) => key.toLowerCase() === "x-service-signature");
  const value = name === undefined ? undefined : headers[name];
  return (typeof value === "string" ? value : value?.join(",")) ?? "";
}

/**
 * @param secret the endpoint secret as shown when it was issued (`whsec_…`, used whole as the HMAC key)
 * @param headers the request's headers, or the value of `X-Service-Signature`: `t=<unix seconds>,v1=<hex>[,v1=<hex>…]`
 * @param rawBody the request body exactly as received
 * @param now current time in unix seconds (defaults to the clock); the header's `t` must be within 300 s of it
 */
export async function verifyWebhook(secret: string, headers: WebhookHeaders, rawBody: string, now?: number): Promise<VerifyWebhookResult> {
  const header = signatureHeader(headers);
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(",")) {
    const separator = part.indexOf("=");
    if (separator < 0) continue;
    const key = part.slice(0, separator).trim();
    const value = part.slice(separator + 1).trim();
    if (key === "t" && /^\d{1,12}$/.test(value)) timestamp = Number(value);
    // Other schemes (a future v2=) are skipped, so adding one never breaks this verifier.
    else if (key === "v1" && /^[0-9a-f]{64}$/i.test(value)) signatures.push(value.toLowerCase());
  }
  if (timestamp === undefined || signatures.length === 0) return { ok: false, reason: "malformed_header" };

  const current = now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(current - timestamp) > WEBHOOK_TOLERANCE_SECONDS) return { ok: false, reason: "timestamp_out_of_tolerance" };

  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const expected = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(`${timestamp}.${rawBody}`)));
  // Every candidate is compared in full (during a rotation there are two), so timing says nothing about which matched.
  let matched = false;
  for (const signature of signatures) matched = constantTimeEqual(expected, hexToBytes(signature)) || matched;
  return matched ? { ok: true, timestamp } : { ok: false, reason: "signature_mismatch" };
}

function hexToBytes(hex: string): Uint8Array {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

/** Time depends only on the length (always 32 bytes here), never on where the first difference is. */
function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}
