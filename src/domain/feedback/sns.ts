// Amazon SNS message signatures (https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html):
// the signing certificate is fetched from the SigningCertURL, which must be an https URL on sns.<region>.amazonaws.com,
// and the canonical string of the message's fields is verified with its RSA key (SHA1 for SignatureVersion 1,
// SHA256 for 2). WebCrypto imports a public key but not a certificate, so the certificate's SubjectPublicKeyInfo is
// taken out of its DER here: a walk over four nested elements, not worth an X.509 library in the Worker bundle.

import { z } from "zod";
import { base64ToBytes } from "../../lib/crypto";

export const snsMessageSchema = z.object({
  Type: z.enum(["Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation"]),
  MessageId: z.string().min(1),
  TopicArn: z.string().min(1),
  Subject: z.string().optional(),
  Message: z.string(),
  Timestamp: z.string().min(1),
  SignatureVersion: z.enum(["1", "2"]),
  Signature: z.string().min(1),
  SigningCertURL: z.url(),
  SubscribeURL: z.url().optional(),
  Token: z.string().optional(),
});
export type SnsMessage = z.infer<typeof snsMessageSchema>;

const amazonHost = /^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$/;

/** An SNS URL we may fetch: https on sns.<region>.amazonaws.com, or under the origin trusted for local tests. */
export function trustedSnsUrl(value: string, trustedOrigin: string | undefined): boolean {
  if (trustedOrigin && value.startsWith(`${trustedOrigin.replace(/\/$/, "")}/`)) return true;
  try {
    const url = new URL(value);
    return url.protocol === "https:" && amazonHost.test(url.hostname) && url.username === "" && url.port === "";
  } catch {
    return false;
  }
}

/** The string SNS signs: the message's fields in this order, each as `Name\nvalue\n`. */
export function stringToSign(message: SnsMessage): string {
  const fields: (keyof SnsMessage)[] =
    message.Type === "Notification"
      ? ["Message", "MessageId", ...(message.Subject !== undefined ? (["Subject"] as const) : []), "Timestamp", "TopicArn", "Type"]
      : ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"];
  return fields.map((field) => `${field}\n${message[field] ?? ""}\n`).join("");
}

type Element = { tag: number; start: number; contentStart: number; end: number };

/** One DER element at `offset`: its tag, where it starts and ends, and where its content starts. */
function element(bytes: Uint8Array, offset: number): Element {
  const tag = bytes[offset]!;
  let length = bytes[offset + 1]!;
  let contentStart = offset + 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count === 0 || count > 4) throw new Error("unsupported DER length");
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + bytes[offset + 2 + i]!;
    contentStart += count;
  }
  const end = contentStart + length;
  if (end > bytes.length) throw new Error("truncated DER");
  return { tag, start: offset, contentStart, end };
}

/** The SubjectPublicKeyInfo of a PEM certificate, as DER (Certificate → tbsCertificate → its 7th field, after an optional version). */
function publicKeyInfo(pem: string): Uint8Array {
  const body = pem.match(/-----BEGIN CERTIFICATE-----([\s\S]+?)-----END CERTIFICATE-----/)?.[1];
  if (!body) throw new Error("not a PEM certificate");
  const der = base64ToBytes(body);
  const certificate = element(der, 0);
  const tbs = element(der, certificate.contentStart);
  let field = element(der, tbs.contentStart);
  // [0] EXPLICIT version, present from X.509 v2 on.
  if (field.tag === 0xa0) field = element(der, field.end);
  // serialNumber, signature, issuer, validity, subject; then subjectPublicKeyInfo.
  for (let i = 0; i < 5; i++) field = element(der, field.end);
  if (field.tag !== 0x30) throw new Error("no SubjectPublicKeyInfo");
  return der.slice(field.start, field.end);
}

/** Whether `message` carries a valid signature by the certificate at its SigningCertURL (fetched with `fetchCert`). */
export async function verifySnsSignature(message: SnsMessage, certificatePem: string): Promise<boolean> {
  const key = await crypto.subtle.importKey(
    "spki",
    publicKeyInfo(certificatePem),
    { name: "RSASSA-PKCS1-v1_5", hash: message.SignatureVersion === "1" ? "SHA-1" : "SHA-256" },
    false,
    ["verify"],
  );
  let signature: Uint8Array;
  try {
    signature = base64ToBytes(message.Signature);
  } catch {
    return false;
  }
  return crypto.subtle.verify("RSASSA-PKCS1-v1_5", key, signature, new TextEncoder().encode(stringToSign(message)));
}
