import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BRIDGE_SIGNATURE_HEADER,
  PROBE_MAX_BODY_BYTES,
  PROBE_PATH,
  ProbeRequest,
  ProbeResponse,
  signBridgeRequest,
  type ProbeAddressResult,
} from "@mailforge/bridge-contract";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createDohServer, type DohServer } from "../../scripts/dev/doh-server.ts";
import { createMxHosts, DEV_MX_BEHAVIOURS, DEV_MX_ZONE, type MxHosts } from "../../scripts/dev/mx-hosts.ts";
import { loadProberConfig, ProberConfigError } from "../src/prober/config.ts";
import { classifyRcptReply, retryDelayMs } from "../src/prober/probe.ts";
import { createProberServer, type ProberServer } from "../src/prober/server.ts";
import { createMemoryLogger } from "../src/log.ts";

// The prober against MX hosts it did not write: smtp-server instances on loopback addresses (scripts/dev/mx-hosts.ts)
// with real behaviours, routed by the dev DoH server, asked through signed HTTP as the Worker asks.

const SECRET = "prober-test-secret-0123456789";

// Beyond the dev stack's hosts: a greylisting server whose delay outlasts a single check, and a host for bulk runs.
const behaviours = {
  ...DEV_MX_BEHAVIOURS,
  "127.0.0.8": { greylistMs: 120_000, mailboxes: { slow: "ok" as const } },
  "127.0.0.9": { greetingDelayMs: 50, mailboxes: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`user${i}`, "ok" as const])) },
  "127.0.0.10": { deferMailFrom: true },
  // slow: every RCPT is answered after 3 s, so a bulk connection holds its slot for a long time
  "127.0.0.11": {
    rcptDelayMs: 3_000,
    mailboxes: { bea: "ok" as const, ...Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`user${i}`, "ok" as const])) },
  },
  "127.0.0.12": { rcptDelayMs: 300, mailboxes: { ann: "ok" as const, bo: "ok" as const, cy: "ok" as const } },
  "127.0.0.13": { greeting: "refuse" as const },
};
// 30 MX names on one address, and 7 names on 7 addresses where nothing listens
const manyNames = (domain: string, address: (i: number) => string, count: number) => ({
  [domain]: { MX: Array.from({ length: count }, (_, i) => ({ priority: i, exchange: `mx${i}.${domain}` })) },
  ...Object.fromEntries(Array.from({ length: count }, (_, i) => [`mx${i}.${domain}`, { A: [address(i)] }])),
});
const zone = {
  ...DEV_MX_ZONE,
  "mx.slowgrey.mailbox.test": { A: ["127.0.0.8"] },
  "slowgrey.mailbox.test": { MX: [{ priority: 10, exchange: "mx.slowgrey.mailbox.test" }] },
  "mx.bulk.mailbox.test": { A: ["127.0.0.9"] },
  "mx.deferring.mailbox.test": { A: ["127.0.0.10"] },
  // its preferred MX defers MAIL FROM; the second accepts anyone
  "deferfrom.mailbox.test": {
    MX: [
      { priority: 5, exchange: "mx.deferring.mailbox.test" },
      { priority: 20, exchange: "mx.catchall.mailbox.test" },
    ],
  },
  "mx.slow.mailbox.test": { A: ["127.0.0.11"] },
  "mx.fair.mailbox.test": { A: ["127.0.0.12"] },
  ...Object.fromEntries(
    ["slowa", "slowb", "fair1", "fair2", "fair3", "fairc"].map((name) => [
      `${name}.mailbox.test`,
      { MX: [{ priority: 10, exchange: name.startsWith("slow") ? "mx.slow.mailbox.test" : "mx.fair.mailbox.test" }] },
    ]),
  ),
  // another domain's name for the server of mailbox.test
  "alias.mailbox.test": { MX: [{ priority: 10, exchange: "mx.alias.mailbox.test" }] },
  "mx.alias.mailbox.test": { A: ["127.0.0.2"] },
  ...manyNames("many.mailbox.test", () => "127.0.0.13", 30),
  ...manyNames("wide.mailbox.test", (i) => `127.0.0.${40 + i}`, 7),
  // three domains on one MX host: their addresses share its connections
  ...Object.fromEntries(
    ["bulk1", "bulk2", "bulk3"].map((name) => [`${name}.mailbox.test`, { MX: [{ priority: 10, exchange: "mx.bulk.mailbox.test" }] }]),
  ),
};

let dir: string;
let doh: DohServer;
let mx: MxHosts;
let smtpPort: number;
let proberUrl: string;
let strictUrl: string;
const probers: ProberServer[] = [];

async function startProber(env: Record<string, string>): Promise<string> {
  const config = loadProberConfig({
    PROBER_PORT: "0",
    PROBER_SECRET: SECRET,
    PROBE_HELO_NAME: "probe.mailforge.test",
    PROBE_MAIL_FROM: "probe@mailforge.test",
    DOH_URL: `http://127.0.0.1:${dohPort}/dns-query`,
    PROBE_SMTP_PORT: String(smtpPort),
    PROBE_HOST_CONNECT_GAP_MS: "0",
    ...env,
  });
  const prober = createProberServer(config, { logger: createMemoryLogger() });
  probers.push(prober);
  return `http://127.0.0.1:${await prober.listen()}`;
}

let dohPort: number;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "prober-test-"));
  const zonePath = join(dir, "zone.json");
  await writeFile(zonePath, JSON.stringify(zone));
  doh = createDohServer({ zonePath });
  dohPort = await doh.listen(0, "127.0.0.1");
  mx = createMxHosts(behaviours);
  smtpPort = await mx.listen(0);
  proberUrl = await startProber({ PROBE_ALLOW_PRIVATE: "1" });
  strictUrl = await startProber({});
});

afterAll(async () => {
  await Promise.all(probers.map((prober) => prober.close()));
  await mx?.close();
  await doh?.close();
  await rm(dir, { recursive: true, force: true });
});

beforeEach(() => mx.resetStats());

/** `caller`: the request's kind and account, as the Worker sends them; without it, an older Worker's request. */
async function probe(url: string, addresses: string[], budgetMs = 7_000, caller: Pick<ProbeRequest, "kind" | "account_id"> = {}) {
  const body = JSON.stringify({ addresses, budget_ms: budgetMs, ...caller });
  const response = await fetch(`${url}${PROBE_PATH}`, {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      [BRIDGE_SIGNATURE_HEADER]: await signBridgeRequest(SECRET, { method: "POST", path: PROBE_PATH, body }),
    },
    body,
  });
  expect(response.status).toBe(200);
  return ProbeResponse.parse(await response.json());
}

const byAddress = (results: ProbeAddressResult[]) => Object.fromEntries(results.map((r) => [r.address, r]));
const host = (address: string) => mx.hosts.get(address)!.stats;
const allHosts = () => [...mx.hosts.values()].map((h) => h.stats);

describe("the reply table", () => {
  it("tells known, unknown, disabled and full mailboxes apart on one connection, and never sends DATA", async () => {
    const { results, connections } = await probe(proberUrl, [
      "alice@mailbox.test",
      "nobody@mailbox.test",
      "carol@mailbox.test",
      "dave@mailbox.test",
      "erin@mailbox.test",
    ]);
    const r = byAddress(results);
    expect(r["alice@mailbox.test"]).toMatchObject({
      outcome: "accepted",
      mx_host: "mx.mailbox.test",
      catch_all: false,
      reply: expect.stringMatching(/^250/),
    });
    expect(r["nobody@mailbox.test"]).toMatchObject({ outcome: "mailbox_not_found", reply: "550 5.1.1 No such user here" });
    expect(r["carol@mailbox.test"]).toMatchObject({ outcome: "mailbox_disabled", reply: expect.stringContaining("5.2.1") });
    expect(r["dave@mailbox.test"]).toMatchObject({ outcome: "mailbox_full", reply: "452 4.2.2 Mailbox full" });
    expect(r["erin@mailbox.test"]).toMatchObject({ outcome: "mailbox_full", reply: expect.stringContaining("552 5.2.2") });
    expect(connections).toEqual({ "mx.mailbox.test": 1 });
    // five addresses and the random catch-all probe, all on one connection
    await vi.waitFor(() => expect(host("127.0.0.2").rcptsPerConnection).toEqual([6]));
    expect(host("127.0.0.2").dataCommands).toBe(0);
  });

  it("reports a catch-all domain: the random local part was accepted too", async () => {
    const { results } = await probe(proberUrl, ["anyone@catchall.mailbox.test"]);
    expect(results[0]).toMatchObject({ outcome: "accepted", catch_all: true });
    // cached for a day: the next request asks no random local part
    await probe(proberUrl, ["someone@catchall.mailbox.test"]);
    await vi.waitFor(() => expect(host("127.0.0.3").rcptsPerConnection).toEqual([2, 1]));
  });

  it("waits out greylisting when the server's delay fits the budget, and says it was greylisted", async () => {
    const started = Date.now();
    const { results, connections } = await probe(proberUrl, ["grace@greylist.mailbox.test"]);
    expect(results[0]).toMatchObject({ outcome: "accepted", greylisted: true, reply: expect.stringMatching(/^250/) });
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
    expect(connections["mx.greylist.mailbox.test"]).toBe(2);
  });

  it("reports greylisted when the server's delay does not fit the budget", async () => {
    const { results } = await probe(proberUrl, ["slow@slowgrey.mailbox.test"], 3_000);
    expect(results[0]).toMatchObject({ outcome: "greylisted", greylisted: true, reply: "450 4.7.1 Greylisted, try again in 120 seconds" });
  });

  it("answers within the budget against a tarpit that never greets", async () => {
    const started = Date.now();
    const { results, elapsed_ms } = await probe(proberUrl, ["jane@tarpit.mailbox.test"], 2_000);
    const took = Date.now() - started;
    expect(results[0]).toMatchObject({ outcome: "unavailable", detail: "timeout", reply: null, mx_host: "mx.tarpit.mailbox.test" });
    expect(elapsed_ms).toBeLessThan(2_500);
    expect(took).toBeLessThan(3_500);
    expect(host("127.0.0.5").connections).toBe(1);
  });

  it("reports 421 as unavailable, and falls back to the next MX host after one", async () => {
    const busy = await probe(proberUrl, ["jane@busy.mailbox.test"]);
    expect(busy.results[0]).toMatchObject({ outcome: "unavailable", detail: "service_unavailable", reply: expect.stringMatching(/^421/) });
    const fallback = await probe(proberUrl, ["alice@fallback.mailbox.test", "zed@fallback.mailbox.test"]);
    const r = byAddress(fallback.results);
    expect(r["alice@fallback.mailbox.test"]).toMatchObject({ outcome: "accepted", mx_host: "mx.mailbox.test" });
    expect(r["zed@fallback.mailbox.test"]).toMatchObject({ outcome: "mailbox_not_found", mx_host: "mx.mailbox.test" });
    expect(fallback.connections).toEqual({ "mx.busy.mailbox.test": 1, "mx.mailbox.test": 1 });
  });

  it("after a host that defers MAIL FROM, asks the next one, catch-all probe included", async () => {
    const { results, connections } = await probe(proberUrl, ["jane@deferfrom.mailbox.test"]);
    expect(results[0]).toMatchObject({ outcome: "accepted", catch_all: true, mx_host: "mx.catchall.mailbox.test" });
    expect(connections).toEqual({ "mx.deferring.mailbox.test": 1, "mx.catchall.mailbox.test": 1 });
    await vi.waitFor(() => expect(host("127.0.0.10").rcptsPerConnection).toEqual([0]));
  });

  it("reports a 5.7.x refusal of the probe itself as policy_refused, not a missing mailbox", async () => {
    const { results } = await probe(proberUrl, ["jane@blocking.mailbox.test"]);
    expect(results[0]).toMatchObject({ outcome: "policy_refused", reply: expect.stringContaining("5.7.1") });
  });

  it("reports a refused connection as unavailable", async () => {
    await writeFile(
      join(dir, "zone.json"),
      JSON.stringify({
        ...zone,
        "closed.mailbox.test": { MX: [{ priority: 1, exchange: "mx.closed.mailbox.test" }] },
        "mx.closed.mailbox.test": { A: ["127.0.0.30"] },
      }),
    );
    const { results } = await probe(proberUrl, ["jane@closed.mailbox.test"]);
    expect(results[0]).toMatchObject({ outcome: "unavailable", detail: "connection_refused", mx_host: "mx.closed.mailbox.test" });
  });
});

describe("bulk", () => {
  it("keeps at most 2 connections per MX host and carries many RCPTs on each", async () => {
    const addresses = Array.from({ length: 300 }, (_, i) => `user${i}@bulk${(i % 3) + 1}.mailbox.test`);
    const prober = await startProber({ PROBE_ALLOW_PRIVATE: "1", PROBE_RCPTS_PER_CONNECTION: "40", PROBE_RCPTS_PER_TRANSACTION: "10" });
    const { results, connections } = await probe(prober, addresses, 60_000);
    // the host knows user0…user299 whatever the domain
    expect(results.every((r) => r.outcome === "accepted")).toBe(true);
    const stats = host("127.0.0.9");
    expect(stats.maxConcurrent).toBeLessThanOrEqual(2);
    expect(stats.maxConcurrent).toBe(2);
    // 300 addresses + 3 random local parts, at most 40 per connection: 8 connections, or 9 when the last two share
    // the rest
    // Every connection the prober opened has closed (so none reaches the next test); one opened as the work ran out
    // may have carried no RCPT.
    await vi.waitFor(() => expect(stats.rcptsPerConnection).toHaveLength(connections["mx.bulk.mailbox.test"]!), { timeout: 10_000 });
    expect(stats.rcptsPerConnection.reduce((a, b) => a + b, 0)).toBe(303);
    expect(stats.rcptsPerConnection.length).toBeLessThanOrEqual(9);
    expect(Math.max(...stats.rcptsPerConnection)).toBe(40);
    // RSET between transactions of 10: one MAIL FROM per transaction
    expect(stats.mailFroms).toBe(stats.rcptsPerConnection.reduce((sum, n) => sum + Math.ceil(n / 10), 0));
    expect(allHosts().every((s) => s.dataCommands === 0)).toBe(true);
  });
});

describe("sharing MX hosts between accounts", () => {
  it("answers another account's single check within 10 s while two bulk jobs hold the host's connections", async () => {
    const bulk = () =>
      probe(
        proberUrl,
        Array.from({ length: 15 }, (_, i) => `user${i}@slowa.mailbox.test`),
        8_000,
        { kind: "bulk", account_id: "acc_a" },
      );
    const jobs = [bulk(), bulk()];
    // both bulk connections are open, each busy for 3 s per RCPT, before the single check comes
    await vi.waitFor(() => expect(host("127.0.0.11").connections).toBe(2), { timeout: 5_000 });
    const started = Date.now();
    const single = await probe(proberUrl, ["bea@slowb.mailbox.test"], 7_000, { kind: "single", account_id: "acc_b" });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(single.results[0]).toMatchObject({ outcome: "accepted", catch_all: false, mx_host: "mx.slow.mailbox.test" });
    // the single check had a connection of its own: the bulk jobs kept theirs
    const done = await Promise.all(jobs);
    expect(host("127.0.0.11").maxConcurrent).toBe(3);
    expect(done.map((job) => job.connections)).toEqual([{ "mx.slow.mailbox.test": 1 }, { "mx.slow.mailbox.test": 1 }]);
  }, 20_000);

  it("gives a host's next free connection to the account that has not had one, not to the account that queued first", async () => {
    const prober = await startProber({ PROBE_ALLOW_PRIVATE: "1", PROBE_CONNECTIONS_PER_HOST: "1" });
    const finished: string[] = [];
    const job = (domain: string, account: string, names = ["ann"]) =>
      probe(
        prober,
        names.map((name) => `${name}@${domain}.mailbox.test`),
        30_000,
        { kind: "bulk", account_id: account },
      ).then(() => finished.push(domain));
    // the first job holds the host's one bulk connection for 4 RCPTs of 300 ms; the others queue behind it
    const first = job("fair1", "acc_a", ["ann", "bo", "cy"]);
    await vi.waitFor(() => expect(host("127.0.0.12").connections).toBe(1));
    const queued = [job("fair2", "acc_a"), job("fair3", "acc_a")];
    await new Promise((resolve) => setTimeout(resolve, 300));
    await Promise.all([first, ...queued, job("fairc", "acc_c")]);
    // fair2 and fair3 are sent together and queue on the host in the order their MX lookups finish, which nothing
    // orders (seen both ways): what is claimed is that acc_c's job comes before acc_a's next ones.
    expect(finished.slice(0, 2)).toEqual(["fair1", "fairc"]);
    expect(finished.slice(2).sort()).toEqual(["fair2", "fair3"]);
    expect(host("127.0.0.12").maxConcurrent).toBe(1);
  });

  it("takes a request without kind or account (an older Worker's) as a bulk chunk", () => {
    expect(ProbeRequest.parse({ addresses: ["a@b.test"], budget_ms: 5_000 })).toEqual({ addresses: ["a@b.test"], budget_ms: 5_000 });
    // a single check asks about one address within a single check's budget, so it cannot hold the slot kept for them
    expect(ProbeRequest.safeParse({ addresses: ["a@b.test", "c@b.test"], budget_ms: 5_000, kind: "single" }).success).toBe(false);
    expect(ProbeRequest.safeParse({ addresses: ["a@b.test"], budget_ms: 60_000, kind: "single" }).success).toBe(false);
  });
});

describe("bounded work per address", () => {
  it("dials an address shared by 30 MX names once, and resolves only the names it may use", async () => {
    doh.resetStats();
    const { results, connections } = await probe(proberUrl, ["jane@many.mailbox.test"]);
    expect(results[0]).toMatchObject({ outcome: "unavailable", detail: "greeting_refused", mx_host: "mx0.many.mailbox.test" });
    expect(results[0]!.reply).toMatch(/^554/);
    expect(host("127.0.0.13").connections).toBeLessThanOrEqual(3);
    expect(host("127.0.0.13").connections).toBe(1);
    expect(connections).toEqual({ "mx0.many.mailbox.test": 1 });
    // the MX query, then A and AAAA of the first 5 names (PROBE_MAX_MX_HOSTS), not of all 30
    expect(doh.stats().queries).toBeLessThanOrEqual(11);
  });

  it("names each address's own MX host when domains share a server", async () => {
    const { results, connections } = await probe(proberUrl, ["alice@mailbox.test", "alice@alias.mailbox.test"]);
    expect(byAddress(results)).toMatchObject({
      "alice@mailbox.test": { outcome: "accepted", mx_host: "mx.mailbox.test" },
      "alice@alias.mailbox.test": { outcome: "accepted", mx_host: "mx.alias.mailbox.test" },
    });
    // one connection asked for both domains
    expect(Object.values(connections)).toEqual([1]);
  });

  it("tries at most 5 MX hosts for an address, and names the last one it tried", async () => {
    const { results, connections } = await probe(proberUrl, ["jane@wide.mailbox.test"]);
    expect(Object.keys(connections)).toEqual([0, 1, 2, 3, 4].map((i) => `mx${i}.wide.mailbox.test`));
    expect(results[0]).toMatchObject({ outcome: "unavailable", detail: "connection_refused", mx_host: "mx4.wide.mailbox.test" });
  });
});

describe("requests whose signature is not checked yet", () => {
  // a current timestamp with a signature nobody made: it passes the header check, so its body is read
  const forgedHeader = () => `t=${Math.floor(Date.now() / 1000)},v2=${"0".repeat(64)}`;
  const rawSocket = (url: string) => connect(Number(new URL(url).port), "127.0.0.1");
  /** A forged request announcing 500 KB that sends 1 KB of it and then nothing. */
  const stalledRequest = (url: string) => {
    const socket = rawSocket(url);
    socket.write(
      `POST ${PROBE_PATH} HTTP/1.1\r\nHost: prober\r\nContent-Type: application/json\r\n${BRIDGE_SIGNATURE_HEADER}: ${forgedHeader()}\r\n` +
        `Content-Length: 500000\r\n\r\n${"x".repeat(1024)}`,
    );
    return socket;
  };
  /** When the prober closed the socket, or Infinity if it had not after `withinMs`, and what it wrote before. */
  const closedWithin = (socket: Socket, withinMs: number) => {
    let written = "";
    socket.on("data", (data: Buffer) => {
      written += data.toString("latin1");
    });
    return Promise.race([
      new Promise<{ at: number; written: string }>((resolve) => socket.once("close", () => resolve({ at: Date.now(), written }))),
      new Promise<{ at: number; written: string }>((resolve) => setTimeout(() => resolve({ at: Number.POSITIVE_INFINITY, written }), withinMs)),
    ]);
  };
  const sockets: Socket[] = [];
  afterAll(() => {
    for (const socket of sockets) socket.destroy();
  });

  it("closes a connection whose body stalls after 1 KB, and one that never sends a request, within 15 s", async () => {
    const url = await startProber({ PROBE_ALLOW_PRIVATE: "1", PROBER_REQUEST_TIMEOUT_MS: "2000" });
    const started = Date.now();
    const stalled = stalledRequest(url);
    const silent = rawSocket(url);
    sockets.push(stalled, silent);
    const [body, idle] = await Promise.all([closedWithin(stalled, 15_000), closedWithin(silent, 15_000)]);
    expect(body.at - started).toBeLessThan(15_000);
    expect(body.written).toMatch(/^HTTP\/1\.1 408/);
    expect(idle.at - started).toBeLessThan(15_000);
  }, 20_000);

  it("refuses requests beyond the cap with 503 and Retry-After instead of reading them, and serves again once they end", async () => {
    const url = await startProber({ PROBE_ALLOW_PRIVATE: "1", PROBER_MAX_UNVERIFIED_REQUESTS: "2" });
    const stalled = [stalledRequest(url), stalledRequest(url)];
    sockets.push(...stalled);
    const body = JSON.stringify({ addresses: ["alice@mailbox.test"], budget_ms: 5_000 });
    const post = async (signature: string) =>
      fetch(`${url}${PROBE_PATH}`, { method: "POST", headers: { [BRIDGE_SIGNATURE_HEADER]: signature }, body });
    // once the two stalled requests hold both places (until then a forged request is read and refused with 401)
    let refused: Response | undefined;
    await vi.waitFor(async () => {
      refused = await post(forgedHeader());
      expect(refused.status).toBe(503);
    });
    expect(refused!.headers.get("retry-after")).toBe("1");
    expect(await refused!.json()).toMatchObject({ code: "prober_busy" });
    // the places are given back when those connections end
    for (const socket of stalled) socket.destroy();
    await vi.waitFor(async () => {
      const answered = await post(await signBridgeRequest(SECRET, { method: "POST", path: PROBE_PATH, body }));
      expect(answered.status).toBe(200);
    });
  });
});

describe("safety", () => {
  it("refuses MX hosts on private or loopback addresses without PROBE_ALLOW_PRIVATE", async () => {
    const { results } = await probe(strictUrl, ["alice@mailbox.test", "anyone@catchall.mailbox.test"]);
    expect(results.map((r) => r.outcome)).toEqual(["private_address", "private_address"]);
    expect(allHosts().every((s) => s.connections === 0)).toBe(true);
  });

  it("refuses unsigned, badly signed, stale and oversized requests", async () => {
    const body = JSON.stringify({ addresses: ["alice@mailbox.test"], budget_ms: 5_000 });
    const post = (headers: Record<string, string>, payload = body) =>
      fetch(`${proberUrl}${PROBE_PATH}`, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: payload });
    const unsigned = await post({});
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toMatchObject({ code: "bridge_signature_refused" });
    const wrongKey = await signBridgeRequest("another-secret-0123456789", { method: "POST", path: PROBE_PATH, body });
    expect((await post({ [BRIDGE_SIGNATURE_HEADER]: wrongKey })).status).toBe(401);
    const stale = await signBridgeRequest(SECRET, { method: "POST", path: PROBE_PATH, body }, Math.floor(Date.now() / 1000) - 600);
    expect((await post({ [BRIDGE_SIGNATURE_HEADER]: stale })).status).toBe(401);
    const otherBody = await signBridgeRequest(SECRET, { method: "POST", path: PROBE_PATH, body: body.replace("alice", "bob") });
    expect((await post({ [BRIDGE_SIGNATURE_HEADER]: otherBody })).status).toBe(401);
    const big = JSON.stringify({ addresses: ["a@b.test"], budget_ms: 5_000, pad: "x".repeat(PROBE_MAX_BODY_BYTES) });
    const bigSigned = await signBridgeRequest(SECRET, { method: "POST", path: PROBE_PATH, body: big });
    const tooLarge = await post({ [BRIDGE_SIGNATURE_HEADER]: bigSigned }, big);
    expect(tooLarge.status).toBe(413);
    expect(await tooLarge.json()).toMatchObject({ code: "payload_too_large" });
    const invalid = JSON.stringify({ addresses: [], budget_ms: 5_000 });
    const invalidResponse = await post(
      { [BRIDGE_SIGNATURE_HEADER]: await signBridgeRequest(SECRET, { method: "POST", path: PROBE_PATH, body: invalid }) },
      invalid,
    );
    expect(invalidResponse.status).toBe(422);
    expect(await invalidResponse.json()).toMatchObject({ code: "validation_error", errors: { addresses: [expect.any(String)] } });
    expect(allHosts().every((s) => s.connections === 0)).toBe(true);
  });
});

describe("configuration and reply parsing", () => {
  it("dials port 25, refuses private addresses and keeps to 2 connections per host unless told otherwise", () => {
    expect(loadProberConfig({ PROBER_SECRET: SECRET, PROBE_HELO_NAME: "probe.example.com" })).toMatchObject({
      port: 2580,
      smtpPort: 25,
      allowPrivate: false,
      connectionsPerHost: 2,
      mailFrom: "postmaster@probe.example.com",
      dohUrl: "https://cloudflare-dns.com/dns-query",
      maxUnverifiedRequests: 32,
      requestTimeoutMs: 5_000,
      maxMxHosts: 5,
      singleConnectionsPerHost: 1,
    });
    expect(() => loadProberConfig({ PROBER_SECRET: "short", PROBE_CONNECTIONS_PER_HOST: "3", PROBE_MAIL_FROM: "nobody" })).toThrow(ProberConfigError);
    expect(() => loadProberConfig({})).toThrow(/PROBER_SECRET/);
  });

  it("reads replies without an enhanced code and the delay a deferral names", () => {
    const reply = (text: string) => ({ code: Number(text.slice(0, 3)), enhanced: /^\d{3} ([245]\.\d+\.\d+)/.exec(text)?.[1] ?? null, text });
    expect(classifyRcptReply(reply("550 Requested action not taken: mailbox unavailable"))).toBe("mailbox_not_found");
    expect(classifyRcptReply(reply("554 5.0.0 Transaction failed"))).toBe("rejected");
    expect(classifyRcptReply(reply("452 4.5.3 Too many recipients"))).toBe("too_many");
    expect(classifyRcptReply(reply("451 4.3.0 Temporary lookup failure"))).toBe("temporary");
    expect(retryDelayMs(reply("450 4.7.1 Greylisted, try again in 5 minutes"), 60_000)).toBe(300_000);
    expect(retryDelayMs(reply("451 4.7.1 Please retry later"), 60_000)).toBe(60_000);
  });
});
