import { randomBytes } from "node:crypto";
import pLimit from "p-limit";
import type { ProbeAddressResult, ProbeKind, ProbeOutcome, ProbeRequest, ProbeResponse } from "@mailforge/bridge-contract";
import type { ProberConfig } from "./config.ts";
import { isPrivateAddress, type Resolver } from "./dns.ts";
import { SmtpConnectionError, SmtpProbeConnection, type SmtpReply } from "./smtp.ts";

// One probe request: addresses grouped by domain, domains queued on the MX host they route to (so domains that
// share a host share its connections), at most `connectionsPerHost` connections per host at once across every
// request, plus `singleConnectionsPerHost` kept for single checks (HostGate), each carrying many RCPTs (RSET between
// transactions), never DATA. A connection failure or a 421 moves the host's queued domains to their next MX; a
// temporary refusal is tried again after the server's delay when that still fits the request's budget. A domain's MX hosts are at most `maxMxHosts` (the resolver's cut) and
// each address is dialled once however many names point at it. When the budget runs out, every open connection is
// closed and what is not known is reported as such.

const CATCH_ALL_TTL_MS = 24 * 60 * 60_000;
const MAX_BACKOFF_MS = 60_000;
const DNS_CONCURRENCY = 20;

/** Who a connection is for: single checks have slots of their own, and accounts take turns at the rest. */
export interface Claim {
  kind: ProbeKind;
  /** The account, or "" when the request did not say. */
  account: string;
}

interface Waiter {
  claim: Claim;
  grant: () => void;
}

interface HostState {
  /** Connections open or being opened, and how many of them are bulk ones. */
  active: number;
  bulk: number;
  /** Per account: its open connections, and the turn its latest one was granted at (kept while it holds or waits). */
  accounts: Map<string, { active: number; lastTurn: number }>;
  turns: number;
  waiters: Waiter[];
  nextConnectAt: number;
  backoffMs: number;
}

/**
 * Connection slots, pacing and back-off per MX host address, shared by every request the prober serves. Bulk
 * requests get at most `connectionsPerHost` slots; single checks get those and `singleConnectionsPerHost` more, so
 * however long bulk connections hold a slow host, a single check finds a slot. A freed slot goes to a waiting single
 * check first, then to the waiting account that was granted one least recently, so one account's many chunks take
 * turns with another's one.
 */
export class HostGate {
  private readonly hosts = new Map<string, HostState>();
  private readonly config: Pick<ProberConfig, "connectionsPerHost" | "singleConnectionsPerHost" | "hostConnectGapMs">;

  constructor(config: Pick<ProberConfig, "connectionsPerHost" | "singleConnectionsPerHost" | "hostConnectGapMs">) {
    this.config = config;
  }

  /** A connection slot for `key` once one is free and the host's pacing allows; undefined if that is past `deadline`. */
  async acquire(key: string, claim: Claim, deadline: number): Promise<(() => void) | undefined> {
    const host = this.host(key);
    if (this.admits(host, claim)) this.take(host, claim);
    else {
      const granted = await new Promise<boolean>((resolve) => {
        // a waiter that gives up leaves the queue, so a freed slot goes to one that still waits
        const timer = setTimeout(
          () => {
            host.waiters.splice(host.waiters.indexOf(waiter), 1);
            this.forgetIfIdle(host, claim.account);
            resolve(false);
          },
          Math.max(0, deadline - Date.now()),
        );
        const waiter: Waiter = {
          claim,
          grant: () => {
            clearTimeout(timer);
            resolve(true);
          },
        };
        host.waiters.push(waiter);
      });
      if (!granted) return undefined;
    }
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.give(host, claim);
    };
    const at = Math.max(Date.now(), host.nextConnectAt);
    if (at >= deadline) {
      release();
      return undefined;
    }
    host.nextConnectAt = at + this.config.hostConnectGapMs;
    if (at > Date.now()) await new Promise((resolve) => setTimeout(resolve, at - Date.now()));
    return release;
  }

  /** 421 or 4.7.x: the host asks us to slow down; new connections wait, longer each time until it answers well. */
  backOff(key: string): void {
    const host = this.host(key);
    host.backoffMs = Math.min(MAX_BACKOFF_MS, host.backoffMs === 0 ? 1_000 : host.backoffMs * 2);
    host.nextConnectAt = Math.max(host.nextConnectAt, Date.now() + host.backoffMs);
  }

  recovered(key: string): void {
    this.host(key).backoffMs = 0;
  }

  private host(key: string): HostState {
    let host = this.hosts.get(key);
    if (!host) {
      host = { active: 0, bulk: 0, accounts: new Map(), turns: 0, waiters: [], nextConnectAt: 0, backoffMs: 0 };
      this.hosts.set(key, host);
    }
    return host;
  }

  private admits(host: HostState, claim: Claim): boolean {
    const { connectionsPerHost, singleConnectionsPerHost } = this.config;
    return host.active < connectionsPerHost + singleConnectionsPerHost && (claim.kind === "single" || host.bulk < connectionsPerHost);
  }

  private take(host: HostState, claim: Claim): void {
    host.active += 1;
    if (claim.kind === "bulk") host.bulk += 1;
    host.turns += 1;
    const account = host.accounts.get(claim.account) ?? { active: 0, lastTurn: 0 };
    account.active += 1;
    account.lastTurn = host.turns;
    host.accounts.set(claim.account, account);
  }

  private give(host: HostState, claim: Claim): void {
    host.active -= 1;
    if (claim.kind === "bulk") host.bulk -= 1;
    const account = host.accounts.get(claim.account);
    if (account) account.active -= 1;
    this.forgetIfIdle(host, claim.account);
    for (let next = this.next(host); next; next = this.next(host)) {
      host.waiters.splice(host.waiters.indexOf(next), 1);
      this.take(host, next.claim);
      next.grant();
    }
  }

  /** The waiter a free slot goes to: single checks first, then the account served least recently, then the oldest. */
  private next(host: HostState): Waiter | undefined {
    let best: Waiter | undefined;
    let bestRank: [number, number] = [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY];
    for (const waiter of host.waiters) {
      if (!this.admits(host, waiter.claim)) continue;
      const rank: [number, number] = [waiter.claim.kind === "single" ? 0 : 1, host.accounts.get(waiter.claim.account)?.lastTurn ?? 0];
      if (rank[0] < bestRank[0] || (rank[0] === bestRank[0] && rank[1] < bestRank[1])) {
        best = waiter;
        bestRank = rank;
      }
    }
    return best;
  }

  /** An account that neither holds nor waits for a connection has no turn to remember. */
  private forgetIfIdle(host: HostState, account: string): void {
    if (host.accounts.get(account)?.active === 0 && !host.waiters.some((waiter) => waiter.claim.account === account)) {
      host.accounts.delete(account);
    }
  }
}

/** Whether a domain accepts any local part, learned from one random RCPT and kept a day. */
export class CatchAllCache {
  private readonly entries = new Map<string, { catchAll: boolean; expires: number }>();

  get(domain: string): boolean | null {
    const entry = this.entries.get(domain);
    if (!entry || entry.expires < Date.now()) return null;
    return entry.catchAll;
  }

  set(domain: string, catchAll: boolean): void {
    this.entries.set(domain, { catchAll, expires: Date.now() + CATCH_ALL_TTL_MS });
  }
}

export interface ProberDeps {
  config: ProberConfig;
  resolver: Resolver;
  gate: HostGate;
  catchAll: CatchAllCache;
}

type Route = { host: string; address: string };

interface DomainWork {
  domain: string;
  routes: Route[];
  routeIndex: number;
  catchAll: boolean | null;
  catchAllProbed: boolean;
}

interface Item {
  address: string;
  work: DomainWork;
  result: ProbeAddressResult | undefined;
  greylisted: boolean;
  lastReply: SmtpReply | null;
  lastHost: string | null;
  detail: string | null;
}

interface Lane {
  route: Route;
  items: Item[];
  workers: number;
}

/** The meaning of a reply to RCPT TO; `temporary` is tried again, `too_many` starts a new transaction. */
export function classifyRcptReply(reply: SmtpReply): ProbeOutcome | "temporary" | "too_many" {
  const { code, enhanced } = reply;
  if (code === 250 || code === 251) return "accepted";
  if (enhanced === "4.2.2" || enhanced === "5.2.2") return "mailbox_full";
  if (code === 452 && (enhanced === "4.5.3" || /too many recipients/i.test(reply.text))) return "too_many";
  if (code >= 500 && code < 600) {
    if (enhanced?.startsWith("5.1.")) return "mailbox_not_found";
    if (enhanced === "5.2.1") return "mailbox_disabled";
    if (enhanced?.startsWith("5.7.")) return "policy_refused";
    if (!enhanced && (code === 550 || code === 551 || code === 553)) return "mailbox_not_found";
    return "rejected";
  }
  return "temporary";
}

/** The delay a temporary refusal names ("try again in 300 seconds", "5 minutes"), else the configured default. */
export function retryDelayMs(reply: SmtpReply, fallbackMs: number): number {
  const match = /(\d{1,5})\s*(s|sec|secs|seconds?|m|mins?|minutes?)\b/i.exec(reply.text);
  if (!match) return fallbackMs;
  const amount = Number(match[1]);
  return (match[2]!.toLowerCase().startsWith("m") ? amount * 60 : amount) * 1000;
}

const isPolicy = (reply: SmtpReply | null) => reply?.enhanced?.startsWith("4.7.") === true;

/** The server refused our MAIL FROM: it answers for the sender or our IP, not for any mailbox. */
class MailFromRefused extends Error {
  readonly reply: SmtpReply;
  constructor(reply: SmtpReply) {
    super(reply.text);
    this.reply = reply;
  }
}

export async function runProbe(request: ProbeRequest, deps: ProberDeps): Promise<ProbeResponse> {
  const { config, gate } = deps;
  const started = Date.now();
  const claim: Claim = { kind: request.kind ?? "bulk", account: request.account_id ?? "" };
  const deadline = started + request.budget_ms;
  const connections: Record<string, number> = {};
  const open = new Set<SmtpProbeConnection>();
  const timers = new Set<NodeJS.Timeout>();
  const lanes = new Map<string, Lane>();

  const addresses = [...new Set(request.addresses.map((address) => address.toLowerCase()))];
  const byDomain = new Map<string, string[]>();
  for (const address of addresses) {
    const domain = address.slice(address.lastIndexOf("@") + 1);
    byDomain.set(domain, [...(byDomain.get(domain) ?? []), address]);
  }
  const items = new Map<string, Item>();
  let unfinished = addresses.length;
  let finishAll: () => void = () => undefined;
  const allDone = new Promise<void>((resolve) => {
    finishAll = resolve;
  });

  function finish(item: Item, outcome: ProbeOutcome, reply: SmtpReply | null, detail: string | null = null): void {
    if (item.result) return;
    item.result = {
      address: item.address,
      outcome,
      mx_host: item.lastHost,
      reply: reply?.text ?? null,
      catch_all: item.work.catchAll,
      greylisted: item.greylisted,
      detail,
    };
    unfinished -= 1;
    if (unfinished === 0) finishAll();
  }

  /**
   * Notes the MX host `item` is tried on: its own domain's name for the lane's address, which may differ from the
   * name the lane was opened for when domains (or several names of one domain) share a server.
   */
  function tried(item: Item): void {
    item.lastHost = item.work.routes[item.work.routeIndex]?.host ?? item.lastHost;
  }

  let over = false;
  function enqueue(item: Item): void {
    if (item.result || over) return;
    const route = item.work.routes[item.work.routeIndex];
    if (!route) {
      finish(item, "unavailable", item.lastReply, item.detail ?? "no_mx_reachable");
      return;
    }
    let lane = lanes.get(route.address);
    if (!lane) {
      lane = { route, items: [], workers: 0 };
      lanes.set(route.address, lane);
    }
    lane.items.push(item);
    if (lane.workers === 0 || (lane.workers < config.connectionsPerHost && lane.items.length > lane.workers * config.rcptsPerConnection)) {
      lane.workers += 1;
      void work(lane).finally(() => {
        lane.workers -= 1;
        // items queued while this worker was leaving still need one
        if (lane.workers === 0 && lane.items.length > 0 && Date.now() < deadline) enqueue(lane.items.shift()!);
      });
    }
  }

  /** The host failed us (refused, timed out, 421): its queued domains move to their next MX host. */
  function hostFailed(lane: Lane, failure: string, reply: SmtpReply | null): void {
    if (failure === "service_unavailable" || failure === "timeout" || isPolicy(reply)) gate.backOff(lane.route.address);
    const moved = lane.items.splice(0);
    for (const item of moved) {
      tried(item);
      item.detail = failure;
      item.lastReply = reply ?? item.lastReply;
      if (item.work.routes[item.work.routeIndex]?.address === lane.route.address) item.work.routeIndex += 1;
    }
    for (const item of moved) enqueue(item);
  }

  function temporary(item: Item, reply: SmtpReply, lane: Lane): void {
    item.greylisted = true;
    item.lastReply = reply;
    if (isPolicy(reply)) gate.backOff(lane.route.address);
    const delay = retryDelayMs(reply, config.greylistRetryMs);
    if (Date.now() + delay >= deadline) {
      finish(item, "greylisted", reply);
      return;
    }
    const timer = setTimeout(() => {
      timers.delete(timer);
      enqueue(item);
    }, delay);
    timers.add(timer);
  }

  async function work(lane: Lane): Promise<void> {
    while (lane.items.length > 0 && Date.now() < deadline) {
      const release = await gate.acquire(lane.route.address, claim, deadline);
      if (!release) return;
      // The lane's other connection may have taken the rest while this one waited for its turn.
      if (lane.items.length === 0) {
        release();
        return;
      }
      let connection: SmtpProbeConnection | undefined;
      // the host these addresses were last tried on, as reported: one that was only queued for is never named
      for (const item of lane.items) tried(item);
      try {
        connections[lane.route.host] = (connections[lane.route.host] ?? 0) + 1;
        connection = await SmtpProbeConnection.open({
          address: lane.route.address,
          port: config.smtpPort,
          hostName: lane.route.host,
          heloName: config.heloName,
          commandTimeoutMs: config.commandTimeoutMs,
          deadline,
        });
        open.add(connection);
        await session(connection, lane);
        gate.recovered(lane.route.address);
      } catch (error) {
        if (error instanceof MailFromRefused) mailFromRefused(lane, error.reply);
        else if (error instanceof SmtpConnectionError) hostFailed(lane, error.failure, error.reply);
        else throw error;
        return;
      } finally {
        if (connection) {
          open.delete(connection);
          await connection.quit();
        }
        release();
      }
    }
  }

  function mailFromRefused(lane: Lane, reply: SmtpReply): void {
    if (reply.code < 500) {
      hostFailed(lane, "mail_from_deferred", reply);
      return;
    }
    // no RCPT on this host can tell anything about a mailbox
    for (const item of lane.items.splice(0)) {
      tried(item);
      finish(item, reply.enhanced?.startsWith("5.7.") ? "policy_refused" : "rejected", reply, "mail_from_refused");
    }
  }

  async function session(connection: SmtpProbeConnection, lane: Lane): Promise<void> {
    let sent = 0;
    let inTransaction = 0;
    // No MAIL FROM before there is an address to ask about: the lane's other connection may have taken the rest while
    // this one opened.
    let begun = false;
    const begin = async () => {
      if (begun) await connection.command("RSET");
      begun = true;
      inTransaction = 0;
      const reply = await connection.command(`MAIL FROM:<${config.mailFrom}>`);
      if (reply.code !== 250) throw new MailFromRefused(reply);
    };
    const rcpt = async (address: string) => {
      if (inTransaction >= config.rcptsPerTransaction) await begin();
      sent += 1;
      inTransaction += 1;
      return connection.command(`RCPT TO:<${address}>`);
    };

    while (sent < config.rcptsPerConnection && Date.now() < deadline) {
      const item = lane.items.shift();
      if (!item) return;
      tried(item);
      try {
        // Before the catch-all probe is marked as done: a refused MAIL FROM leaves it to the domain's next host.
        if (!begun) await begin();
        const { work } = item;
        if (work.catchAll === null && !work.catchAllProbed) {
          work.catchAllProbed = true;
          const reply = await rcpt(`mf-probe-${randomBytes(6).toString("hex")}@${work.domain}`);
          const meaning = classifyRcptReply(reply);
          if (meaning === "accepted" || meaning === "mailbox_not_found") {
            work.catchAll = meaning === "accepted";
            deps.catchAll.set(work.domain, work.catchAll);
          }
        }
        const reply = await rcpt(item.address);
        const meaning = classifyRcptReply(reply);
        if (meaning === "too_many") {
          lane.items.unshift(item);
          // the server's per-message limit: a new transaction takes the rest, unless even one was too many
          if (inTransaction <= 1) return;
          inTransaction = config.rcptsPerTransaction;
        } else if (meaning === "temporary") {
          temporary(item, reply, lane);
        } else {
          finish(item, meaning, reply);
        }
      } catch (error) {
        lane.items.unshift(item);
        throw error;
      }
    }
  }

  // Routes of every domain (DNS), then the work starts on each domain's first usable MX host.
  const domains = [...byDomain.keys()];
  const routeWork = async (domain: string) => {
    const routes = await deps.resolver.routes(domain);
    const work: DomainWork = { domain, routes: [], routeIndex: 0, catchAll: deps.catchAll.get(domain), catchAllProbed: false };
    let refusedPrivate = false;
    if (routes.kind === "ok") {
      // one attempt per address: MX names that share one lead to the same server, which has answered already
      const dialled = new Set<string>();
      for (const route of routes.routes) {
        const usable = route.addresses.filter((ip) => config.allowPrivate || !isPrivateAddress(ip));
        if (usable.length < route.addresses.length) refusedPrivate = true;
        const address = usable.find((ip) => !dialled.has(ip));
        if (address) {
          dialled.add(address);
          work.routes.push({ host: route.host, address });
        }
      }
    }
    for (const address of byDomain.get(domain)!) {
      const item: Item = { address, work, result: undefined, greylisted: false, lastReply: null, lastHost: null, detail: null };
      items.set(address, item);
      if (routes.kind === "none") finish(item, "unavailable", null, routes.detail);
      else if (work.routes.length === 0)
        finish(item, refusedPrivate ? "private_address" : "unavailable", null, refusedPrivate ? "private_address" : "no_mx_address");
    }
    for (const address of byDomain.get(domain)!) enqueue(items.get(address)!);
  };
  await pLimit(DNS_CONCURRENCY).map(domains, routeWork);

  const outOfTime = setTimeout(finishAll, Math.max(0, deadline - Date.now()));
  if (unfinished > 0) await allDone;
  over = true;
  clearTimeout(outOfTime);
  for (const timer of timers) clearTimeout(timer);
  for (const connection of open) connection.destroy();
  for (const item of items.values()) {
    if (item.greylisted) finish(item, "greylisted", item.lastReply);
    else finish(item, "unavailable", item.lastReply, item.detail ?? "timeout");
  }

  return {
    results: request.addresses.map((address) => items.get(address.toLowerCase())!.result!),
    connections,
    elapsed_ms: Date.now() - started,
  };
}
