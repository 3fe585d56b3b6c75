// Small WebCrypto helpers shared by the Worker and the Node scripts: nothing here touches `node:crypto`, so the
// same module runs in workerd and in Node 22.

const encoder = new TextEncoder();

/**
 * CryptoKey, derived from the global `crypto` so the name resolves under workerd's types and under Node's
 * (which declares CryptoKey only inside its `crypto` module).
 */
export type WebCryptoKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;
const decoder = new TextDecoder();

/** Bytes as a string of one char (U+0000–U+00FF) per byte: the input btoa expects, and a lossless text view. */
export function binaryStringOf(bytes: Uint8Array): string {
  let binary = "";
  // Chunked to stay below engines' argument-count limits; apply() takes the typed array as it is, which is far
  // faster than spreading it (spread goes through the iterator protocol element by element).
  for (let i = 0; i < bytes.length; i += 0x2000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x2000) as unknown as number[]);
  }
  return binary;
}

export function bytesToBase64(bytes: Uint8Array): string {
  return btoa(binaryStringOf(bytes));
}

/** Decodes standard or URL-safe base64; whitespace (as in folded DKIM values or PEM bodies) is ignored. */
export function base64ToBytes(base64: string): Uint8Array<ArrayBuffer> {
  const binary = atob(base64.replace(/[\s]/g, "").replace(/-/g, "+").replace(/_/g, "/"));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function bytesToBase64Url(bytes: Uint8Array): string {
  return bytesToBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function bytesToHex(bytes: Uint8Array): string {
  let hex = "";
  for (const byte of bytes) hex += byte.toString(16).padStart(2, "0");
  return hex;
}

/** `bytes` random bytes as unpadded base64url (opaque tokens: unsubscribe links, tracking ids, secrets). */
export function randomToken(bytes = 32): string {
  return bytesToBase64Url(crypto.getRandomValues(new Uint8Array(bytes)));
}

/** SHA-256 of a string's UTF-8 bytes, or of bytes, as lowercase hex. */
export async function sha256Hex(input: string | Uint8Array<ArrayBuffer>): Promise<string> {
  return bytesToHex(new Uint8Array(await crypto.subtle.digest("SHA-256", typeof input === "string" ? encoder.encode(input) : input)));
}

// Imported HMAC keys by secret, in this isolate: a few secrets sign a token for every message (return paths,
// unsubscribe links), so each is imported once rather than per message. Bounded, oldest out, for per-endpoint secrets.
const hmacKeys = new Map<string, Promise<WebCryptoKey>>();
const maxHmacKeys = 64;

function hmacKey(key: string): Promise<WebCryptoKey> {
  let imported = hmacKeys.get(key);
  if (!imported) {
    if (hmacKeys.size >= maxHmacKeys) hmacKeys.delete(hmacKeys.keys().next().value as string);
    imported = crypto.subtle.importKey("raw", encoder.encode(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    hmacKeys.set(key, imported);
  }
  return imported;
}

export async function hmacSha256Hex(key: string, message: string): Promise<string> {
  return bytesToHex(new Uint8Array(await crypto.subtle.sign("HMAC", await hmacKey(key), encoder.encode(message))));
}

// workerd adds a non-standard `timingSafeEqual` to SubtleCrypto; Node's WebCrypto does not have it.
type SubtleWithTimingSafeEqual = typeof crypto.subtle & {
  timingSafeEqual?: (a: ArrayBuffer | ArrayBufferView, b: ArrayBuffer | ArrayBufferView) => boolean;
};

/**
 * Constant-time string comparison, also when the lengths differ: both sides are hashed first, so the comparison
 * always runs over 32 bytes and the time taken reveals neither the length nor the common prefix of the secret.
 */
export async function timingSafeEqualString(a: string, b: string): Promise<boolean> {
  const [hashA, hashB] = await Promise.all([crypto.subtle.digest("SHA-256", encoder.encode(a)), crypto.subtle.digest("SHA-256", encoder.encode(b))]);
  const subtle = crypto.subtle as SubtleWithTimingSafeEqual;
  if (typeof subtle.timingSafeEqual === "function") return subtle.timingSafeEqual(hashA, hashB);
  const left = new Uint8Array(hashA);
  const right = new Uint8Array(hashB);
  let diff = 0;
  for (let i = 0; i < left.length; i++) diff |= left[i]! ^ right[i]!;
  return diff === 0;
}

export class SecretKeyError extends Error {
  override name = "SecretKeyError";
}

const secretKeyCache = new Map<string, Promise<WebCryptoKey>>();

function importSecretKey(base64Key: string): Promise<WebCryptoKey> {
  let cached = secretKeyCache.get(base64Key);
  if (!cached) {
    let raw: Uint8Array<ArrayBuffer>;
    try {
      raw = base64ToBytes(base64Key);
    } catch {
      throw new SecretKeyError("DKIM_ENCRYPTION_KEY is not valid base64");
    }
    if (raw.length !== 32) {
      throw new SecretKeyError(`DKIM_ENCRYPTION_KEY must be the base64 of exactly 32 bytes (AES-256), got ${raw.length} bytes`);
    }
    cached = crypto.subtle.importKey("raw", raw, { name: "AES-GCM" }, false, ["encrypt", "decrypt"]);
    cached.catch(() => secretKeyCache.delete(base64Key));
    // The secret is fixed per deployment, so the map holds one entry in practice.
    secretKeyCache.set(base64Key, cached);
  }
  return cached;
}

const SECRET_FORMAT = "v1";

/** AES-256-GCM with a random 12-byte IV; output `v1.<b64 iv>.<b64 ciphertext+tag>`. */
export async function encryptSecret(plain: string, base64Key: string): Promise<string> {
  const key = await importSecretKey(base64Key);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ciphertext = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv }, key, encoder.encode(plain)));
  return `${SECRET_FORMAT}.${bytesToBase64(iv)}.${bytesToBase64(ciphertext)}`;
}

export async function decryptSecret(ciphertext: string, base64Key: string): Promise<string> {
  const key = await importSecretKey(base64Key);
  const [version, ivB64, dataB64, ...rest] = ciphertext.split(".");
  if (version !== SECRET_FORMAT || !ivB64 || !dataB64 || rest.length > 0) {
    throw new SecretKeyError("encrypted secret has an unknown format");
  }
  try {
    const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: base64ToBytes(ivB64) }, key, base64ToBytes(dataB64));
    return decoder.decode(plain);
  } catch {
    // GCM authentication failure: wrong key or tampered data. WebCrypto's OperationError says neither.
    throw new SecretKeyError("encrypted secret could not be decrypted (wrong DKIM_ENCRYPTION_KEY or corrupted value)");
  }
}
