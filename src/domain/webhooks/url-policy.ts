import type { DnsResolver } from "../dns/doh";
import { config } from "../../config";

// Webhook URLs are requests our Worker makes on a customer's behalf, so an URL must not point it at addresses that
// are not on the public internet (SSRF): loopback, private, link-local, CGNAT, unique-local and the other special
// ranges. IP literals are refused outright (a hostname is what a TLS certificate names anyway), and hostnames are
// resolved over DoH (A and AAAA) and refused when any address is not public. The check runs when an endpoint is
// created or changed and again before every delivery on an answer at most 30 s old, so a name re-pointed later is
// caught too (`attemptDelivery` says what a lookup of our own cannot catch).

export type UrlCheck =
  | { ok: true; url: string }
  /** `transient`: DNS did not answer; the same URL may pass later. */
  | { ok: false; reason: string; transient?: boolean };

export type UrlPolicy = {
  /** `ALLOW_PRIVATE_WEBHOOK_URLS=true` (local development and tests): http and any address are accepted. */
  allowPrivate: boolean;
  /** Needed unless `allowPrivate`. */
  resolver?: DnsResolver;
};

export const MAX_WEBHOOK_URL_LENGTH = 2048;

export function allowPrivateWebhookUrls(env: Env): boolean {
  return config(env).allowPrivateWebhookUrls;
}

export async function checkWebhookUrl(raw: string, policy: UrlPolicy): Promise<UrlCheck> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: "Not a valid URL" };
  }
  if (url.href.length > MAX_WEBHOOK_URL_LENGTH) return { ok: false, reason: `Longer than ${MAX_WEBHOOK_URL_LENGTH} characters` };
  const allowedProtocols = policy.allowPrivate ? ["https:", "http:"] : ["https:"];
  if (!allowedProtocols.includes(url.protocol)) return { ok: false, reason: "The URL must use https" };
  if (policy.allowPrivate) return { ok: true, url: url.href };

  // The WHATWG parser has already turned every IPv4 spelling (0x7f.1, 2130706433, 0177.0.0.1) into dotted quads
  // and put IPv6 literals in brackets, so these two tests see every literal.
  const host = url.hostname.toLowerCase();
  const literal = host.startsWith("[") ? host.slice(1, -1) : parseIpv4(host) ? host : undefined;
  if (literal !== undefined) {
    return isPublicAddress(literal)
      ? { ok: false, reason: "IP addresses are not accepted; use a host name" }
      : { ok: false, reason: `${literal} is a private, loopback or otherwise non-public address` };
  }
  if (host === "localhost" || host.endsWith(".localhost")) return { ok: false, reason: `${host} is a loopback name` };
  if (!policy.resolver) throw new Error("checkWebhookUrl needs a DNS resolver unless private URLs are allowed");

  const answers = await Promise.all([policy.resolver.resolve(host, "A"), policy.resolver.resolve(host, "AAAA")]);
  const addresses = answers.flatMap((answer) => (answer.status === "ok" ? answer.records : []));
  const nonPublic = addresses.filter((address) => !isPublicAddress(address));
  if (nonPublic.length > 0) {
    return { ok: false, reason: `${host} resolves to ${nonPublic.join(", ")}, a private, loopback or otherwise non-public address` };
  }
  if (addresses.length > 0) return { ok: true, url: url.href };
  if (answers.some((answer) => answer.status === "servfail" || answer.status === "timeout")) {
    return { ok: false, reason: `${host} could not be resolved right now (DNS error); try again`, transient: true };
  }
  return { ok: false, reason: `${host} does not resolve to an address (no A or AAAA record)` };
}

/** True for a unicast address routable on the public internet; false for special-purpose ranges and for garbage. */
export function isPublicAddress(address: string): boolean {
  const v4 = parseIpv4(address);
  if (v4) return isPublicIpv4(v4);
  const v6 = parseIpv6(address);
  return v6 ? isPublicIpv6(v6) : false;
}

type Ipv4 = [number, number, number, number];

function parseIpv4(text: string): Ipv4 | undefined {
  const parts = text.split(".");
  if (parts.length !== 4 || !parts.every((part) => /^(0|[1-9]\d{0,2})$/.test(part) && Number(part) <= 255)) return undefined;
  return parts.map(Number) as Ipv4;
}

// [first address, prefix length] of every IPv4 range that is not public unicast (IANA special-purpose registry).
const NON_PUBLIC_V4: [Ipv4, number][] = [
  [[0, 0, 0, 0], 8], // "this network"
  [[10, 0, 0, 0], 8], // private
  [[100, 64, 0, 0], 10], // CGNAT shared address space
  [[127, 0, 0, 0], 8], // loopback
  [[169, 254, 0, 0], 16], // link-local (cloud metadata services live here)
  [[172, 16, 0, 0], 12], // private
  [[192, 0, 0, 0], 24], // IETF protocol assignments
  [[192, 0, 2, 0], 24], // documentation
  [[192, 88, 99, 0], 24], // 6to4 relay anycast (deprecated)
  [[192, 168, 0, 0], 16], // private
  [[198, 18, 0, 0], 15], // benchmarking
  [[198, 51, 100, 0], 24], // documentation
  [[203, 0, 113, 0], 24], // documentation
  [[224, 0, 0, 0], 4], // multicast
  [[240, 0, 0, 0], 4], // reserved, and broadcast
];

const v4ToInt = (ip: Ipv4) => ((ip[0] << 24) | (ip[1] << 16) | (ip[2] << 8) | ip[3]) >>> 0;

function isPublicIpv4(ip: Ipv4): boolean {
  const value = v4ToInt(ip);
  return !NON_PUBLIC_V4.some(([base, bits]) => value >>> (32 - bits) === v4ToInt(base) >>> (32 - bits));
}

type Ipv6 = number[]; // eight 16-bit groups

function parseIpv6(text: string): Ipv6 | undefined {
  let input = text.toLowerCase();
  if (input.startsWith("[") && input.endsWith("]")) input = input.slice(1, -1);
  if (!/^[0-9a-f:.]+$/.test(input)) return undefined;
  // A dotted IPv4 tail (::ffff:10.0.0.1) stands for the last two groups.
  const lastColon = input.lastIndexOf(":");
  const tail = input.slice(lastColon + 1);
  if (tail.includes(".")) {
    const v4 = parseIpv4(tail);
    if (!v4) return undefined;
    input = `${input.slice(0, lastColon + 1)}${((v4[0] << 8) | v4[1]).toString(16)}:${((v4[2] << 8) | v4[3]).toString(16)}`;
  }
  const halves = input.split("::");
  if (halves.length > 2) return undefined;
  const parseGroups = (part: string) => (part === "" ? [] : part.split(":"));
  const head = parseGroups(halves[0]!);
  const rest = halves.length === 2 ? parseGroups(halves[1]!) : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  if (!groups.every((group) => /^[0-9a-f]{1,4}$/.test(group))) return undefined;
  return groups.map((group) => parseInt(group, 16));
}

function embeddedIpv4(groups: Ipv6, from: number): Ipv4 {
  const high = groups[from]!;
  const low = groups[from + 1]!;
  return [high >> 8, high & 0xff, low >> 8, low & 0xff];
}

function isPublicIpv6(g: Ipv6): boolean {
  const [g0, g1, g2, g3, g4, g5] = g as [number, number, number, number, number, number];
  // ::/96 (unspecified, loopback, IPv4-compatible) and ::ffff:0:0/96 (IPv4-mapped): judge the IPv4 address inside.
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0 && (g5 === 0 || g5 === 0xffff)) {
    return isPublicIpv4(embeddedIpv4(g, 6));
  }
  if (g0 === 0x64 && g1 === 0xff9b) {
    if (g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return isPublicIpv4(embeddedIpv4(g, 6)); // NAT64 64:ff9b::/96
    return false; // 64:ff9b:1::/48, local-use NAT64
  }
  if (g0 === 0x2002) return isPublicIpv4(embeddedIpv4(g, 1)); // 6to4 carries an IPv4 address in groups 1-2
  if (g0 === 0x100 && g1 === 0 && g2 === 0 && g3 === 0) return false; // discard-only 100::/64
  if (g0 === 0x2001 && g1 === 0) return false; // Teredo 2001::/32 hides the real endpoint
  if (g0 === 0x2001 && g1 === 0xdb8) return false; // documentation
  if ((g0 & 0xfe00) === 0xfc00) return false; // unique-local fc00::/7
  if ((g0 & 0xffc0) === 0xfe80 || (g0 & 0xffc0) === 0xfec0) return false; // link-local, site-local
  if ((g0 & 0xff00) === 0xff00) return false; // multicast
  // Global unicast is 2000::/3; everything else is unassigned or special.
  return (g0 & 0xe000) === 0x2000;
}
