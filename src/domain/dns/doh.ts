import type { SharedDb } from "../../db/client";
import { and, gt, inArray, lt, sql } from "drizzle-orm";
import { z } from "zod";
import { dnsCache } from "../../db/schema";
import { chunk } from "../../lib/chunk";

// DNS over HTTPS through the JSON API served by cloudflare-dns.com (and by the dev DoH server), with a
// two-level cache: a Map owned by the caller (one bulk chunk or one request) and the D1 table `dns_cache`.

export type DnsRecordType = "A" | "AAAA" | "MX" | "TXT" | "CNAME";

/** `exchange` is lower-cased without the trailing dot; a null MX (RFC 7505) keeps "." as its exchange. */
export interface MxRecord {
  priority: number;
  exchange: string;
}

export type DnsRecordOf<T extends DnsRecordType> = T extends "MX" ? MxRecord : string;

/**
 * `ok` with no records is NOERROR/NODATA. `ttl` is in seconds: the remaining lifetime of the answer,
 * already floored/capped the way the cache keeps it.
 */
export type DnsAnswer<T extends DnsRecordType = DnsRecordType> =
  | { status: "ok"; records: DnsRecordOf<T>[]; ttl: number }
  | { status: "nxdomain"; ttl: number }
  | { status: "servfail" }
  | { status: "timeout" };

export interface DnsQuery<T extends DnsRecordType = DnsRecordType> {
  name: string;
  type: T;
}

interface DnsCacheEntry {
  answer: Promise<DnsAnswer>;
  /** Infinity while the lookup is in flight, so concurrent callers share the one promise. */
  expiresAt: number;
}

/** In-memory cache for one call site's lifetime; keys are `${name}|${type}`. */
export type DnsCache = Map<string, DnsCacheEntry>;

export function createDnsCache(): DnsCache {
  return new Map();
}

export interface DohOptions {
  /** The resolver URL (`DOH_URL`, see src/config.ts). */
  url: string;
  /** Cross-request cache (`env.DB`); omitted, only the in-memory cache is used. */
  db?: SharedDb;
  cache?: DnsCache;
  timeoutMs?: number;
  /** Hand D1 cache writes to `ctx.waitUntil` instead of awaiting them before answering. */
  waitUntil?: (promise: Promise<unknown>) => void;
  /** Upper bound on simultaneous DoH requests in `lookupMany`. */
  concurrency?: number;
  /**
   * For checks that must see the current answer (the webhook SSRF check): an answer is kept for at most
   * min(its TTL, maxAgeSeconds), without the 30 s floor bulk lookups get. Use it without `db`, whose rows outlive it.
   */
  maxAgeSeconds?: number;
}

export const DEFAULT_DOH_TIMEOUT_MS = 3000;
/** Negative answers without an SOA to take a TTL from. */
export const NEGATIVE_TTL_DEFAULT_S = 60;
export const NEGATIVE_TTL_MAX_S = 300;
// Floor so a 0-TTL record still serves a whole bulk chunk; cap so a mistaken week-long TTL cannot pin stale data.
const POSITIVE_TTL_MIN_S = 30;
const POSITIVE_TTL_MAX_S = 86_400;
const DEFAULT_CONCURRENCY = 20;
// D1 binds at most 100 parameters per statement.
const D1_NAMES_PER_SELECT = 90;
const D1_ROWS_PER_INSERT = 20;

const TYPE_CODES: Record<DnsRecordType, number> = { A: 1, CNAME: 5, MX: 15, TXT: 16, AAAA: 28 };
const SOA_TYPE_CODE = 6;
const RCODE_NOERROR = 0;
const RCODE_NXDOMAIN = 3;

const dohRecordSchema = z.object({
  name: z.string(),
  type: z.number(),
  TTL: z.number(),
  data: z.string(),
});
const dohResponseSchema = z.object({
  Status: z.number(),
  Answer: z.array(dohRecordSchema).optional(),
  Authority: z.array(dohRecordSchema).optional(),
});
type DohResponse = z.infer<typeof dohResponseSchema>;

const cachedAnswerSchema = z.discriminatedUnion("status", [
  z.object({
    status: z.literal("ok"),
    records: z.array(z.union([z.string(), z.object({ priority: z.number(), exchange: z.string() })])),
  }),
  z.object({ status: z.literal("nxdomain") }),
]);

export function normalizeDnsName(name: string): string {
  const lower = name.trim().toLowerCase();
  return lower.length > 1 && lower.endsWith(".") ? lower.slice(0, -1) : lower;
}

function cacheKey(name: string, type: DnsRecordType): string {
  return `${name}|${type}`;
}

/** One lookup through both cache levels; see `lookupMany` to look up many names with one D1 read. */
export async function resolve<T extends DnsRecordType>(opts: DohOptions, name: string, type: T): Promise<DnsAnswer<T>> {
  const [answer] = await lookupMany(opts, [{ name, type }]);
  // lookupMany returns one answer per query, in order.
  return answer!;
}

/**
 * Answers in the order of `queries`. Keys not in the Map are read from D1 with one query per 90 names,
 * the rest go to DoH (at most `concurrency` at once) and are written back to D1 in one batch.
 */
export async function lookupMany<T extends DnsRecordType>(opts: DohOptions, queries: readonly DnsQuery<T>[]): Promise<DnsAnswer<T>[]> {
  const cache = opts.cache ?? createDnsCache();
  const now = Date.now();
  const pending = new Map<string, { query: DnsQuery<T>; settle: (answer: DnsAnswer) => void }>();

  const promises = queries.map((raw) => {
    const query = { name: normalizeDnsName(raw.name), type: raw.type };
    const key = cacheKey(query.name, query.type);
    const hit = cache.get(key);
    if (hit && hit.expiresAt > now) return hit.answer;
    let settle!: (answer: DnsAnswer) => void;
    const entry: DnsCacheEntry = {
      answer: new Promise<DnsAnswer>((r) => (settle = r)),
      expiresAt: Number.POSITIVE_INFINITY,
    };
    cache.set(key, entry);
    let settled = false;
    pending.set(key, {
      query,
      settle: (answer) => {
        if (settled) return;
        settled = true;
        if (isCacheable(answer)) entry.expiresAt = Date.now() + answer.ttl * 1000;
        else if (cache.get(key) === entry) cache.delete(key);
        settle(answer);
      },
    });
    return entry.answer;
  });

  try {
    if (pending.size > 0) await fillPending(opts, pending);
  } finally {
    // Nothing may stay in flight forever: a later caller of the same key would wait on it.
    for (const p of pending.values()) p.settle({ status: "servfail" });
  }
  // Each promise was created for (or cached under) the same record type as its query.
  return (await Promise.all(promises)) as DnsAnswer<T>[];
}

async function fillPending<T extends DnsRecordType>(
  opts: DohOptions,
  pending: Map<string, { query: DnsQuery<T>; settle: (answer: DnsAnswer) => void }>,
): Promise<void> {
  const fromDb = opts.db
    ? await readDbCache(
        opts.db,
        [...pending.values()].map((p) => p.query),
      )
    : new Map<string, DnsAnswer>();
  const toFetch: { query: DnsQuery<T>; settle: (answer: DnsAnswer) => void }[] = [];
  for (const [key, p] of pending) {
    const cached = fromDb.get(key);
    if (cached) p.settle(cached);
    else toFetch.push(p);
  }
  if (toFetch.length === 0) return;

  const fresh: { query: DnsQuery; answer: DnsAnswer }[] = [];
  await mapWithConcurrency(toFetch, opts.concurrency ?? DEFAULT_CONCURRENCY, async (item) => {
    const answer = await queryDoh(opts, item.query.name, item.query.type);
    item.settle(answer);
    if (isCacheable(answer)) fresh.push({ query: item.query, answer });
  });

  if (opts.db && fresh.length > 0) {
    const write = writeDbCache(opts.db, fresh);
    if (opts.waitUntil) opts.waitUntil(write);
    else await write;
  }
}

function isCacheable(answer: DnsAnswer): answer is Extract<DnsAnswer, { ttl: number }> {
  return answer.status === "ok" || answer.status === "nxdomain";
}

async function readDbCache(db: SharedDb, queries: readonly DnsQuery[]): Promise<Map<string, DnsAnswer>> {
  const wanted = new Set(queries.map((q) => cacheKey(q.name, q.type)));
  const names = [...new Set(queries.map((q) => q.name))];
  const now = Date.now();
  const found = new Map<string, DnsAnswer>();
  try {
    for (const slice of chunk(names, D1_NAMES_PER_SELECT)) {
      const rows = await db
        .select()
        .from(dnsCache)
        .where(and(inArray(dnsCache.name, slice), gt(dnsCache.expiresAt, now)));
      for (const row of rows) {
        const key = cacheKey(row.name, row.type as DnsRecordType);
        const parsed = cachedAnswerSchema.safeParse(row.answer);
        if (!wanted.has(key) || !parsed.success) continue;
        const ttl = Math.max(1, Math.ceil((row.expiresAt - now) / 1000));
        found.set(
          key,
          parsed.data.status === "ok"
            ? // Written by writeDbCache from an answer of this row's type.
              ({ status: "ok", records: parsed.data.records, ttl } as DnsAnswer)
            : { status: "nxdomain", ttl },
        );
      }
    }
  } catch {
    // The D1 cache only saves DoH round-trips; a failing read must not turn into a DNS error.
  }
  return found;
}

async function writeDbCache(db: SharedDb, fresh: readonly { query: DnsQuery; answer: DnsAnswer }[]) {
  const now = Date.now();
  const rows = fresh.flatMap(({ query, answer }) =>
    isCacheable(answer)
      ? [
          {
            name: query.name,
            type: query.type,
            answer: answer.status === "ok" ? { status: "ok", records: answer.records } : { status: "nxdomain" },
            expiresAt: now + answer.ttl * 1000,
          },
        ]
      : [],
  );
  const statements = chunk(rows, D1_ROWS_PER_INSERT).map((slice) =>
    db
      .insert(dnsCache)
      .values(slice)
      .onConflictDoUpdate({
        target: [dnsCache.name, dnsCache.type],
        set: { answer: sql`excluded.answer`, expiresAt: sql`excluded.expires_at` },
      }),
  );
  const [first, ...rest] = statements;
  if (!first) return;
  try {
    await db.batch([first, ...rest]);
  } catch {
    // Same reasoning as the read: losing a cache write costs one more DoH query later, nothing else.
  }
}

/** Deletes expired rows of `dns_cache`; for a scheduled handler, since lookups only overwrite rows they ask for again. */
export async function purgeExpiredDnsCache(db: SharedDb, now = Date.now()): Promise<void> {
  await db.delete(dnsCache).where(lt(dnsCache.expiresAt, now));
}

async function queryDoh(opts: DohOptions, name: string, type: DnsRecordType): Promise<DnsAnswer> {
  const url = new URL(opts.url);
  url.searchParams.set("name", name);
  url.searchParams.set("type", type);
  let body: DohResponse;
  try {
    const response = await fetch(url, {
      headers: { accept: "application/dns-json" },
      signal: AbortSignal.timeout(opts.timeoutMs ?? DEFAULT_DOH_TIMEOUT_MS),
    });
    if (!response.ok) return { status: "servfail" };
    const parsed = dohResponseSchema.safeParse(await response.json());
    if (!parsed.success) return { status: "servfail" };
    body = parsed.data;
  } catch (error) {
    if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) {
      return { status: "timeout" };
    }
    return { status: "servfail" };
  }
  const answer = interpretDohResponse(body, type, opts.maxAgeSeconds);
  return isCacheable(answer) && opts.maxAgeSeconds !== undefined ? { ...answer, ttl: Math.min(answer.ttl, opts.maxAgeSeconds) } : answer;
}

function interpretDohResponse(body: DohResponse, type: DnsRecordType, maxAgeSeconds: number | undefined): DnsAnswer {
  if (body.Status === RCODE_NXDOMAIN) return { status: "nxdomain", ttl: negativeTtl(body) };
  if (body.Status !== RCODE_NOERROR) return { status: "servfail" };
  // A recursive answer may carry the CNAME chain before the records asked for.
  const matching = (body.Answer ?? []).filter((r) => r.type === TYPE_CODES[type]);
  if (matching.length === 0) return { status: "ok", records: [], ttl: negativeTtl(body) };
  const ttl = clamp(Math.min(...matching.map((r) => r.TTL)), maxAgeSeconds === undefined ? POSITIVE_TTL_MIN_S : 0, POSITIVE_TTL_MAX_S);
  if (type === "MX") {
    const records = matching.map((r) => parseMxData(r.data)).filter((r): r is MxRecord => r !== null);
    return { status: "ok", records, ttl };
  }
  if (type === "TXT") return { status: "ok", records: matching.map((r) => parseTxtData(r.data)), ttl };
  if (type === "CNAME") return { status: "ok", records: matching.map((r) => normalizeDnsName(r.data)), ttl };
  return { status: "ok", records: matching.map((r) => r.data.trim()), ttl };
}

function negativeTtl(body: DohResponse): number {
  const soa = (body.Authority ?? []).find((r) => r.type === SOA_TYPE_CODE);
  return soa ? clamp(soa.TTL, 1, NEGATIVE_TTL_MAX_S) : NEGATIVE_TTL_DEFAULT_S;
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

/** `"10 mx.example.com."` → `{ priority: 10, exchange: "mx.example.com" }`; `"0 ."` keeps "." (null MX). */
export function parseMxData(data: string): MxRecord | null {
  const match = /^\s*(\d+)\s+(\S+)\s*$/.exec(data);
  if (!match) return null;
  return { priority: Number(match[1]), exchange: normalizeDnsName(match[2]!) };
}

/**
 * Joins the character-strings of one TXT record (`"\"abc\" \"def\""` → `abcdef`), undoing the
 * presentation-format escapes `\"`, `\\` and `\DDD`. Resolvers split long values into 255-octet strings,
 * and SPF/DKIM/DMARC read them as one value. Data without quotes (some resolvers unquote) is returned as is.
 */
export function parseTxtData(data: string): string {
  const text = data.trim();
  if (!text.startsWith('"')) return text;
  const encoder = new TextEncoder();
  const bytes: number[] = [];
  let inQuotes = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (!inQuotes) {
      if (ch === '"') inQuotes = true;
      continue;
    }
    if (ch === '"') {
      inQuotes = false;
    } else if (ch === "\\" && i + 1 < text.length) {
      const digits = /^\d{3}/.exec(text.slice(i + 1, i + 4));
      if (digits) {
        bytes.push(Number(digits[0]) & 0xff);
        i += 3;
      } else {
        bytes.push(...encoder.encode(text[i + 1]!));
        i += 1;
      }
    } else {
      bytes.push(...encoder.encode(ch));
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

export async function mapWithConcurrency<T>(items: readonly T[], limit: number, worker: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const run = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await worker(item);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, run));
}

/** What the verification engine (and domain checks) need; bound to one cache Map. */
export interface DnsResolver {
  resolve<T extends DnsRecordType>(name: string, type: T): Promise<DnsAnswer<T>>;
  lookupMany<T extends DnsRecordType>(queries: readonly DnsQuery<T>[]): Promise<DnsAnswer<T>[]>;
}

/** A resolver whose lookups share one in-memory cache (a fresh one unless `opts.cache` is given). */
export function createResolver(opts: DohOptions): DnsResolver {
  const bound: DohOptions = { ...opts, cache: opts.cache ?? createDnsCache() };
  return {
    resolve: (name, type) => resolve(bound, name, type),
    lookupMany: (queries) => lookupMany(bound, queries),
  };
}
