import { hmacSha256Hex, timingSafeEqualString } from "../../lib/crypto";

// Requests from the SMTP bridge carry `X-Bridge-Signature: t=<unix>,v1=<hex>`, where hex is HMAC-SHA256 keyed with
// BRIDGE_SECRET over `<t>.<raw body>`: the spec's webhook scheme, pointed the other way. The timestamp bounds a
// replay to the tolerance window; the body is signed as sent, so nothing is re-serialised before checking.

export const BRIDGE_SIGNATURE_HEADER = "X-Bridge-Signature";
export const BRIDGE_SIGNATURE_TOLERANCE_SECONDS = 300;

const headerPattern = /^t=(\d{1,12}),\s*v1=([0-9a-f]{64})$/;

export async function signBridgeRequest(secret: string, body: string, nowSeconds = Math.floor(Date.now() / 1000)): Promise<string> {
  return `t=${nowSeconds},v1=${await hmacSha256Hex(secret, `${nowSeconds}.${body}`)}`;
}

/** True when `header` signs `body` with `secret` and its timestamp is within 300 s of now. */
export async function verifyBridgeSignature(
  secret: string,
  header: string | undefined,
  body: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<boolean> {
  const match = headerPattern.exec(header?.trim() ?? "");
  if (!match) return false;
  const [, timestamp = "", presented = ""] = match;
  if (Math.abs(nowSeconds - Number(timestamp)) > BRIDGE_SIGNATURE_TOLERANCE_SECONDS) return false;
  return timingSafeEqualString(await hmacSha256Hex(secret, `${timestamp}.${body}`), presented);
}
