import { SMTPServer, type SMTPServerSession } from "smtp-server";
import type { ZoneEntry } from "./doh-server.ts";

// Receiving mail servers (MX hosts) for the mailbox prober, in the dev stack, its tests and its benchmark: real
// smtp-server instances on loopback addresses (127.0.0.2, 127.0.0.3, … are all loopback on Linux), one per
// behaviour, all on the same port, since the prober dials every MX host on one port (PROBE_SMTP_PORT). Each keeps
// what it saw (connections, concurrency, RCPTs per connection, DATA commands), so tests assert the servers' side.

export type MailboxState = "ok" | "disabled" | "full" | "full_permanent";

export interface MxBehaviour {
  /** Wait this long before the 220 greeting, as real MTAs do (a pre-greet pause catches impatient spam bots). */
  greetingDelayMs?: number;
  /** `tarpit`: accept the connection and never greet; `busy`: greet with 421 and hang up; `refuse`: 554 and hang up. */
  greeting?: "ok" | "tarpit" | "busy" | "refuse";
  /** Local parts this host knows; any other is 550 5.1.1 unless `catchAll`. */
  mailboxes?: Record<string, MailboxState>;
  /** Accept every recipient (a catch-all domain). */
  catchAll?: boolean;
  /** Answer each RCPT TO this long after it arrives, as a slow or overloaded server does. */
  rcptDelayMs?: number;
  /** Greylisting: a recipient's first RCPT gets 450 4.7.1; from this long after it, it is accepted. */
  greylistMs?: number;
  /** Refuse the prober itself at RCPT (550 5.7.1, as a host that blocklists the client's IP does). */
  policyBlock?: boolean;
  /** Defer every MAIL FROM (451 4.7.1, as a host that will not take the sender's mail for now does). */
  deferMailFrom?: boolean;
}

export interface MxHostStats {
  connections: number;
  /** The most connections open at once. */
  maxConcurrent: number;
  /** RCPT commands per finished connection. */
  rcptsPerConnection: number[];
  /** DATA commands received: a prober must never send one. */
  dataCommands: number;
  mailFroms: number;
}

export interface MxHost {
  address: string;
  behaviour: MxBehaviour;
  stats: MxHostStats;
}

export interface MxHosts {
  hosts: Map<string, MxHost>;
  /** Listens on `port` (0: a free one, the same for every address) and returns it. */
  listen(port: number): Promise<number>;
  resetStats(): void;
  close(): Promise<void>;
}

const emptyStats = (): MxHostStats => ({ connections: 0, maxConcurrent: 0, rcptsPerConnection: [], dataCommands: 0, mailFroms: 0 });

const smtpError = (responseCode: number, message: string) => Object.assign(new Error(message), { responseCode });

function createMxServer(host: MxHost): SMTPServer {
  const { behaviour } = host;
  const rcpts = new Map<string, number>();
  const firstSeen = new Map<string, number>();
  let open = 0;
  return new SMTPServer({
    name: `mx-${host.address}`,
    authOptional: true,
    disabledCommands: ["AUTH"],
    // tarpitted and delayed sessions must not hold close() up
    closeTimeout: 100,
    logger: false,
    onConnect(session: SMTPServerSession, callback) {
      host.stats.connections += 1;
      open += 1;
      host.stats.maxConcurrent = Math.max(host.stats.maxConcurrent, open);
      rcpts.set(session.id, 0);
      if (behaviour.greeting === "tarpit") return;
      if (behaviour.greeting === "busy") return callback(smtpError(421, "4.3.2 Too busy, try again later"));
      if (behaviour.greeting === "refuse") return callback(smtpError(554, "5.3.2 No SMTP service here"));
      setTimeout(() => callback(), behaviour.greetingDelayMs ?? 0);
    },
    onClose(session) {
      open -= 1;
      host.stats.rcptsPerConnection.push(rcpts.get(session.id) ?? 0);
      rcpts.delete(session.id);
    },
    onMailFrom(_address, _session, callback) {
      host.stats.mailFroms += 1;
      if (behaviour.deferMailFrom) return callback(smtpError(451, "4.7.1 Sender deferred, try again later"));
      callback();
    },
    onRcptTo(address, session, reply) {
      rcpts.set(session.id, (rcpts.get(session.id) ?? 0) + 1);
      const callback = (error?: Error) => (behaviour.rcptDelayMs ? setTimeout(() => reply(error), behaviour.rcptDelayMs) : reply(error));
      if (behaviour.policyBlock) return callback(smtpError(550, "5.7.1 Client host rejected: listed at a blocklist"));
      const recipient = address.address.toLowerCase();
      if (behaviour.greylistMs !== undefined) {
        const seen = firstSeen.get(recipient) ?? Date.now();
        firstSeen.set(recipient, seen);
        const wait = seen + behaviour.greylistMs - Date.now();
        if (wait > 0) return callback(smtpError(450, `4.7.1 Greylisted, try again in ${Math.ceil(behaviour.greylistMs / 1000)} seconds`));
      }
      const state = behaviour.mailboxes?.[recipient.slice(0, recipient.lastIndexOf("@"))];
      if (state === "disabled") return callback(smtpError(550, "5.2.1 Mailbox disabled, not accepting messages"));
      if (state === "full") return callback(smtpError(452, "4.2.2 Mailbox full"));
      if (state === "full_permanent") return callback(smtpError(552, "5.2.2 Mailbox full, quota exceeded"));
      if (state === "ok" || behaviour.catchAll) return callback();
      callback(smtpError(550, "5.1.1 No such user here"));
    },
    onData(stream, _session, callback) {
      host.stats.dataCommands += 1;
      stream.resume();
      stream.once("end", () => callback());
    },
  });
}

/** One smtp-server per loopback address, each with its behaviour. */
export function createMxHosts(behaviours: Record<string, MxBehaviour>): MxHosts {
  const hosts = new Map<string, MxHost>(
    Object.entries(behaviours).map(([address, behaviour]) => [address, { address, behaviour, stats: emptyStats() }]),
  );
  const servers = [...hosts.values()].map((host) => ({ host, server: createMxServer(host) }));
  const listenOn = (server: SMTPServer, port: number, address: string) =>
    new Promise<number>((resolve, reject) => {
      server.server.once("error", reject);
      server.listen(port, address, () => {
        const bound = server.server.address();
        resolve(typeof bound === "object" && bound ? bound.port : port);
      });
    });
  return {
    hosts,
    async listen(port) {
      const [first, ...rest] = servers;
      if (!first) return port;
      const bound = await listenOn(first.server, port, first.host.address);
      await Promise.all(rest.map(({ server, host }) => listenOn(server, bound, host.address)));
      return bound;
    },
    resetStats() {
      for (const host of hosts.values()) host.stats = emptyStats();
    },
    async close() {
      await Promise.all(servers.map(({ server }) => new Promise<void>((resolve) => server.close(() => resolve()))));
    },
  };
}

/**
 * The dev stack's MX hosts and the zone that routes demo domains to them (`npm run dev`, the Workers tests): one
 * domain per behaviour under `.mailbox.test`, each MX host a name in the zone with its loopback A record.
 */
export const DEV_MX_BEHAVIOURS: Record<string, MxBehaviour> = {
  "127.0.0.2": {
    greetingDelayMs: 20,
    mailboxes: { alice: "ok", bob: "ok", carol: "disabled", dave: "full", erin: "full_permanent", info: "ok" },
  },
  "127.0.0.3": { catchAll: true },
  "127.0.0.4": { greylistMs: 2_000, mailboxes: { grace: "ok" } },
  "127.0.0.5": { greeting: "tarpit" },
  "127.0.0.6": { greeting: "busy" },
  "127.0.0.7": { policyBlock: true },
};

const mx = (exchange: string): ZoneEntry => ({ MX: [{ priority: 10, exchange }] });

export const DEV_MX_ZONE: Record<string, ZoneEntry> = {
  "mx.mailbox.test": { A: ["127.0.0.2"] },
  "mx.catchall.mailbox.test": { A: ["127.0.0.3"] },
  "mx.greylist.mailbox.test": { A: ["127.0.0.4"] },
  "mx.tarpit.mailbox.test": { A: ["127.0.0.5"] },
  "mx.busy.mailbox.test": { A: ["127.0.0.6"] },
  "mx.blocking.mailbox.test": { A: ["127.0.0.7"] },
  /** alice, bob, info: valid; carol: disabled; dave, erin: full; anyone else: not found. */
  "mailbox.test": mx("mx.mailbox.test"),
  "catchall.mailbox.test": mx("mx.catchall.mailbox.test"),
  /** grace: accepted 2 s after her first attempt. */
  "greylist.mailbox.test": mx("mx.greylist.mailbox.test"),
  "tarpit.mailbox.test": mx("mx.tarpit.mailbox.test"),
  "busy.mailbox.test": mx("mx.busy.mailbox.test"),
  "blocking.mailbox.test": mx("mx.blocking.mailbox.test"),
  /** Its preferred MX answers 421: the prober falls back to the second, which knows alice and bob. */
  "fallback.mailbox.test": {
    MX: [
      { priority: 5, exchange: "mx.busy.mailbox.test" },
      { priority: 20, exchange: "mx.mailbox.test" },
    ],
  },
};
