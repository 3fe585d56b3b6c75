import { describe, expect, it } from "vitest";
import { isScanner, machineOpenReason } from "../../src/domain/tracking/machine";
import { trackHtml, trackableUrl } from "../../src/domain/tracking/rewrite";
import { clickToken, openToken, readClickToken, readOpenToken } from "../../src/domain/tracking/tokens";

const iphoneMail = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148";
const gmailProxy = "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)";
const sentAt = "2025-03-01T10:00:00.000Z";
const later = new Date("2025-03-01T10:05:00.000Z");

describe("machine opens", () => {
  it.each([
    ["Apple MPP's bare User-Agent", { userAgent: "Mozilla/5.0", ip: "203.0.113.9" }, "apple_mpp"],
    ["Apple's 17.0.0.0/8 network", { userAgent: iphoneMail, ip: "17.58.101.4" }, "apple_mpp"],
    ["Apple's network, IPv4-mapped", { userAgent: iphoneMail, ip: "::ffff:17.1.2.3" }, "apple_mpp"],
    ["no User-Agent", { userAgent: null, ip: "198.51.100.1" }, "scanner"],
    ["an empty User-Agent", { userAgent: "  ", ip: "198.51.100.1" }, "scanner"],
    ["curl", { userAgent: "curl/8.5.0", ip: "198.51.100.1" }, "scanner"],
    ["python-requests", { userAgent: "python-requests/2.31.0", ip: null }, "scanner"],
    ["Go's HTTP client", { userAgent: "Go-http-client/1.1", ip: null }, "scanner"],
    ["a crawler", { userAgent: "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", ip: null }, "scanner"],
    ["Barracuda", { userAgent: "Barracuda Sentinel (EE)", ip: null }, "scanner"],
    ["Mimecast", { userAgent: "Mozilla/5.0 Mimecast-URL-Protect", ip: null }, "scanner"],
    ["Proofpoint", { userAgent: "Proofpoint URL Defense", ip: null }, "scanner"],
  ] as const)("%s is a machine", (_name, client, reason) => {
    expect(machineOpenReason(client, sentAt, later)).toBe(reason);
  });

  it("an open within 10 seconds of sending is a prefetch, from then on a person's", () => {
    const client = { userAgent: iphoneMail, ip: "198.51.100.7" };
    expect(machineOpenReason(client, sentAt, new Date("2025-03-01T10:00:09.999Z"))).toBe("prefetch");
    expect(machineOpenReason(client, sentAt, new Date("2025-03-01T10:00:10.000Z"))).toBeUndefined();
    expect(machineOpenReason(client, null, new Date())).toBeUndefined();
  });

  it.each([
    ["Apple Mail on an iPhone", { userAgent: iphoneMail, ip: "198.51.100.7" }],
    ["Gmail's image proxy (fetches when the reader opens)", { userAgent: gmailProxy, ip: "66.249.84.1" }],
    ["an address that only starts like Apple's", { userAgent: iphoneMail, ip: "170.1.2.3" }],
    ["Mozilla/5.0 followed by other tokens", { userAgent: "Mozilla/5.0 (Macintosh)", ip: null }],
  ])("%s is a person", (_name, client) => {
    expect(machineOpenReason(client, sentAt, later)).toBeUndefined();
    expect(isScanner(client)).toBe(false);
  });
});

const config = { encryptionKey: "test-key-for-tracking", siteUrl: "https://mail.example.com" };

describe("tracking tokens", () => {
  it("read back what was signed, and nothing else", async () => {
    const target = { messageId: "msg_a", recipient: "ann@example.net", url: "https://shop.example/p?id=1&x=é", tag: "1" };
    const click = await clickToken(config, target);
    expect(await readClickToken(config, click)).toEqual(target);
    const open = await openToken(config, { messageId: "msg_a", recipient: null, tag: "" });
    expect(await readOpenToken(config, open)).toEqual({ messageId: "msg_a", recipient: null, tag: "" });
    // A token of one kind is not one of the other.
    expect(await readOpenToken(config, click)).toBeUndefined();
    expect(await readClickToken(config, open)).toBeUndefined();
    // Another deployment's key, an edited payload, an edited signature, garbage: all unreadable.
    expect(await readClickToken({ encryptionKey: "other" }, click)).toBeUndefined();
    const [payload, signature] = click.split(".") as [string, string];
    const forged = btoa(JSON.stringify(["c", "msg_a", "ann@example.net", "https://evil.example/", "1"])).replace(/=+$/, "");
    expect(await readClickToken(config, `${forged}.${signature}`)).toBeUndefined();
    expect(await readClickToken(config, `${payload}.${signature.slice(0, -1)}${signature.endsWith("A") ? "B" : "A"}`)).toBeUndefined();
    expect(await readClickToken(config, `${payload}.${signature}.x`)).toBeUndefined();
    expect(await readClickToken(config, "not-a-token")).toBeUndefined();
    expect(await readClickToken(config, "x".repeat(10_000))).toBeUndefined();
  });
});

describe("the tracked HTML", () => {
  const tracking = { messageId: "msg_html", recipient: "ann@example.net", tag: "0", opens: true, clicks: true };

  it("rewrites http(s) links to signed redirects of the exact URL and adds the pixel before </body>; leaves everything else byte for byte", async () => {
    const html =
      '<!doctype html><html><body><p>Grüße — <a href="https://shop.example/p?a=1&amp;b=2" class="cta">Buy</a> ' +
      '<a href="mailto:help@example.com">Mail</a> <a href="tel:+15551234">Call</a> <a href="#top">Top</a> ' +
      '<a href="https://mail.example.com/u/tok.sig">Unsubscribe</a> <a href=" HTTP://Example.org/Path ">Up</a></p></body></html>';
    const out = await trackHtml(config, html, tracking);
    const links = [...out.matchAll(/href="([^"]*)"/g)].map((match) => match[1]!);
    expect(links.slice(1, 5)).toEqual(["mailto:help@example.com", "tel:+15551234", "#top", "https://mail.example.com/u/tok.sig"]);
    const tracked = [links[0]!, links[5]!];
    const targets = await Promise.all(
      tracked.map((link) => {
        expect(link).toMatch(/^https:\/\/mail\.example\.com\/t\/c\/[\w-]+\.[\w-]+$/);
        return readClickToken(config, link.slice("https://mail.example.com/t/c/".length));
      }),
    );
    expect(targets).toEqual([
      { messageId: "msg_html", recipient: "ann@example.net", url: "https://shop.example/p?a=1&b=2", tag: "0" },
      { messageId: "msg_html", recipient: "ann@example.net", url: "http://example.org/Path", tag: "0" },
    ]);
    expect(out).toContain('class="cta">Buy</a>');
    expect(out).toContain("<p>Grüße — ");
    expect(out).toMatch(/<img src="https:\/\/mail\.example\.com\/t\/o\/[\w-]+\.[\w-]+" width="1" height="1" alt=""[^>]*><\/body><\/html>$/);
  });

  it("puts the pixel at the end of a fragment, and only what is asked for", async () => {
    const fragment = '<p>Hi <a href="https://example.org/">there</a></p>';
    const both = await trackHtml(config, fragment, tracking);
    expect(both).toMatch(/^<p>Hi <a href="https:\/\/mail\.example\.com\/t\/c\/[^"]+">there<\/a><\/p><img src="https:\/\/mail\.example\.com\/t\/o\//);
    const opensOnly = await trackHtml(config, fragment, { ...tracking, clicks: false });
    expect(opensOnly.startsWith(fragment)).toBe(true);
    expect(opensOnly).toContain("/t/o/");
    const clicksOnly = await trackHtml(config, fragment, { ...tracking, opens: false });
    expect(clicksOnly).not.toContain("/t/o/");
    expect(clicksOnly).toContain("/t/c/");
    expect(await trackHtml(config, fragment, { ...tracking, opens: false, clicks: false })).toBe(fragment);
  });

  it.each([
    ["javascript:alert(1)", undefined],
    ["ftp://files.example/x", undefined],
    ["/relative/path", undefined],
    ["https://mail.example.com/t/c/already.tracked", undefined],
    ["https://mail.example.com/pricing", "https://mail.example.com/pricing"],
    ["https://example.org/a b", "https://example.org/a%20b"],
  ])("%s → %s", (href, expected) => {
    expect(trackableUrl(href, config.siteUrl)).toBe(expected);
  });
});
