// DKIM signing (RFC 6376) with relaxed/relaxed canonicalization, rsa-sha256 and ed25519-sha256 (RFC 8463).
//
// Written here because no DKIM library runs on Workers: mailauth and nodemailer's signer need Node's `crypto`
// streams, `net` and `dns`; this module needs only WebCrypto, so it runs unchanged in workerd and in Node 22
// (where test/node verifies its output with mailauth as an independent implementation).
//
// CPU: canonicalization is a few native regex passes, then one SHA-256 of the body and one signature over the
// header block; RSA-2048 signing is most of the cost. Import the key once per queue batch with
// importDkimPrivateKey and pass the result to every signDkim call; a PKCS#8 string is accepted too but is
// re-imported on each call.

// `.js` suffix: test/node type-checks this file under Node's `nodenext` resolution, which requires one; the
// Worker's bundler and vite map it to crypto.ts.
import { base64ToBytes, binaryStringOf, bytesToBase64, type WebCryptoKey } from "../../lib/crypto.js";

export type DkimAlgorithm = "rsa-sha256" | "ed25519-sha256";

export interface DkimKeyPair {
  /** RSA: SubjectPublicKeyInfo DER; Ed25519: the raw 32-byte key (RFC 8463 §4.2). Base64, the DNS `p=` value. */
  publicKeyB64: string;
  /** PKCS#8 DER, base64: what is stored (encrypted) and later given to importDkimPrivateKey. */
  privateKeyPkcs8B64: string;
}

export interface DkimPrivateKey {
  algorithm: DkimAlgorithm;
  key: WebCryptoKey;
}

type KeyInput = { privateKey: DkimPrivateKey; privateKeyPkcs8B64?: never } | { privateKeyPkcs8B64: string; privateKey?: never };

export type DkimSignOptions = KeyInput & {
  /** `d=`: the signing domain, normally the From domain (DMARC alignment). */
  domain: string;
  /** `s=`: the DNS label under `_domainkey.<domain>`. */
  selector: string;
  /** Header names to sign, in this order; only those present are listed in `h=`. From is always required. */
  headerFieldNames?: readonly string[];
  /** `t=`; defaults to now. */
  signedAt?: Date;
};

export const DEFAULT_SIGNED_HEADERS: readonly string[] = [
  "from",
  "to",
  "cc",
  "subject",
  "date",
  "message-id",
  "reply-to",
  "mime-version",
  "content-type",
  "list-unsubscribe",
  "list-unsubscribe-post",
];

const RSA_PARAMS = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" } as const;
const encoder = new TextEncoder();

export class DkimError extends Error {
  override name = "DkimError";
}

function isKeyPair(value: unknown): value is { publicKey: WebCryptoKey; privateKey: WebCryptoKey } {
  return typeof value === "object" && value !== null && "privateKey" in value && "publicKey" in value;
}

async function exportPair(pair: unknown, publicFormat: "spki" | "raw"): Promise<DkimKeyPair> {
  if (!isKeyPair(pair)) throw new DkimError("key generation returned a single key, expected a key pair");
  const [publicKey, privateKey] = await Promise.all([
    crypto.subtle.exportKey(publicFormat, pair.publicKey) as Promise<ArrayBuffer>,
    crypto.subtle.exportKey("pkcs8", pair.privateKey) as Promise<ArrayBuffer>,
  ]);
  return { publicKeyB64: bytesToBase64(new Uint8Array(publicKey)), privateKeyPkcs8B64: bytesToBase64(new Uint8Array(privateKey)) };
}

/** RSA-2048 key pair (RSASSA-PKCS1-v1_5 / SHA-256), the algorithm every DKIM verifier supports. */
export async function generateDkimKeyPair(): Promise<DkimKeyPair> {
  const pair = await crypto.subtle.generateKey({ ...RSA_PARAMS, modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]) }, true, [
    "sign",
    "verify",
  ]);
  return exportPair(pair, "spki");
}

/**
 * Ed25519 key pair (RFC 8463). Meant as a second signature next to RSA: many receivers still ignore
 * ed25519-sha256, so it never replaces the RSA one.
 */
export async function generateDkimEd25519KeyPair(): Promise<DkimKeyPair> {
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  return exportPair(pair, "raw");
}

/** The TXT record value published at `<selector>._domainkey.<domain>`. */
export function dkimTxtValue(publicKeyB64: string, keyType: "rsa" | "ed25519" = "rsa"): string {
  return `v=DKIM1; k=${keyType}; p=${publicKeyB64}`;
}

// The id-Ed25519 OID (1.3.101.112) as DER; in an Ed25519 PKCS#8 it sits at offset 7 (RFC 8410 §7).
const ED25519_OID = [0x06, 0x03, 0x2b, 0x65, 0x70];

function isEd25519Pkcs8(der: Uint8Array): boolean {
  return ED25519_OID.every((byte, i) => der[7 + i] === byte);
}

/** Imports a stored PKCS#8 key (base64 or PEM); the algorithm is read from the key itself. */
export async function importDkimPrivateKey(pkcs8B64: string): Promise<DkimPrivateKey> {
  let der: Uint8Array<ArrayBuffer>;
  try {
    der = base64ToBytes(pkcs8B64.replace(/-----[^-]+-----/g, ""));
  } catch {
    throw new DkimError("DKIM private key is not valid base64");
  }
  if (isEd25519Pkcs8(der)) {
    return { algorithm: "ed25519-sha256", key: await crypto.subtle.importKey("pkcs8", der, { name: "Ed25519" }, false, ["sign"]) };
  }
  return { algorithm: "rsa-sha256", key: await crypto.subtle.importKey("pkcs8", der, RSA_PARAMS, false, ["sign"]) };
}

// --- canonicalization -------------------------------------------------------------------------------------------

const LONE_LINE_BREAK = /\r(?!\n)|(?<!\r)\n/;

/** A bare CR or LF becomes CRLF, exactly as the SMTP transport sends it, so the signature covers what is sent. */
function normaliseLineBreaks(text: string): string {
  return LONE_LINE_BREAK.test(text) ? text.replace(/\r\n|\r|\n/g, "\r\n") : text;
}

/**
 * Relaxed body canonicalization (RFC 6376 §3.4.4): runs of WSP become one SP, WSP at line ends and empty lines at
 * the end are dropped, a non-empty body ends with CRLF. Native regex passes, each linear in the input (runs are
 * collapsed before line ends are trimmed, so a long run of spaces cannot make a pattern backtrack).
 */
export function canonicalizeBodyRelaxed(body: string): string {
  return canonicalizeNormalisedBody(normaliseLineBreaks(body));
}

function canonicalizeNormalisedBody(body: string): string {
  let text = body;
  if (text.length > 0 && !text.endsWith("\r\n")) text += "\r\n";
  text = text.replace(/[ \t]{2,}|\t/g, " ").replace(/ \r\n/g, "\r\n");
  let end = text.length;
  while (end >= 4 && text.startsWith("\r\n\r\n", end - 4)) end -= 2;
  if (end === 2 && text.startsWith("\r\n")) end = 0;
  return end === text.length ? text : text.slice(0, end);
}

interface HeaderField {
  /** Lower-cased name. */
  name: string;
  /** The whole field as sent, folding included, without the final line break (one char per byte). */
  raw: string;
}

function parseHeaderFields(headerBlock: string): HeaderField[] {
  const fields: HeaderField[] = [];
  for (const line of headerBlock.split(/\r\n|\r|\n/)) {
    if (line === "") continue;
    const last = fields[fields.length - 1];
    if ((line.startsWith(" ") || line.startsWith("\t")) && last) {
      last.raw += `\r\n${line}`;
      continue;
    }
    const colon = line.indexOf(":");
    if (colon <= 0) continue; // not a header field; verifiers skip it as well
    fields.push({
      name: line
        .slice(0, colon)
        .replace(/[ \t]+$/, "")
        .toLowerCase(),
      raw: line,
    });
  }
  return fields;
}

/** Relaxed header canonicalization (RFC 6376 §3.4.2), without the trailing CRLF. */
export function canonicalizeHeaderRelaxed(field: string): string {
  const colon = field.indexOf(":");
  const name = field
    .slice(0, colon)
    .replace(/[ \t]+$/, "")
    .toLowerCase();
  // Only SP and HTAB count as WSP: String#trim would also eat U+00A0, i.e. the byte 0xA0 of a UTF-8 sequence.
  const value = field
    .slice(colon + 1)
    .replace(/\r\n|\r|\n/g, "")
    .replace(/[ \t]+/g, " ")
    .replace(/^ | $/g, "");
  return `${name}:${value}`;
}

/** Chooses instances bottom-up (RFC 6376 §5.4.2) for names present in the message, in the requested order. */
function selectHeaders(fields: HeaderField[], names: readonly string[]): HeaderField[] {
  const byName = new Map<string, HeaderField[]>();
  for (const field of fields) {
    const list = byName.get(field.name);
    if (list) list.push(field);
    else byName.set(field.name, [field]);
  }
  const selected: HeaderField[] = [];
  for (const name of new Set(names.map((n) => n.toLowerCase()))) {
    const instances = byName.get(name);
    if (instances) for (let i = instances.length - 1; i >= 0; i--) selected.push(instances[i]!);
  }
  return selected;
}

// --- signature header -------------------------------------------------------------------------------------------

const FOLD = "\r\n ";
const LINE = 76;

/**
 * Lays out `Name: tag; tag; ...` on lines below 78 columns. Tags are kept whole where they fit; a longer `h=`
 * is broken after colons, and base64 may break anywhere (RFC 6376 §3.5 allows FWS in exactly those places).
 */
class FoldedHeader {
  private text: string;
  private column: number;

  constructor(start: string) {
    this.text = start;
    this.column = start.length;
  }

  addTag(tag: string, separator: string): void {
    const piece = `${tag}${separator}`;
    if (this.column + 1 + piece.length <= LINE) {
      this.push(this.column === 0 || this.text.endsWith(" ") ? piece : ` ${piece}`);
      return;
    }
    this.newLine();
    if (piece.length + 1 <= LINE) {
      this.push(piece);
      return;
    }
    // Only h= (after colons) and base64 values may contain FWS; a long d= or s= stays whole on its own line.
    const breakable = tag.startsWith("h=") ? tag.split(/(?<=:)/) : tag.startsWith("bh=") ? (tag.match(/.{1,60}/g) ?? []) : [tag];
    for (const [i, part] of breakable.entries()) {
      const text = i === breakable.length - 1 ? `${part}${separator}` : part;
      if (this.column + text.length > LINE) this.newLine();
      this.push(text);
    }
  }

  toString(): string {
    return this.text;
  }

  private newLine(): void {
    this.text += FOLD;
    this.column = 1;
  }

  private push(piece: string): void {
    this.text += piece;
    this.column += piece.length;
  }
}

function foldBase64(value: string, column: number): string {
  let out = "";
  let room = LINE - column;
  let rest = value;
  while (rest.length > room) {
    out += rest.slice(0, room) + FOLD;
    rest = rest.slice(room);
    room = LINE - 1;
  }
  return out + rest;
}

async function sha256(data: Uint8Array): Promise<Uint8Array<ArrayBuffer>> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", data));
}

/** One byte per char (the string holds bytes, see signDkim). */
function bytesOfBinaryString(text: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

/**
 * Signs a message and returns the `DKIM-Signature: ...\r\n` header to put in front of it (the message itself is
 * not copied, so the caller can prepend a second signature or stream both). The transport must send the same
 * bytes that were signed; a bare LF or CR is treated as CRLF here exactly as the SMTP transport normalises it.
 */
export async function signDkim(rawMessage: string | Uint8Array, options: DkimSignOptions): Promise<string> {
  const { domain, selector } = options;
  if (!/^[A-Za-z0-9._-]+$/.test(domain) || !/^[A-Za-z0-9._-]+$/.test(selector)) {
    throw new DkimError("DKIM domain and selector must be plain DNS labels");
  }
  const privateKey = options.privateKey ?? (await importDkimPrivateKey(options.privateKeyPkcs8B64!));
  // A string is signed as the UTF-8 the transport will send. Bytes are held as a binary string (one char per
  // byte) so that 8-bit content in any charset goes through canonicalization and into the hashes unchanged.
  const binary = typeof rawMessage !== "string";
  const message = normaliseLineBreaks(binary ? binaryStringOf(rawMessage) : rawMessage);
  const toBytes = binary ? bytesOfBinaryString : (text: string) => encoder.encode(text);
  // The header block ends at the first empty line; without one the message is all headers and the body is empty.
  const blankLine = message.startsWith("\r\n") ? -2 : message.indexOf("\r\n\r\n");
  const headerEnd = blankLine === -1 ? message.length : blankLine + 2;
  const bodyStart = blankLine === -1 ? message.length : blankLine + 4;

  const fields = parseHeaderFields(message.slice(0, headerEnd));
  const signed = selectHeaders(fields, options.headerFieldNames ?? DEFAULT_SIGNED_HEADERS);
  if (!signed.some((field) => field.name === "from")) throw new DkimError("a message to sign needs a From header");

  const bodyHash = bytesToBase64(await sha256(toBytes(canonicalizeNormalisedBody(message.slice(bodyStart)))));
  const timestamp = Math.floor((options.signedAt ?? new Date()).getTime() / 1000);

  const header = new FoldedHeader("DKIM-Signature:");
  header.addTag("v=1", ";");
  header.addTag(`a=${privateKey.algorithm}`, ";");
  header.addTag("c=relaxed/relaxed", ";");
  header.addTag(`d=${domain}`, ";");
  header.addTag(`s=${selector}`, ";");
  header.addTag(`t=${timestamp}`, ";");
  header.addTag(`h=${signed.map((field) => field.name).join(":")}`, ";");
  header.addTag(`bh=${bodyHash}`, ";");
  header.addTag("b=", "");
  const unsigned = header.toString();

  let data = "";
  for (const field of signed) data += `${canonicalizeHeaderRelaxed(field.raw)}\r\n`;
  data += canonicalizeHeaderRelaxed(unsigned);
  const dataBytes = toBytes(data);

  const signature =
    privateKey.algorithm === "ed25519-sha256"
      ? // RFC 8463 §3: Ed25519 signs the SHA-256 digest of the canonicalized data, not the data itself.
        await crypto.subtle.sign("Ed25519", privateKey.key, await sha256(dataBytes))
      : await crypto.subtle.sign(RSA_PARAMS.name, privateKey.key, dataBytes);

  const lastLine = unsigned.slice(unsigned.lastIndexOf("\n") + 1);
  return `${unsigned}${foldBase64(bytesToBase64(new Uint8Array(signature)), lastLine.length)}\r\n`;
}
