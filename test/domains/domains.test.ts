import { env } from "cloudflare:workers";
import { createScheduledController, createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../../src/index";
import { call, createAccount, json } from "../support/helpers";
import { publish, publishRecords, uniqueDomain, unpublish, verifiedDomain, type Domain } from "../support/sending";
import { config } from "../../src/config";
import { decryptDkimKey } from "../../src/domain/domains/domains";

describe("sending domains", () => {
  it("returns the DKIM, SPF and DMARC records to publish, each exactly as it must be published", async () => {
    const account = await createAccount();
    const name = uniqueDomain("records");
    const response = await call("/api/v1/domains", { key: account.api_key, body: { name: ` ${name.toUpperCase()}. ` } });
    expect(response.status).toBe(201);
    const domain = await json<Domain & { dkim_selector: string }>(response);
    expect(domain).toMatchObject({ name, status: "pending" });
    const dkim = domain.records.find((record) => record.purpose === "dkim")!;
    expect(dkim).toMatchObject({ type: "TXT", name: `${domain.dkim_selector}._domainkey.${name}`, status: "pending" });
    expect(dkim.value).toMatch(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]+=*$/);
    expect(dkim.value.length).toBeGreaterThan(255);
    expect(domain.records.find((record) => record.purpose === "spf")).toMatchObject({ name, value: `v=spf1 include:${config(env).spfInclude} ~all` });
    expect(domain.records.find((record) => record.purpose === "dmarc")).toMatchObject({
      name: `_dmarc.${name}`,
      value: expect.stringMatching(/^v=DMARC1;/),
    });
    expect(domain.records.find((record) => record.purpose === "dkim_ed25519")).toMatchObject({
      type: "TXT",
      name: `${domain.dkim_selector}e._domainkey.${name}`,
      value: expect.stringMatching(/^v=DKIM1; k=ed25519; p=[A-Za-z0-9+/]{43}=$/),
    });
    // BOUNCE_DOMAIN's MX (Cloudflare Email Routing): where this domain's bounces come back, published by the operator.
    expect(domain.records.find((record) => record.purpose === "return_path")).toEqual({
      type: "MX",
      name: "bounces.mailforge.test",
      value: "route1.mx.cloudflare.net",
      purpose: "return_path",
      status: "pending",
    });

    const stored = await env.DB.prepare("SELECT dkim_private_key FROM domains WHERE id = ?").bind(domain.id).first<{ dkim_private_key: string }>();
    expect(stored?.dkim_private_key).toMatch(/^v1\./);
    // Encrypted at rest: the key (base64 PKCS#8, "MII…") is not in what is stored. Compared with the key itself: a
    // random ciphertext contains "MII" somewhere about once in 130 keys.
    const key = await decryptDkimKey({ dkimPrivateKey: stored!.dkim_private_key }, env);
    expect(key).toMatch(/^MII/);
    expect(stored?.dkim_private_key).not.toContain(key.slice(0, 32));

    // Every domain gets keys of its own (the suite's other files share one set, test/support/sending.ts).
    const other = await json<Domain>(await call("/api/v1/domains", { key: account.api_key, body: { name: uniqueDomain("records") } }));
    const keysOf = (of: Domain) => of.records.filter((record) => record.purpose.startsWith("dkim")).map((record) => record.value);
    expect(keysOf(other)).toHaveLength(2);
    for (const key of keysOf(other)) expect(keysOf(domain)).not.toContain(key);
  });

  it("stays pending with what was found, and verifies once DKIM and SPF are published (the 255-character TXT strings joined)", async () => {
    const account = await createAccount();
    const created = await json<Domain>(await call("/api/v1/domains", { key: account.api_key, body: { name: uniqueDomain("verify") } }));

    const early = await json<Domain>(await call(`/api/v1/domains/${created.id}/verify`, { key: account.api_key, method: "POST" }));
    expect(early.status).toBe("pending");
    expect(early.records.map((record) => record.status)).toEqual(["not_found", "not_found", "not_found", "not_found", "not_found"]);

    const spf = created.records.find((record) => record.purpose === "spf")!;
    await publish(spf.name, { TXT: ["v=spf1 -all"] });
    const wrongSpf = await json<Domain & { records: { found?: string[] }[] }>(
      await call(`/api/v1/domains/${created.id}/verify`, { key: account.api_key, method: "POST" }),
    );
    expect(wrongSpf.records.find((record) => record.purpose === "spf")).toMatchObject({ status: "failed", found: ["v=spf1 -all"] });

    await publishRecords({ ...created, records: created.records.filter((record) => record.purpose === "dkim" || record.purpose === "spf") });
    const verified = await json<Domain>(await call(`/api/v1/domains/${created.id}/verify`, { key: account.api_key, method: "POST" }));
    expect(verified.status).toBe("verified");
    expect(verified.records.map((record) => [record.purpose, record.status])).toEqual([
      ["dkim", "verified"],
      ["spf", "verified"],
      ["dmarc", "not_found"],
      ["dkim_ed25519", "not_found"],
      ["return_path", "not_found"],
    ]);
    const fetched = await json<Domain>(await call(`/api/v1/domains/${created.id}`, { key: account.api_key }));
    expect(fetched).toMatchObject({ status: "verified", verified_at: expect.any(String) });

    // The operator points the bounce domain at Cloudflare Email Routing: the return-path record is found. A wrong MX is
    // reported as failed; neither changes the domain's verification.
    await publish("bounces.mailforge.test", { MX: [{ priority: 10, exchange: "mx.elsewhere.example" }] });
    const wrongMx = await json<Domain>(await call(`/api/v1/domains/${created.id}/verify`, { key: account.api_key, method: "POST" }));
    expect(wrongMx).toMatchObject({ status: "verified" });
    expect(wrongMx.records.find((record) => record.purpose === "return_path")).toMatchObject({ status: "failed", found: ["mx.elsewhere.example"] });
    await publish("bounces.mailforge.test", {
      MX: [
        { priority: 38, exchange: "route1.mx.cloudflare.net" },
        { priority: 12, exchange: "route2.mx.cloudflare.net" },
      ],
    });
    const routed = await json<Domain>(await call(`/api/v1/domains/${created.id}/verify`, { key: account.api_key, method: "POST" }));
    expect(routed.records.find((record) => record.purpose === "return_path")?.status).toBe("verified");
    await unpublish("bounces.mailforge.test");
  });

  it("refuses invalid names, duplicates, and other accounts' domains", async () => {
    const account = await createAccount();
    for (const name of ["localhost", "not a domain", "a@b.com", "http://x.com/", "-bad.com", "1.2.3.4", ""]) {
      const response = await call("/api/v1/domains", { key: account.api_key, body: { name } });
      expect(response.status, name).toBe(422);
      expect((await json<{ errors: Record<string, string[]> }>(response)).errors).toHaveProperty("name");
    }
    const name = uniqueDomain("dup");
    expect((await call("/api/v1/domains", { key: account.api_key, body: { name } })).status).toBe(201);
    const duplicate = await call("/api/v1/domains", { key: account.api_key, body: { name } });
    expect(duplicate.status).toBe(409);
    expect((await json(duplicate)).message).toContain(name);

    const created = await json<Domain>(await call("/api/v1/domains", { key: account.api_key, body: { name: uniqueDomain("mine") } }));
    const other = await createAccount();
    expect((await call(`/api/v1/domains/${created.id}`, { key: other.api_key })).status).toBe(404);
    expect((await call(`/api/v1/domains/${created.id}/verify`, { key: other.api_key, method: "POST" })).status).toBe(404);
    const list = await json<{ data: Domain[] }>(await call("/api/v1/domains", { key: other.api_key }));
    expect(list.data).toEqual([]);
  });

  it("needs the domains scope", async () => {
    const account = await createAccount();
    const sendOnly = await json<{ key: string }>(await call("/api/v1/api-keys", { key: account.api_key, body: { name: "s", scopes: ["send"] } }));
    expect((await call("/api/v1/domains", { key: sendOnly.key })).status).toBe(403);
  });

  it("the cron flags a verified domain whose records disappeared", async () => {
    const account = await createAccount();
    const domain = await verifiedDomain(account.api_key);
    await unpublish(domain.records.find((record) => record.purpose === "dkim")!.name);
    // The cron re-checks the 50 domains checked longest ago. This file shares its runtime with the other cron files
    // (all run first in their runtime), whose domains may be older: they count as checked just now, so this one is due first.
    await env.DB.prepare("UPDATE domains SET last_checked_at = ? WHERE id != ?").bind(new Date().toISOString(), domain.id).run();
    await env.DB.prepare("UPDATE domains SET last_checked_at = NULL WHERE id = ?").bind(domain.id).run();
    const ctx = createExecutionContext();
    await worker.scheduled(createScheduledController({ cron: "*/15 * * * *" }), env, ctx);
    await waitOnExecutionContext(ctx);
    const after = await json<Domain>(await call(`/api/v1/domains/${domain.id}`, { key: account.api_key }));
    expect(after.status).toBe("failed");
    expect(after.records.find((record) => record.purpose === "dkim")?.status).toBe("not_found");
  });
});
