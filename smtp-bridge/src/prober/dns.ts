import { BlockList, isIP } from "node:net";
import pLimit from "p-limit";

// MX and address lookups through the same DoH JSON API the Worker uses (DOH_URL), so the dev DoH server routes the
// prober in tests and dev exactly as it routes the Worker's checks. Answers are cached for their TTL. Only the first
// `maxMxHosts` MX names (by preference) are resolved, a few at a time: a domain publishing 300 MX names costs one MX
// query and the addresses of those few, not 600 queries at once.

export interface MxRoute {
  /** MX host name, preference order (the domain itself for an implicit MX). */
  host: string;
  /** Its addresses; empty when it has none. */
  addresses: string[];
}

export type DomainRoutes = { kind: "ok"; routes: MxRoute[] } | { kind: "none"; detail: "no_mx" | "null_mx" | "nxdomain" | "dns_error" };

type DohAnswer = { Status: number; Answer?: { type: number; TTL?: number; data: string }[] };
type Lookup = { status: "ok" | "nxdomain" | "error"; records: { data: string; ttl: number }[] };

const TYPE_CODES = { A: 1, MX: 15, AAAA: 28 } as const;
const DOH_TIMEOUT_MS = 5_000;
const MAX_CACHED = 50_000;
// MX names of one domain resolved at once (A and AAAA each)
const NAME_CONCURRENCY = 3;

export interface Resolver {
  routes(domain: string): Promise<DomainRoutes>;
}

/** `maxMxHosts`: how many MX names, most preferred first, a domain's routes may name. */
export function createDohResolver(dohUrl: string, maxMxHosts: number): Resolver {
  const cache = new Map<string, { expires: number; lookup: Promise<Lookup> }>();

  // one retry: the Worker resolved these names moments ago, so a failure here is most likely transient
  async function query(name: string, type: keyof typeof TYPE_CODES): Promise<Lookup> {
    const first = await queryOnce(name, type);
    return first.status === "error" ? queryOnce(name, type) : first;
  }

  async function queryOnce(name: string, type: keyof typeof TYPE_CODES): Promise<Lookup> {
    const url = new URL(dohUrl);
    url.searchParams.set("name", name);
    url.searchParams.set("type", type);
    try {
      const response = await fetch(url, { headers: { Accept: "application/dns-json" }, signal: AbortSignal.timeout(DOH_TIMEOUT_MS) });
      if (!response.ok) return { status: "error", records: [] };
      const body = (await response.json()) as DohAnswer;
      if (body.Status === 3) return { status: "nxdomain", records: [] };
      if (body.Status !== 0) return { status: "error", records: [] };
      const records = (body.Answer ?? []).filter((a) => a.type === TYPE_CODES[type]).map((a) => ({ data: a.data, ttl: a.TTL ?? 300 }));
      return { status: "ok", records };
    } catch {
      return { status: "error", records: [] };
    }
  }

  function lookup(name: string, type: keyof typeof TYPE_CODES): Promise<Lookup> {
    const key = `${name}/${type}`;
    const cached = cache.get(key);
    if (cached && cached.expires > Date.now()) return cached.lookup;
    const pending = query(name, type);
    if (cache.size >= MAX_CACHED) cache.clear();
    cache.set(key, { expires: Date.now() + 60_000, lookup: pending });
    void pending.then((result) => {
      // failures are not kept; answers for their shortest TTL
      if (result.status === "error") cache.delete(key);
      else cache.set(key, { expires: Date.now() + Math.min(...result.records.map((r) => r.ttl), 300) * 1000, lookup: pending });
    });
    return pending;
  }

  async function addresses(host: string): Promise<string[]> {
    const [a, aaaa] = await Promise.all([lookup(host, "A"), lookup(host, "AAAA")]);
    return [...a.records, ...aaaa.records].map((r) => r.data).filter((ip) => isIP(ip) !== 0);
  }

  return {
    async routes(domain) {
      const mx = await lookup(domain, "MX");
      if (mx.status === "nxdomain") return { kind: "none", detail: "nxdomain" };
      if (mx.status === "error") return { kind: "none", detail: "dns_error" };
      const exchanges = mx.records
        .map((r) => {
          const [priority = "", exchange = ""] = r.data.trim().split(/\s+/);
          return { priority: Number(priority), host: exchange.replace(/\.$/, "").toLowerCase() };
        })
        .filter((e) => Number.isFinite(e.priority) && e.host !== "")
        .sort((a, b) => a.priority - b.priority || a.host.localeCompare(b.host));
      if (mx.records.length > 0 && exchanges.length === 0) return { kind: "none", detail: "null_mx" };
      // RFC 5321 §5.1: no MX at all means the domain's own address is the mail exchanger
      const hosts = exchanges.length > 0 ? [...new Set(exchanges.map((e) => e.host))].slice(0, maxMxHosts) : [domain];
      const routes = await pLimit(NAME_CONCURRENCY).map(hosts, async (host) => ({ host, addresses: await addresses(host) }));
      if (exchanges.length === 0 && routes[0]?.addresses.length === 0) return { kind: "none", detail: "no_mx" };
      return { kind: "ok", routes };
    },
  };
}

// Addresses a probe must not reach unless PROBE_ALLOW_PRIVATE: otherwise a domain whose MX points inside our network
// would let anyone who can ask for a verification scan it.
const privateRanges = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  privateRanges.addSubnet(network, prefix, "ipv4");
}
for (const [network, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const) {
  privateRanges.addSubnet(network, prefix, "ipv6");
}

/** True for private, loopback, link-local, carrier-grade NAT, multicast and reserved addresses (IPv4-mapped too). */
export function isPrivateAddress(ip: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return privateRanges.check(mapped[1]!, "ipv4");
  return privateRanges.check(ip, isIP(ip) === 6 ? "ipv6" : "ipv4");
}
