import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createDnsCache, createResolver } from "../../src/domain/dns/doh";
import { checkWebhookUrl, isPublicAddress } from "../../src/domain/webhooks/url-policy";
import { config } from "../../src/config";

// The Workers test environment sets ALLOW_PRIVATE_WEBHOOK_URLS=true (the receiver is on loopback), so the SSRF
// rules are exercised by calling the policy with allowPrivate: false, against the dev DoH server's zone.

const strict = () => ({ allowPrivate: false, resolver: createResolver({ url: config(env).dohUrl, cache: createDnsCache() }) });

/** A name of our own in the DoH zone, published through the DoH server's admin endpoint. */
async function publish(records: { A?: string[]; AAAA?: string[] }): Promise<string> {
  const name = `hook-${crypto.randomUUID().slice(0, 8)}.webhooks-test`;
  const response = await fetch(`${env.TEST_DOH_ADMIN_URL}/zone/${name}`, { method: "PUT", body: JSON.stringify(records) });
  expect(response.status).toBe(200);
  return name;
}

describe("webhook URL policy (SSRF)", () => {
  it.each([
    ["https://127.0.0.1/hook", "loopback"],
    ["https://127.1/hook", "loopback, short form"],
    ["https://2130706433/hook", "loopback, as one number"],
    ["https://10.1.2.3/hook", "private 10/8"],
    ["https://172.16.0.1/hook", "private 172.16/12"],
    ["https://192.168.1.1/hook", "private 192.168/16"],
    ["https://169.254.169.254/latest/meta-data", "link-local (cloud metadata)"],
    ["https://100.64.0.1/hook", "CGNAT"],
    ["https://0.0.0.0/hook", "this network"],
    ["https://[::1]/hook", "IPv6 loopback"],
    ["https://[fc00::1]/hook", "unique-local"],
    ["https://[fd12:3456::1]/hook", "unique-local fd"],
    ["https://[fe80::1]/hook", "IPv6 link-local"],
    ["https://[::ffff:10.0.0.1]/hook", "IPv4-mapped private"],
    ["https://[::ffff:127.0.0.1]/hook", "IPv4-mapped loopback"],
    ["https://[64:ff9b::a00:1]/hook", "NAT64 of a private address"],
  ])("refuses %s (%s)", async (url) => {
    const check = await checkWebhookUrl(url, strict());
    expect(check).toMatchObject({ ok: false, reason: expect.stringContaining("non-public address") });
  });

  it("refuses public IP literals too: a hostname is required", async () => {
    expect(await checkWebhookUrl("https://93.184.215.14/hook", strict())).toEqual({
      ok: false,
      reason: "IP addresses are not accepted; use a host name",
    });
    expect(await checkWebhookUrl("https://[2606:4700::6810:84e5]/hook", strict())).toMatchObject({ ok: false });
  });

  it("refuses http, other schemes, localhost and junk", async () => {
    expect(await checkWebhookUrl("http://hooks.example.com/x", strict())).toEqual({ ok: false, reason: "The URL must use https" });
    expect(await checkWebhookUrl("ftp://hooks.example.com/x", strict())).toMatchObject({ ok: false });
    expect(await checkWebhookUrl("https://localhost/x", strict())).toMatchObject({ ok: false, reason: expect.stringContaining("loopback") });
    expect(await checkWebhookUrl("https://api.localhost/x", strict())).toMatchObject({ ok: false });
    expect(await checkWebhookUrl("not a url", strict())).toEqual({ ok: false, reason: "Not a valid URL" });
  });

  it("refuses a hostname that resolves to 10.0.0.5", async () => {
    const name = await publish({ A: ["10.0.0.5"] });
    expect(await checkWebhookUrl(`https://${name}/hook`, strict())).toEqual({
      ok: false,
      reason: `${name} resolves to 10.0.0.5, a private, loopback or otherwise non-public address`,
    });
  });

  it("refuses a hostname with one public and one private address, and one with a private AAAA", async () => {
    const mixed = await publish({ A: ["93.184.215.14", "127.0.0.1"] });
    expect(await checkWebhookUrl(`https://${mixed}/`, strict())).toMatchObject({ ok: false, reason: expect.stringContaining("127.0.0.1") });
    const v6 = await publish({ AAAA: ["fd00::5"] });
    expect(await checkWebhookUrl(`https://${v6}/`, strict())).toMatchObject({ ok: false, reason: expect.stringContaining("fd00::5") });
  });

  it("refuses a hostname that does not resolve", async () => {
    const check = await checkWebhookUrl(`https://missing-${crypto.randomUUID().slice(0, 8)}.webhooks-test/`, strict());
    expect(check).toMatchObject({ ok: false, reason: expect.stringContaining("does not resolve") });
  });

  it("accepts an https hostname that resolves to public addresses, and normalises the URL", async () => {
    const name = await publish({ A: ["93.184.215.14"], AAAA: ["2606:2800:21f:cb07:6820:80da:af6b:8b2c"] });
    expect(await checkWebhookUrl(`https://${name.toUpperCase()}/Hooks?a=1`, strict())).toEqual({ ok: true, url: `https://${name}/Hooks?a=1` });
  });

  it("with ALLOW_PRIVATE_WEBHOOK_URLS accepts http and loopback (local development)", async () => {
    expect(await checkWebhookUrl("http://127.0.0.1:8080/hook", { allowPrivate: true })).toEqual({ ok: true, url: "http://127.0.0.1:8080/hook" });
    expect(await checkWebhookUrl("ftp://127.0.0.1/hook", { allowPrivate: true })).toMatchObject({ ok: false });
  });

  it("classifies addresses", () => {
    for (const address of ["93.184.215.14", "8.8.8.8", "2606:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8"]) {
      expect(isPublicAddress(address), address).toBe(true);
    }
    for (const address of [
      "10.0.0.5",
      "172.31.255.255",
      "100.127.0.1",
      "198.18.0.1",
      "224.0.0.1",
      "255.255.255.255",
      "::",
      "::1",
      "fe80::1",
      "ff02::1",
      "2001:db8::1",
      "garbage",
      "1.2.3",
      "1::2::3",
    ]) {
      expect(isPublicAddress(address), address).toBe(false);
    }
  });
});
