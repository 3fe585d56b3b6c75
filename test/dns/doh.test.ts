import { sharedDb } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createDnsCache, createResolver, lookupMany, parseMxData, parseTxtData, resolve, type DohOptions } from "../../src/domain/dns/doh";
import { config } from "../../src/config";

interface DohStats {
  queries: number;
  byName: Record<string, number>;
}

async function queriesFor(name: string, type: string): Promise<number> {
  const stats = await (await fetch(`${env.TEST_DOH_ADMIN_URL}/stats`)).json<DohStats>();
  return stats.byName[`${name}/${type}`] ?? 0;
}

/** A fresh name under the `*.cache.verify-test` wildcard, so query counts and D1 rows start at zero. */
function freshName(): string {
  return `n-${crypto.randomUUID().slice(0, 8)}.cache.verify-test`;
}

const memoryOnly = (): DohOptions => ({ url: config(env).dohUrl, cache: createDnsCache() });
const withD1 = (): DohOptions => ({ url: config(env).dohUrl, db: sharedDb(env), cache: createDnsCache() });

describe("resolve: answers", () => {
  it("parses MX records, strips trailing dots and keeps the lowest TTL", async () => {
    expect(await resolve(memoryOnly(), "acme.verify-test", "MX")).toEqual({
      status: "ok",
      records: [
        { priority: 20, exchange: "mx2.acme.verify-test" },
        { priority: 10, exchange: "mx1.acme.verify-test" },
      ],
      // The records carry 300 (the zone default) and 600.
      ttl: 300,
    });
  });

  it("keeps '.' as the exchange of a null MX", async () => {
    expect(await resolve(memoryOnly(), "nullmx.verify-test", "MX")).toMatchObject({
      status: "ok",
      records: [{ priority: 0, exchange: "." }],
    });
  });

  it("answers A, AAAA and CNAME", async () => {
    expect(await resolve(memoryOnly(), "implicit.verify-test", "A")).toMatchObject({
      status: "ok",
      records: ["192.0.2.21"],
    });
    expect(await resolve(memoryOnly(), "implicit6.verify-test", "AAAA")).toMatchObject({
      status: "ok",
      records: ["2001:db8::21"],
    });
    expect(await resolve(memoryOnly(), "cname.verify-test", "CNAME")).toMatchObject({
      status: "ok",
      records: ["acme.verify-test"],
    });
  });

  it("returns only the type asked for when the answer follows a CNAME", async () => {
    expect(await resolve(memoryOnly(), "cname.verify-test", "MX")).toMatchObject({
      status: "ok",
      records: [
        { priority: 20, exchange: "mx2.acme.verify-test" },
        { priority: 10, exchange: "mx1.acme.verify-test" },
      ],
    });
  });

  it("joins a TXT record split into 255-character strings and unescapes it", async () => {
    const answer = await resolve(memoryOnly(), "txt.verify-test", "TXT");
    const expected = `v=DKIM1; k=rsa; p=${"A".repeat(300)}; n="quoted" back\\slash`;
    expect(expected.length).toBeGreaterThan(255);
    expect(answer).toMatchObject({ status: "ok", records: [expected, "v=spf1 -all"] });
  });

  it("is NOERROR with no records for a name without that type, with the 60 s negative TTL", async () => {
    expect(await resolve(memoryOnly(), "nomx.verify-test", "MX")).toEqual({ status: "ok", records: [], ttl: 60 });
  });

  it("reports NXDOMAIN, SERVFAIL and a timeout", async () => {
    expect(await resolve(memoryOnly(), "absent.verify-test", "MX")).toEqual({ status: "nxdomain", ttl: 60 });
    expect(await resolve(memoryOnly(), "servfail.verify-test", "MX")).toEqual({ status: "servfail" });
    // The fixture answers this name after 3 s with an MX record; "timeout" can only come from the 200 ms abort
    // firing before that answer, so no clock is read.
    expect(await resolve({ ...memoryOnly(), timeoutMs: 200 }, "slow.verify-test", "MX")).toEqual({
      status: "timeout",
    });
  });

  it("reports a resolver that answers with an HTTP error as SERVFAIL", async () => {
    const broken = { url: `${env.TEST_DOH_ADMIN_URL}/no-such-path`, cache: createDnsCache() };
    expect(await resolve(broken, "acme.verify-test", "MX")).toEqual({ status: "servfail" });
  });
});

describe("resolve: caching", () => {
  it("asks DoH once per name and type within one cache Map", async () => {
    const name = freshName();
    const opts = memoryOnly();
    const first = await resolve(opts, name, "MX");
    const second = await resolve(opts, `${name.toUpperCase()}.`, "MX");
    expect(second).toEqual(first);
    expect(await queriesFor(name, "MX")).toBe(1);
    await resolve(opts, name, "A");
    expect(await queriesFor(name, "A")).toBe(1);
  });

  it("shares one in-flight lookup between concurrent callers", async () => {
    const name = freshName();
    const opts = memoryOnly();
    const answers = await Promise.all([resolve(opts, name, "MX"), resolve(opts, name, "MX"), resolve(opts, name, "MX")]);
    expect(answers[1]).toEqual(answers[0]);
    expect(answers[2]).toEqual(answers[0]);
    expect(await queriesFor(name, "MX")).toBe(1);
  });

  it("serves a later request from D1 without a new DoH query", async () => {
    const name = freshName();
    const before = Date.now();
    const first = await resolve(withD1(), name, "MX");
    expect(first).toMatchObject({ status: "ok", records: [{ priority: 10, exchange: "mx.cache.verify-test" }] });

    const row = await env.DB.prepare("SELECT answer, expires_at FROM dns_cache WHERE name = ? AND type = 'MX'")
      .bind(name)
      .first<{ answer: string; expires_at: number }>();
    expect(JSON.parse(row!.answer)).toEqual({
      status: "ok",
      records: [{ priority: 10, exchange: "mx.cache.verify-test" }],
    });
    expect(row!.expires_at).toBeGreaterThanOrEqual(before + 300_000);

    // A new Map stands for a new request: only D1 remembers the answer.
    const second = await resolve(withD1(), name, "MX");
    expect(second).toMatchObject({ status: "ok", records: [{ priority: 10, exchange: "mx.cache.verify-test" }] });
    expect(second.status === "ok" && second.ttl).toBeGreaterThan(290);
    expect(await queriesFor(name, "MX")).toBe(1);
  });

  it("caches NXDOMAIN and empty answers for 60 s, in memory and in D1", async () => {
    const missing = `absent-${crypto.randomUUID().slice(0, 8)}.verify-test`;
    const before = Date.now();
    expect(await resolve(withD1(), missing, "MX")).toMatchObject({ status: "nxdomain" });
    const after = Date.now();
    expect(await resolve(withD1(), missing, "MX")).toMatchObject({ status: "nxdomain" });
    expect(await queriesFor(missing, "MX")).toBe(1);
    const row = await env.DB.prepare("SELECT expires_at FROM dns_cache WHERE name = ?").bind(missing).first<{ expires_at: number }>();
    expect(row!.expires_at - before).toBeGreaterThanOrEqual(60_000);
    expect(row!.expires_at - after).toBeLessThanOrEqual(60_000);

    const empty = freshName();
    expect(await resolve(withD1(), empty, "TXT")).toMatchObject({ status: "ok", records: [] });
    expect(await resolve(withD1(), empty, "TXT")).toMatchObject({ status: "ok", records: [] });
    expect(await queriesFor(empty, "TXT")).toBe(1);
  });

  it("does not cache SERVFAIL or a timeout", async () => {
    const opts = withD1();
    const before = await queriesFor("servfail.verify-test", "TXT");
    await resolve(opts, "servfail.verify-test", "TXT");
    await resolve(opts, "servfail.verify-test", "TXT");
    expect(await queriesFor("servfail.verify-test", "TXT")).toBe(before + 2);
    expect(opts.cache!.size).toBe(0);

    const slow = { ...withD1(), timeoutMs: 100 };
    expect(await resolve(slow, "slow.verify-test", "TXT")).toEqual({ status: "timeout" });
    expect(slow.cache!.size).toBe(0);
    const rows = await env.DB.prepare("SELECT count(*) AS n FROM dns_cache WHERE name IN ('servfail.verify-test', 'slow.verify-test')").first<{
      n: number;
    }>();
    expect(rows!.n).toBe(0);
  });

  it("lookupMany answers in query order and serves warm keys from D1", async () => {
    // More names than one D1 statement may bind, so the chunked read and write are both exercised.
    const names = Array.from({ length: 120 }, () => freshName());
    const warm = await lookupMany(
      withD1(),
      names.map((name) => ({ name, type: "MX" as const })),
    );
    expect(warm).toHaveLength(120);
    expect(warm.every((a) => a.status === "ok" && a.records[0]?.exchange === "mx.cache.verify-test")).toBe(true);

    const mixed = [
      ...names.slice(0, 3).map((name) => ({ name, type: "MX" as const })),
      { name: "servfail.verify-test", type: "MX" as const },
      { name: names[119]!, type: "MX" as const },
    ];
    const again = await lookupMany(withD1(), mixed);
    expect(again.map((a) => a.status)).toEqual(["ok", "ok", "ok", "servfail", "ok"]);
    for (const name of [...names.slice(0, 3), names[119]!]) expect(await queriesFor(name, "MX")).toBe(1);
  });

  it("a resolver from createResolver keeps one cache across its calls", async () => {
    const name = freshName();
    const resolver = createResolver({ url: config(env).dohUrl });
    await resolver.resolve(name, "MX");
    await resolver.lookupMany([{ name, type: "MX" }]);
    expect(await queriesFor(name, "MX")).toBe(1);
  });
});

describe("record data parsing", () => {
  it("parseTxtData joins quoted strings and undoes escapes", () => {
    expect(parseTxtData('"abc" "def"')).toBe("abcdef");
    expect(parseTxtData('"say \\"hi\\"" " and \\\\ bye"')).toBe('say "hi" and \\ bye');
    expect(parseTxtData('"caf\\195\\169"')).toBe("café");
    expect(parseTxtData('""')).toBe("");
    expect(parseTxtData("v=spf1 include:_spf.example.com ~all")).toBe("v=spf1 include:_spf.example.com ~all");
  });

  it("parseMxData reads priority and exchange", () => {
    expect(parseMxData("10 MX.Example.COM.")).toEqual({ priority: 10, exchange: "mx.example.com" });
    expect(parseMxData("0 .")).toEqual({ priority: 0, exchange: "." });
    expect(parseMxData("garbage")).toBeNull();
  });
});
