import { sharedDb } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createResolver, type DnsAnswer, type DnsRecordType, type DnsResolver } from "../../src/domain/dns/doh";
import { VERIFICATION_STATUSES, verificationResultSchema, verifyEmail, verifyMany, type VerificationResult } from "../../src/domain/verification";
import { config } from "../../src/config";

const deps = (timeoutMs?: number) => ({ resolver: createResolver({ url: config(env).dohUrl, db: sharedDb(env), timeoutMs }) });
const verify = (email: string, timeoutMs?: number) => verifyEmail(email, deps(timeoutMs));

async function queriesFor(name: string, type: string): Promise<number> {
  const stats = await (await fetch(`${env.TEST_DOH_ADMIN_URL}/stats`)).json<{ byName: Record<string, number> }>();
  return stats.byName[`${name}/${type}`] ?? 0;
}

describe("verifyEmail: deliverable addresses", () => {
  it("a clean address with MX is valid, safe, 0.9 when mailbox checks are off", async () => {
    const result = await verify("  Jane.Doe@ACME.verify-test ");
    expect(result).toEqual({
      email: "Jane.Doe@ACME.verify-test",
      normalized: "Jane.Doe@acme.verify-test",
      account: "Jane.Doe",
      domain: "acme.verify-test",
      result: "valid",
      status: "valid",
      sub_status: null,
      mx_found: true,
      mx_record: "mx1.acme.verify-test",
      mailbox_check: "off",
      disposable: false,
      role_based: false,
      free_provider: false,
      did_you_mean: null,
      score: 0.9,
      quality: "safe",
      syntax_valid: true,
    } satisfies VerificationResult);
    expect(verificationResultSchema.parse(result)).toEqual(result);
  });

  it("a free provider is valid and only flagged", async () => {
    expect(await verify("jane.doe@gmail.com")).toMatchObject({
      result: "valid",
      status: "valid",
      sub_status: "free_provider",
      free_provider: true,
      mx_found: true,
      mx_record: "gmail-smtp-in.l.google.com",
      score: 0.9,
      quality: "safe",
    });
  });

  it("no MX but an A or AAAA record is an implicit MX (RFC 5321 §5.1): valid, lower score", async () => {
    for (const domain of ["implicit.verify-test", "implicit6.verify-test"]) {
      expect(await verify(`jane@${domain}`)).toMatchObject({
        result: "valid",
        status: "valid",
        sub_status: "implicit_mx",
        mx_found: false,
        mx_record: domain,
        score: 0.8,
      });
    }
  });

  it("an IDN domain is checked in punycode", async () => {
    expect(await verify("anna@Bücher.verify-test")).toMatchObject({
      email: "anna@Bücher.verify-test",
      normalized: "anna@xn--bcher-kva.verify-test",
      domain: "xn--bcher-kva.verify-test",
      status: "valid",
      mx_record: "mx.xn--bcher-kva.verify-test",
    });
  });

  it("a UTF-8 local part is valid but flagged smtputf8", async () => {
    expect(await verify("josé@acme.verify-test")).toMatchObject({
      result: "valid",
      status: "valid",
      sub_status: "smtputf8",
      account: "josé",
      score: 0.8,
    });
  });
});

describe("verifyEmail: invalid addresses", () => {
  it.each([
    ['"john doe"@acme.verify-test', "quoted_local_part"],
    ["jane@[192.0.2.1]", "ip_literal"],
    [`${"a".repeat(65)}@acme.verify-test`, "local_part_too_long"],
    ["jane.acme.verify-test", "missing_at"],
  ])("%s is invalid_syntax (%s) without any DNS query", async (email, subStatus) => {
    const resolver: DnsResolver = {
      resolve: () => Promise.reject(new Error("no DNS for bad syntax")),
      lookupMany: () => Promise.reject(new Error("no DNS for bad syntax")),
    };
    expect(await verifyEmail(email, { resolver })).toMatchObject({
      result: "invalid",
      status: "invalid_syntax",
      sub_status: subStatus,
      normalized: null,
      syntax_valid: false,
      mx_found: false,
      score: 0,
      quality: "bad",
    });
  });

  it("NXDOMAIN is invalid_domain", async () => {
    expect(await verify("jane@absent.verify-test")).toMatchObject({
      result: "invalid",
      status: "invalid_domain",
      sub_status: null,
      mx_found: false,
      mx_record: null,
      score: 0,
      quality: "bad",
    });
  });

  it("a null MX (RFC 7505) is invalid even though the domain has an A record", async () => {
    expect(await verify("jane@nullmx.verify-test")).toMatchObject({
      result: "invalid",
      status: "null_mx",
      mx_found: false,
      mx_record: null,
    });
  });

  it("no MX and no A/AAAA is no_mx", async () => {
    expect(await verify("jane@nomx.verify-test")).toMatchObject({ result: "invalid", status: "no_mx", mx_found: false });
  });
});

describe("verifyEmail: risky and unknown addresses", () => {
  it("a disposable domain is risky with quality bad (do not mail)", async () => {
    expect(await verify("someone@mailinator.com")).toMatchObject({
      result: "risky",
      status: "disposable",
      disposable: true,
      free_provider: false,
      mx_found: true,
      score: 0.2,
      quality: "bad",
    });
  });

  it.each(["admin", "info", "Info+newsletter"])("%s@ is role_based and risky", async (local) => {
    expect(await verify(`${local}@acme.verify-test`)).toMatchObject({
      result: "risky",
      status: "role_based",
      role_based: true,
      score: 0.6,
      quality: "risky",
    });
  });

  it("a role account at a disposable domain reports disposable first", async () => {
    expect(await verify("admin@mailinator.com")).toMatchObject({ status: "disposable", role_based: true, disposable: true });
  });

  it("SERVFAIL is unknown: dns_error / servfail", async () => {
    expect(await verify("jane@servfail.verify-test")).toMatchObject({
      result: "unknown",
      status: "dns_error",
      sub_status: "servfail",
      mx_found: false,
      score: 0.5,
      quality: "unknown",
    });
  });

  it("a DoH timeout is unknown: dns_error / timeout", async () => {
    expect(await verify("jane@slow.verify-test", 200)).toMatchObject({
      result: "unknown",
      status: "dns_error",
      sub_status: "timeout",
    });
  });

  it("a role account whose DNS fails is still role_based (precedence)", async () => {
    expect(await verify("admin@servfail.verify-test")).toMatchObject({ status: "role_based", mx_found: false });
  });
});

describe("verifyEmail: typo suggestions", () => {
  it("suggests the provider for a mistyped domain that does not exist", async () => {
    expect(await verify("jane@gmial.com")).toMatchObject({
      status: "invalid_domain",
      sub_status: "typo_suggested",
      did_you_mean: "jane@gmail.com",
    });
    expect(await verify("jane@acme.con")).toMatchObject({
      status: "invalid_domain",
      did_you_mean: "jane@acme.com",
    });
  });

  it("a mistyped domain that does resolve keeps its status but loses score", async () => {
    expect(await verify("jane@yaho.com")).toMatchObject({
      result: "valid",
      status: "valid",
      sub_status: "typo_suggested",
      did_you_mean: "jane@yahoo.com",
      free_provider: false,
      score: 0.7,
    });
  });

  it("no suggestion for a correct domain", async () => {
    expect((await verify("jane@gmail.com")).did_you_mean).toBeNull();
  });
});

describe("verifyMany", () => {
  it("returns results in input order and asks DNS once per domain", async () => {
    const domain = `d-${crypto.randomUUID().slice(0, 8)}.bulk.verify-test`;
    const emails = [
      `a@${domain}`,
      "not an email",
      `b@${domain}`,
      `info@${domain}`,
      `A@${domain.toUpperCase()}`,
      "jane@absent.verify-test",
      "someone@mailinator.com",
    ];
    const results = await verifyMany(emails, deps());
    expect(results.map((r) => [r.email, r.status])).toEqual([
      [`a@${domain}`, "valid"],
      ["not an email", "invalid_syntax"],
      [`b@${domain}`, "valid"],
      [`info@${domain}`, "role_based"],
      [`A@${domain.toUpperCase()}`, "valid"],
      ["jane@absent.verify-test", "invalid_domain"],
      ["someone@mailinator.com", "disposable"],
    ]);
    expect(await queriesFor(domain, "MX")).toBe(1);
  });

  it("falls back to A/AAAA once per domain without MX", async () => {
    const domain = `nomx-${crypto.randomUUID().slice(0, 8)}.verify-test`;
    const calls: string[] = [];
    const answers: Record<string, DnsAnswer> = {
      MX: { status: "ok", records: [], ttl: 60 },
      A: { status: "ok", records: ["192.0.2.1"], ttl: 60 },
      AAAA: { status: "ok", records: [], ttl: 60 },
    };
    const inner = createResolver({ url: config(env).dohUrl });
    const resolver: DnsResolver = {
      resolve: async <T extends DnsRecordType>(name: string, type: T) => {
        calls.push(`${name}/${type}`);
        if (name !== domain) return inner.resolve(name, type);
        return answers[type] as DnsAnswer<T>;
      },
      lookupMany: async <T extends DnsRecordType>(queries: readonly { name: string; type: T }[]) => {
        const out: DnsAnswer<T>[] = [];
        for (const q of queries) out.push(await resolver.resolve(q.name, q.type));
        return out;
      },
    };
    const results = await verifyMany([`a@${domain}`, `b@${domain}`, `c@${domain}`], { resolver });
    expect(results.every((r) => r.status === "valid" && r.sub_status === "implicit_mx")).toBe(true);
    expect(calls.filter((c) => c === `${domain}/A`)).toHaveLength(1);
    expect(calls.filter((c) => c === `${domain}/AAAA`)).toHaveLength(1);
  });

  it("handles an empty list", async () => {
    expect(await verifyMany([], deps())).toEqual([]);
  });
});

describe("status table", () => {
  it("maps every status to one result and quality, with scores in 0..1", () => {
    for (const info of Object.values(VERIFICATION_STATUSES)) {
      expect(["valid", "invalid", "risky", "unknown"]).toContain(info.result);
      expect(["safe", "risky", "bad", "unknown"]).toContain(info.quality);
      expect(info.baseScore).toBeGreaterThanOrEqual(0);
      expect(info.baseScore).toBeLessThan(1);
    }
  });
});
