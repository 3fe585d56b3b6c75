import { randomUUID } from "node:crypto";
import { mkdir, readFile, rename, stat, unlink, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";

// The dev DNS-over-HTTPS server: answers cloudflare-dns.com style JSON queries from a zone file that the dev stack
// (or a test) rewrites to publish records. Only what the worker's DNS checks need: A, AAAA, CNAME, MX, NS, TXT.

const DEFAULT_TTL = 300;
const MAX_CNAME_HOPS = 8;
const TXT_STRING_MAX = 255;

const RESPONSE_CODE = { NOERROR: 0, SERVFAIL: 2, NXDOMAIN: 3 } as const;

const RECORD_TYPE = { A: 1, NS: 2, CNAME: 5, MX: 15, TXT: 16, AAAA: 28 } as const;
type RecordTypeName = keyof typeof RECORD_TYPE;
const RECORD_TYPE_NAME = new Map<number, RecordTypeName>(Object.entries(RECORD_TYPE).map(([name, code]) => [code, name as RecordTypeName]));

const ttlSchema = z.number().int().nonnegative();
const valueRecordSchema = z.union([z.string(), z.object({ value: z.string(), ttl: ttlSchema.optional() }).strict()]);
const mxRecordSchema = z.object({ priority: z.number().int().min(0).max(65535), exchange: z.string().min(1), ttl: ttlSchema.optional() }).strict();

const zoneEntrySchema = z
  .object({
    A: z.array(valueRecordSchema).optional(),
    AAAA: z.array(valueRecordSchema).optional(),
    CNAME: z.array(valueRecordSchema).optional(),
    NS: z.array(valueRecordSchema).optional(),
    TXT: z.array(valueRecordSchema).optional(),
    MX: z.array(mxRecordSchema).optional(),
    /** answer every query for this name with SERVFAIL */
    $servfail: z.boolean().optional(),
    /** hold every answer for this name this long, to test client timeouts */
    $delay_ms: z.number().int().nonnegative().optional(),
  })
  .strict();

const zoneSchema = z.record(z.string(), zoneEntrySchema);

/** Records of one name. A/AAAA/CNAME/NS/TXT values are strings or `{ value, ttl }`; TTL defaults to 300. */
export type ZoneEntry = z.infer<typeof zoneEntrySchema>;
/** Zone file contents: owner name (or `*.suffix` wildcard) → records. */
export type Zone = z.infer<typeof zoneSchema>;

export interface DohStats {
  queries: number;
  /** keyed `name/TYPE`, e.g. `example.com/MX` */
  byName: Record<string, number>;
}

export interface DohServer {
  listen(port: number, host?: string): Promise<number>;
  close(): Promise<void>;
  stats(): DohStats;
  resetStats(): void;
}

interface DnsAnswer {
  name: string;
  type: number;
  TTL: number;
  data: string;
}

interface Resolution {
  status: number;
  answers: DnsAnswer[];
  delayMs: number;
}

/** Lower case, no trailing dot: the form names are compared and reported in. */
function normalizeName(name: string): string {
  const lower = name.trim().toLowerCase();
  return lower.length > 1 && lower.endsWith(".") ? lower.slice(0, -1) : lower;
}

function fqdn(name: string): string {
  return name.endsWith(".") ? name : `${name}.`;
}

function parseZone(text: string, zonePath: string): Zone {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`zone file ${zonePath} is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = zoneSchema.safeParse(json);
  if (!parsed.success) {
    throw new Error(`zone file ${zonePath} is invalid:\n${z.prettifyError(parsed.error)}`);
  }
  return parsed.data;
}

function isMissingFile(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === "ENOENT";
}

/** Reads and validates a zone file; a missing file is an empty zone. */
export async function readZone(path: string): Promise<Zone> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if (isMissingFile(error)) return {};
    throw error;
  }
  return parseZone(text, path);
}

/** What identifies a zone file's contents on disk: every write replaces the file (a new inode), so it changes. */
async function fileVersion(path: string): Promise<string> {
  try {
    const info = await stat(path, { bigint: true });
    return `${info.ino}:${info.size}:${info.mtimeNs}`;
  } catch (error) {
    if (isMissingFile(error)) return "missing";
    throw error;
  }
}

/** Writes `zone` atomically (temp file in the same directory, then rename), so a reader never sees half of it. */
async function writeZoneFile(path: string, zone: Zone): Promise<string> {
  await mkdir(dirname(resolve(path)), { recursive: true });
  const tempPath = `${path}.${process.pid}.${randomUUID()}.tmp`;
  await writeFile(tempPath, `${JSON.stringify(zone, null, 2)}\n`);
  try {
    // A rename keeps the inode and times, so this is the version the file has once renamed.
    const version = await fileVersion(tempPath);
    await rename(tempPath, path);
    return version;
  } catch (error) {
    await unlink(tempPath).catch(() => undefined);
    throw error;
  }
}

/** Validates and writes a zone file atomically. */
export async function writeZone(path: string, zone: Zone): Promise<void> {
  await writeZoneFile(path, zoneSchema.parse(zone));
}

// The zone this process last read or wrote, per file, with the file's version then. A query or an edit reads and
// validates the file again only if something else has replaced it since: the Workers suite's hundreds of edits and
// queries of one growing zone each used to parse and validate the whole file (~9 s of CPU).
// `byName`, the entries by normalised owner name that queries look up, is built on the first query of a version.
type KnownZone = { version: string; zone: Zone; byName?: Map<string, ZoneEntry> };
const knownZones = new Map<string, KnownZone>();

async function currentZone(path: string): Promise<KnownZone> {
  const key = resolve(path);
  const version = await fileVersion(path);
  const known = knownZones.get(key);
  if (known?.version === version) return known;
  const current = { version, zone: version === "missing" ? {} : await readZone(path) };
  knownZones.set(key, current);
  return current;
}

// Read-modify-write of one file is serialised within this process; separate processes publishing into the same
// zone file at the same moment can still overwrite each other.
const zoneWrites = new Map<string, Promise<unknown>>();

/**
 * Runs one read-modify-write of the zone file after the ones already queued for it in this process. `change` may edit
 * the zone it is given, and validates what it adds: the rest was validated when read.
 */
function serialised<T>(path: string, change: (zone: Zone) => { zone: Zone; result: T }): Promise<T> {
  const key = resolve(path);
  const previous = zoneWrites.get(key) ?? Promise.resolve();
  const write = previous
    .catch(() => undefined)
    .then(async () => {
      const { zone: current } = await currentZone(path);
      // Edited in place below: until written, it is not what the file holds.
      knownZones.delete(key);
      const { zone, result } = change(current);
      knownZones.set(key, { version: await writeZoneFile(path, zone), zone });
      return result;
    });
  zoneWrites.set(key, write);
  void write
    .finally(() => {
      if (zoneWrites.get(key) === write) zoneWrites.delete(key);
    })
    .catch(() => undefined);
  return write;
}

/**
 * Merges records into the entry for `name` (created if absent): each record type given replaces that type's
 * records, the others are kept; a type set to `undefined` is removed. Returns the entry as written.
 */
export function upsertRecords(path: string, name: string, records: Partial<ZoneEntry>): Promise<ZoneEntry> {
  return serialised(path, (zone) => {
    const owner = normalizeName(name);
    let entry: ZoneEntry = {};
    for (const existingName of Object.keys(zone)) {
      if (normalizeName(existingName) === owner) {
        entry = { ...entry, ...zone[existingName] };
        delete zone[existingName];
      }
    }
    const merged = zoneEntrySchema.parse(JSON.parse(JSON.stringify({ ...entry, ...records })));
    zone[owner] = merged;
    return { zone, result: merged };
  });
}

/** Removes every entry for `name`, in the same queue as upsertRecords so a concurrent publish is never lost. */
export function removeRecords(path: string, name: string): Promise<void> {
  return serialised(path, (zone) => {
    const owner = normalizeName(name);
    for (const existingName of Object.keys(zone)) if (normalizeName(existingName) === owner) delete zone[existingName];
    return { zone, result: undefined };
  });
}

function recordValue(record: z.infer<typeof valueRecordSchema>): { value: string; ttl: number } {
  return typeof record === "string" ? { value: record, ttl: DEFAULT_TTL } : { value: record.value, ttl: record.ttl ?? DEFAULT_TTL };
}

/** TXT data the way resolvers present it: quoted, escaped, split into 255-character strings joined by a space. */
function txtData(value: string): string {
  const strings: string[] = [];
  for (let start = 0; start < value.length || strings.length === 0; start += TXT_STRING_MAX) {
    strings.push(value.slice(start, start + TXT_STRING_MAX));
  }
  return strings.map((s) => `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"`).join(" ");
}

function answersOf(entry: ZoneEntry, type: number, owner: string): DnsAnswer[] {
  const answer = (data: string, ttl: number): DnsAnswer => ({ name: owner, type, TTL: ttl, data });
  switch (RECORD_TYPE_NAME.get(type)) {
    case "A":
    case "AAAA": {
      const records = type === RECORD_TYPE.A ? entry.A : entry.AAAA;
      return (records ?? []).map(recordValue).map(({ value, ttl }) => answer(value, ttl));
    }
    case "CNAME":
    case "NS": {
      const records = type === RECORD_TYPE.CNAME ? entry.CNAME : entry.NS;
      return (records ?? []).map(recordValue).map(({ value, ttl }) => answer(fqdn(value), ttl));
    }
    case "TXT":
      return (entry.TXT ?? []).map(recordValue).map(({ value, ttl }) => answer(txtData(value), ttl));
    case "MX":
      return (entry.MX ?? []).map((mx) => answer(`${mx.priority} ${fqdn(mx.exchange)}`, mx.ttl ?? DEFAULT_TTL));
    default:
      return [];
  }
}

/** A CNAME is only followed for a name that holds nothing else, as in a valid zone. */
function isAlias(entry: ZoneEntry): boolean {
  const types = (Object.keys(RECORD_TYPE) as RecordTypeName[]).filter((t) => (entry[t]?.length ?? 0) > 0);
  return types.length === 1 && types[0] === "CNAME";
}

/** Exact name, then an empty non-terminal (a name with records below it), then the most specific wildcard. */
function findEntry(zone: Map<string, ZoneEntry>, name: string): ZoneEntry | undefined {
  const exact = zone.get(name);
  if (exact) return exact;
  const suffix = `.${name}`;
  for (const owner of zone.keys()) {
    if (owner.endsWith(suffix)) return {};
  }
  const labels = name.split(".");
  for (let i = 1; i < labels.length; i++) {
    const wildcard = zone.get(`*.${labels.slice(i).join(".")}`);
    if (wildcard) return wildcard;
  }
  return undefined;
}

function resolveQuery(zone: Map<string, ZoneEntry>, name: string, type: number): Resolution {
  const answers: DnsAnswer[] = [];
  let owner = name;
  let delayMs = 0;
  for (let hop = 0; hop <= MAX_CNAME_HOPS; hop++) {
    const entry = findEntry(zone, owner);
    if (!entry) return { status: RESPONSE_CODE.NXDOMAIN, answers, delayMs };
    if (hop === 0) delayMs = entry.$delay_ms ?? 0;
    if (entry.$servfail) return { status: RESPONSE_CODE.SERVFAIL, answers: [], delayMs };
    const records = answersOf(entry, type, owner);
    if (records.length > 0 || type === RECORD_TYPE.CNAME || !isAlias(entry)) {
      return { status: RESPONSE_CODE.NOERROR, answers: [...answers, ...records], delayMs };
    }
    const [alias] = answersOf(entry, RECORD_TYPE.CNAME, owner);
    if (!alias) break;
    answers.push(alias);
    owner = normalizeName(alias.data);
  }
  return { status: RESPONSE_CODE.SERVFAIL, answers: [], delayMs };
}

function parseType(raw: string | null): number | undefined {
  if (raw === null || raw === "") return RECORD_TYPE.A;
  if (/^\d+$/.test(raw)) {
    const code = Number(raw);
    return code >= 1 && code <= 65535 ? code : undefined;
  }
  return RECORD_TYPE[raw.toUpperCase() as RecordTypeName];
}

function sendJson(res: ServerResponse, status: number, body: unknown, contentType = "application/json"): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": contentType, "Content-Length": Buffer.byteLength(payload) });
  res.end(payload);
}

/** The zone file's entries by normalised owner name, as the file holds them now. */
async function zoneEntries(path: string): Promise<Map<string, ZoneEntry>> {
  const known = await currentZone(path);
  known.byName ??= new Map(Object.entries(known.zone).map(([owner, entry]) => [normalizeName(owner), entry]));
  return known.byName;
}

export function createDohServer(options: { zonePath: string }): DohServer {
  const shutdown = new AbortController();
  let stats: DohStats = { queries: 0, byName: {} };

  async function answerQuery(url: URL, res: ServerResponse): Promise<void> {
    if (url.searchParams.has("dns")) {
      return sendJson(res, 400, { error: "wire-format queries (dns=) are not supported; use ?name=&type=" });
    }
    const rawName = url.searchParams.get("name");
    if (!rawName?.trim()) return sendJson(res, 400, { error: "missing query parameter: name" });
    const type = parseType(url.searchParams.get("type"));
    if (type === undefined) return sendJson(res, 400, { error: `unsupported type: ${url.searchParams.get("type")}` });

    const name = normalizeName(rawName);
    const statsKey = `${name}/${RECORD_TYPE_NAME.get(type) ?? String(type)}`;
    stats.queries += 1;
    stats.byName[statsKey] = (stats.byName[statsKey] ?? 0) + 1;

    const { status, answers, delayMs } = resolveQuery(await zoneEntries(options.zonePath), name, type);
    if (delayMs > 0) {
      try {
        await sleep(delayMs, undefined, { signal: shutdown.signal });
      } catch {
        return; // server closing; its connections are being torn down
      }
    }
    sendJson(
      res,
      200,
      {
        Status: status,
        TC: false,
        RD: true,
        RA: true,
        AD: false,
        CD: false,
        Question: [{ name, type }],
        ...(answers.length > 0 ? { Answer: answers } : {}),
      },
      "application/dns-json",
    );
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    switch (url.pathname) {
      case "/dns-query":
      case "/resolve":
        if (req.method !== "GET") return sendJson(res, 405, { error: "only GET JSON queries are supported" });
        return answerQuery(url, res);
      case "/stats":
        if (req.method === "GET") return sendJson(res, 200, stats);
        if (req.method === "DELETE") {
          stats = { queries: 0, byName: {} };
          res.writeHead(204).end();
          return;
        }
        return sendJson(res, 405, { error: "use GET or DELETE" });
      default:
        if (url.pathname.startsWith("/zone/")) return publish(req, res, decodeURIComponent(url.pathname.slice("/zone/".length)));
        return sendJson(res, 404, { error: `not found: ${url.pathname}` });
    }
  }

  // Tests inside workerd cannot write the zone file, so they publish records over HTTP: PUT merges record types
  // into the name (as upsertRecords does), DELETE removes the name.
  async function publish(req: IncomingMessage, res: ServerResponse, rawName: string): Promise<void> {
    const name = normalizeName(rawName);
    if (!name) return sendJson(res, 400, { error: "missing name" });
    if (req.method === "DELETE") {
      await removeRecords(options.zonePath, name);
      res.writeHead(204).end();
      return;
    }
    if (req.method !== "PUT") return sendJson(res, 405, { error: "use PUT or DELETE" });
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const parsed = zoneEntrySchema.partial().safeParse(JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}"));
    if (!parsed.success) return sendJson(res, 422, { error: parsed.error.message });
    sendJson(res, 200, await upsertRecords(options.zonePath, name, parsed.data));
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: (error as Error).message });
      else res.destroy();
    });
  });

  return {
    listen(port, host = "127.0.0.1") {
      return new Promise((resolveListen, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolveListen((server.address() as AddressInfo).port);
        });
      });
    },
    close() {
      shutdown.abort();
      return new Promise((resolveClose, reject) => {
        if (!server.listening) return resolveClose();
        server.close((error) => (error ? reject(error) : resolveClose()));
        server.closeAllConnections();
      });
    },
    stats() {
      return { queries: stats.queries, byName: { ...stats.byName } };
    },
    resetStats() {
      stats = { queries: 0, byName: {} };
    },
  };
}
