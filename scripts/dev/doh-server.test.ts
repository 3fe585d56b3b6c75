import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createDohServer, readZone, upsertRecords, writeZone, type DohServer, type Zone } from "./doh-server.ts";

interface DohAnswer {
  Status: number;
  TC: boolean;
  RD: boolean;
  RA: boolean;
  AD: boolean;
  CD: boolean;
  Question: { name: string; type: number }[];
  Answer?: { name: string; type: number; TTL: number; data: string }[];
}

const DKIM_KEY = `v=DKIM1; k=rsa; p=${"MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA".repeat(9)}`.slice(0, 410);

const zone: Zone = {
  "example.com": {
    MX: [{ priority: 10, exchange: "mx.example.com", ttl: 600 }],
    A: ["192.0.2.1"],
    AAAA: [],
    TXT: ["v=spf1 include:_spf.mailforge.dev ~all"],
  },
  "s1._domainkey.example.com": { TXT: [DKIM_KEY] },
  "null-mx.test": { MX: [{ priority: 0, exchange: "." }] },
  "broken.test": { $servfail: true },
  "slow.test": { $delay_ms: 300, A: ["192.0.2.9"] },
  "*.bulk.test": { MX: [{ priority: 10, exchange: "mx.bulk.test" }] },
  "*.eu.bulk.test": { MX: [{ priority: 20, exchange: "mx.eu.bulk.test" }] },
  "s2._domainkey.example.com": { CNAME: ["s2.dkim.mailforge.dev"] },
  "s2.dkim.mailforge.dev": { TXT: ["v=DKIM1; p=abc"] },
};

/** Joins the quoted character-strings of a TXT answer back into the published value. */
function joinTxt(data: string): string {
  return [...data.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => (m[1] ?? "").replace(/\\(.)/g, "$1")).join("");
}

let dir: string;
let zonePath: string;
let doh: DohServer;
let baseUrl: string;

async function query(name: string, type?: string, path = "/dns-query"): Promise<DohAnswer> {
  const params = new URLSearchParams({ name, ...(type ? { type } : {}) });
  const res = await fetch(`${baseUrl}${path}?${params}`, { headers: { Accept: "application/dns-json" } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("application/dns-json");
  return (await res.json()) as DohAnswer;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "doh-server-test-"));
  zonePath = join(dir, "zone.json");
  await writeZone(zonePath, zone);
  doh = createDohServer({ zonePath });
  baseUrl = `http://127.0.0.1:${await doh.listen(0)}`;
});

afterAll(async () => {
  await doh.close();
  await rm(dir, { recursive: true, force: true });
});

beforeEach(() => doh.resetStats());

describe("answers", () => {
  it("answers MX with priority and a fully qualified exchange, in the cloudflare-dns JSON shape", async () => {
    expect(await query("example.com", "MX")).toEqual({
      Status: 0,
      TC: false,
      RD: true,
      RA: true,
      AD: false,
      CD: false,
      Question: [{ name: "example.com", type: 15 }],
      Answer: [{ name: "example.com", type: 15, TTL: 600, data: "10 mx.example.com." }],
    });
  });

  it("answers A (the default type) and TXT in quoted form with the default TTL", async () => {
    expect((await query("example.com")).Answer).toEqual([{ name: "example.com", type: 1, TTL: 300, data: "192.0.2.1" }]);
    expect((await query("example.com", "TXT")).Answer).toEqual([
      { name: "example.com", type: 16, TTL: 300, data: '"v=spf1 include:_spf.mailforge.dev ~all"' },
    ]);
  });

  it("accepts numeric types, any case and a trailing dot", async () => {
    const answer = await query("EXAMPLE.com.", "15");
    expect(answer.Question).toEqual([{ name: "example.com", type: 15 }]);
    expect(answer.Answer?.[0]?.data).toBe("10 mx.example.com.");
    expect((await query("example.com", "txt")).Answer?.[0]?.type).toBe(16);
  });

  it("splits a TXT value over 255 characters into quoted strings that join to the original", async () => {
    expect(DKIM_KEY).toHaveLength(410);
    const [txt] = (await query("s1._domainkey.example.com", "TXT")).Answer ?? [];
    expect(txt?.data).toBe(`"${DKIM_KEY.slice(0, 255)}" "${DKIM_KEY.slice(255)}"`);
    expect(joinTxt(txt?.data ?? "")).toBe(DKIM_KEY);
  });

  it("answers a null MX as 0 .", async () => {
    expect((await query("null-mx.test", "MX")).Answer).toEqual([{ name: "null-mx.test", type: 15, TTL: 300, data: "0 ." }]);
  });

  it("distinguishes NXDOMAIN (absent name) from NOERROR without answers (no records of that type)", async () => {
    const absent = await query("nowhere.example.org", "MX");
    expect(absent.Status).toBe(3);
    expect(absent).not.toHaveProperty("Answer");
    const empty = await query("example.com", "AAAA");
    expect(empty.Status).toBe(0);
    expect(empty).not.toHaveProperty("Answer");
    // a name that only has records below it exists too
    expect((await query("_domainkey.example.com", "TXT")).Status).toBe(0);
  });

  it("answers SERVFAIL for a name marked $servfail", async () => {
    const answer = await query("broken.test", "MX");
    expect(answer.Status).toBe(2);
    expect(answer).not.toHaveProperty("Answer");
  });

  it("holds the answer of a name with $delay_ms, so a client timeout fires first", async () => {
    const url = `${baseUrl}/dns-query?name=slow.test&type=A`;
    await expect(fetch(url, { signal: AbortSignal.timeout(100) })).rejects.toThrow();
    const started = Date.now();
    const res = await fetch(url);
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
    expect(((await res.json()) as DohAnswer).Answer?.[0]?.data).toBe("192.0.2.9");
  });

  it("matches wildcards for any name below their suffix, most specific first", async () => {
    expect((await query("a.bulk.test", "MX")).Answer).toEqual([{ name: "a.bulk.test", type: 15, TTL: 300, data: "10 mx.bulk.test." }]);
    expect((await query("x.y.bulk.test", "MX")).Answer?.[0]?.data).toBe("10 mx.bulk.test.");
    expect((await query("shop.eu.bulk.test", "MX")).Answer?.[0]?.data).toBe("20 mx.eu.bulk.test.");
    // the suffix itself is not matched; it exists (records below it) but has none of its own
    const suffix = await query("bulk.test", "MX");
    expect(suffix.Status).toBe(0);
    expect(suffix).not.toHaveProperty("Answer");
  });

  it("follows a CNAME-only name to its target, like a recursive resolver", async () => {
    expect((await query("s2._domainkey.example.com", "TXT")).Answer).toEqual([
      { name: "s2._domainkey.example.com", type: 5, TTL: 300, data: "s2.dkim.mailforge.dev." },
      { name: "s2.dkim.mailforge.dev", type: 16, TTL: 300, data: '"v=DKIM1; p=abc"' },
    ]);
    expect((await query("s2._domainkey.example.com", "CNAME")).Answer).toHaveLength(1);
  });

  it("answers /resolve the same as /dns-query", async () => {
    expect(await query("example.com", "MX", "/resolve")).toEqual(await query("example.com", "MX"));
  });

  it("rejects a query without a name or with an unknown type", async () => {
    expect((await fetch(`${baseUrl}/dns-query?type=A`)).status).toBe(400);
    const res = await fetch(`${baseUrl}/dns-query?name=example.com&type=BOGUS`);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "unsupported type: BOGUS" });
  });
});

describe("zone file", () => {
  it("picks up records another process publishes by rewriting the file", async () => {
    expect((await query("new.example.com", "TXT")).Status).toBe(3);
    await upsertRecords(zonePath, "New.Example.com.", { TXT: ["mailforge-verification=abc"] });
    expect((await query("new.example.com", "TXT")).Answer?.[0]?.data).toBe('"mailforge-verification=abc"');

    await upsertRecords(zonePath, "new.example.com", { MX: [{ priority: 5, exchange: "mx.new.example.com" }] });
    expect((await readZone(zonePath))["new.example.com"]).toEqual({
      TXT: ["mailforge-verification=abc"],
      MX: [{ priority: 5, exchange: "mx.new.example.com" }],
    });
    expect((await query("new.example.com", "TXT")).Answer?.[0]?.data).toBe('"mailforge-verification=abc"');

    await upsertRecords(zonePath, "new.example.com", { TXT: ["mailforge-verification=def"] });
    expect((await query("new.example.com", "TXT")).Answer?.[0]?.data).toBe('"mailforge-verification=def"');
  });

  it("sees the file rewritten in place by hand, and an edit after that keeps what was written", async () => {
    const zone = await readZone(zonePath);
    await writeFile(zonePath, JSON.stringify({ ...zone, "hand.example.com": { TXT: ["written by hand"] } }));
    expect((await query("hand.example.com", "TXT")).Answer?.[0]?.data).toBe('"written by hand"');
    await upsertRecords(zonePath, "later.example.com", { TXT: ["published"] });
    expect((await readZone(zonePath))["hand.example.com"]).toEqual({ TXT: ["written by hand"] });
    expect((await query("later.example.com", "TXT")).Answer?.[0]?.data).toBe('"published"');
  });

  it("refuses to publish an invalid record, and keeps the zone as it was", async () => {
    await expect(upsertRecords(zonePath, "bad.example.com", { MX: [{ priority: 70000, exchange: "mx" }] })).rejects.toThrow();
    expect((await query("bad.example.com", "MX")).Status).toBe(3);
    expect((await readZone(zonePath))["example.com"]).toBeDefined();
  });

  it("serves an empty zone while the file is missing", async () => {
    const missing = createDohServer({ zonePath: join(dir, "absent.json") });
    const port = await missing.listen(0);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/dns-query?name=example.com&type=A`);
      expect(((await res.json()) as DohAnswer).Status).toBe(3);
    } finally {
      await missing.close();
    }
  });

  it("rejects an invalid zone with the reason", async () => {
    await expect(writeZone(zonePath, { "x.test": { MX: [{ priority: -1, exchange: "mx" }] } })).rejects.toThrow();
    expect((await readZone(zonePath))["example.com"]).toBeDefined();
  });
});

describe("stats", () => {
  it("counts queries by name and type, served at /stats and reset by DELETE /stats", async () => {
    await query("example.com", "MX");
    await query("Example.com.", "15");
    await query("s1._domainkey.example.com", "TXT");
    const expected = { queries: 3, byName: { "example.com/MX": 2, "s1._domainkey.example.com/TXT": 1 } };
    expect(doh.stats()).toEqual(expected);
    expect(await (await fetch(`${baseUrl}/stats`)).json()).toEqual(expected);

    expect((await fetch(`${baseUrl}/stats`, { method: "DELETE" })).status).toBe(204);
    expect(doh.stats()).toEqual({ queries: 0, byName: {} });
  });
});

describe("publishing over HTTP", () => {
  it("PUT /zone/:name merges records that the next query sees; DELETE removes the name", async () => {
    const put = await fetch(`${baseUrl}/zone/Published.Test.`, {
      method: "PUT",
      body: JSON.stringify({ TXT: ["v=spf1 -all"], MX: [{ priority: 5, exchange: "mx.published.test" }] }),
    });
    expect(put.status).toBe(200);
    expect((await query("published.test", "TXT")).Answer?.[0]?.data).toBe('"v=spf1 -all"');
    expect((await query("published.test", "MX")).Answer?.[0]?.data).toBe("5 mx.published.test.");

    expect((await fetch(`${baseUrl}/zone/published.test`, { method: "PUT", body: JSON.stringify({ MX: [{ priority: "x" }] }) })).status).toBe(422);
    expect((await fetch(`${baseUrl}/zone/published.test`, { method: "DELETE" })).status).toBe(204);
    expect((await query("published.test", "TXT")).Status).toBe(3);
  });

  it("loses no publish when other names are published and deleted at the same moment", async () => {
    // Test files run in parallel and share one server: a DELETE outside the write queue used to drop a PUT.
    const names = Array.from({ length: 100 }, (_, i) => `race-${i}.test`);
    await Promise.all(
      names.flatMap((name) => [
        fetch(`${baseUrl}/zone/${name}`, { method: "PUT", body: JSON.stringify({ TXT: [name] }) }),
        fetch(`${baseUrl}/zone/gone-${name}`, { method: "DELETE" }),
      ]),
    );
    for (const name of names) expect((await query(name, "TXT")).Answer?.[0]?.data).toBe(`"${name}"`);
  });
});
