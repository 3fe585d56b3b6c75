import { generateKeyPairSync, randomBytes, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import type { BridgeConfig } from "./config.ts";

// TLS material for the three listeners. Operators give PEM files; outside production, when none are given, a
// self-signed ECDSA P-256 certificate is made at start. It is built here with node:crypto and a few lines of DER
// rather than a dependency or the openssl CLI: the CLI is not on every developer machine, and the certificate
// libraries pull in a tree of ASN.1 packages that has broken on duplicate versions in this workspace.

export interface TlsCredentials {
  key: string;
  cert: string;
  selfSigned: boolean;
}

export function loadTlsCredentials(config: Pick<BridgeConfig, "tls" | "serverName">): TlsCredentials {
  if (config.tls) {
    return { key: readFileSync(config.tls.keyPath, "utf8"), cert: readFileSync(config.tls.certPath, "utf8"), selfSigned: false };
  }
  return { ...generateSelfSignedCertificate([config.serverName, "localhost", "127.0.0.1", "::1"]), selfSigned: true };
}

// --- minimal DER encoding (X.690), just what a certificate needs ---

function derLength(length: number): Buffer {
  if (length < 0x80) return Buffer.from([length]);
  const bytes: number[] = [];
  for (let rest = length; rest > 0; rest >>= 8) bytes.unshift(rest & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

const der = (tag: number, ...content: Buffer[]) => {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
};
const sequence = (...items: Buffer[]) => der(0x30, ...items);
const set = (...items: Buffer[]) => der(0x31, ...items);
const explicit = (tagNumber: number, inner: Buffer) => der(0xa0 | tagNumber, inner);

function oid(dotted: string): Buffer {
  const [first = 0, second = 0, ...rest] = dotted.split(".").map(Number);
  const bytes = [40 * first + second];
  for (const arc of rest) {
    const chunk = [arc & 0x7f];
    for (let value = arc >> 7; value > 0; value >>= 7) chunk.unshift((value & 0x7f) | 0x80);
    bytes.push(...chunk);
  }
  return der(0x06, Buffer.from(bytes));
}

function positiveInteger(bytes: Buffer): Buffer {
  // DER INTEGERs are signed: a leading 1 bit needs a zero byte in front to stay positive.
  return der(0x02, (bytes[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
}

function time(date: Date): Buffer {
  const iso = date.toISOString().replace(/[-:T]/g, "").slice(0, 14); // YYYYMMDDHHMMSS
  // RFC 5280 4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050.
  return date.getUTCFullYear() < 2050 ? der(0x17, Buffer.from(`${iso.slice(2)}Z`)) : der(0x18, Buffer.from(`${iso}Z`));
}

function ipBytes(address: string): Buffer {
  if (isIP(address) === 4) return Buffer.from(address.split(".").map(Number));
  const [head = "", tail = ""] = address.split("::");
  const groups = (part: string) => (part ? part.split(":") : []);
  const missing = 8 - groups(head).length - groups(tail).length;
  const all = [...groups(head), ...Array<string>(address.includes("::") ? missing : 0).fill("0"), ...groups(tail)];
  return Buffer.from(all.flatMap((group) => [parseInt(group, 16) >> 8, parseInt(group, 16) & 0xff]));
}

/** A self-signed server certificate (ECDSA P-256, SHA-256) valid for one year, for the given DNS names and IPs. */
export function generateSelfSignedCertificate(names: string[], now = new Date()): { key: string; cert: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const ecdsaWithSha256 = sequence(oid("1.2.840.10045.4.3.2"));
  const commonName = names[0] ?? "localhost";
  const name = sequence(set(sequence(oid("2.5.4.3"), der(0x0c, Buffer.from(commonName, "utf8")))));
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f || 0x01;

  const altNames = [...new Set(names)].map((entry) => (isIP(entry) ? der(0x87, ipBytes(entry)) : der(0x82, Buffer.from(entry, "ascii"))));
  const extensions = sequence(
    sequence(oid("2.5.29.17"), der(0x04, sequence(...altNames))),
    sequence(oid("2.5.29.19"), der(0x01, Buffer.from([0xff])), der(0x04, sequence())),
    sequence(oid("2.5.29.37"), der(0x04, sequence(oid("1.3.6.1.5.5.7.3.1")))),
  );
  const tbs = sequence(
    explicit(0, der(0x02, Buffer.from([2]))),
    positiveInteger(serial),
    ecdsaWithSha256,
    name,
    sequence(time(new Date(now.getTime() - 24 * 3600_000)), time(new Date(now.getTime() + 365 * 24 * 3600_000))),
    name,
    publicKey.export({ type: "spki", format: "der" }),
    explicit(3, extensions),
  );
  const signature = sign("sha256", tbs, { key: privateKey, dsaEncoding: "der" });
  const certificate = sequence(tbs, ecdsaWithSha256, der(0x03, Buffer.from([0]), signature));
  const base64Lines = certificate.toString("base64").match(/.{1,64}/g) ?? [];
  return {
    key: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    cert: `-----BEGIN CERTIFICATE-----\n${base64Lines.join("\n")}\n-----END CERTIFICATE-----\n`,
  };
}
