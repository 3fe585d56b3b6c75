import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import PostalMime from "postal-mime";
import { SMTPServer, type SMTPServerDataStream, type SMTPServerOptions, type SMTPServerSession } from "smtp-server";
import type { BridgeConfig } from "./config.ts";
import { createJsonLogger, type LogFields, type Logger } from "./log.ts";
import { ENHANCED_CODE_PREFIX, replies, replyForRefusal, type SmtpReplyError } from "./replies.ts";
import { ByteBudget, SpooledMessage, spoolData } from "./spool.ts";
import { loadTlsCredentials, type TlsCredentials } from "./tls.ts";
import { createWorkerClient, WorkerUnavailableError, type RelayIdentity, type WorkerClient } from "./worker-client.ts";

// The SMTP side of the relay. Three listeners (STARTTLS on SMTP_PORT and SMTP_ALT_PORT, implicit TLS on
// SMTPS_PORT) share one set of handlers, named after the SMTP phase they act in:
//   connect   global and per-IP connection caps
//   AUTH      PLAIN/LOGIN after TLS, checked by the Worker, successes cached for at most AUTH_CACHE_TTL_MS
//   MAIL FROM the Worker confirms the account may send from that domain, so a bad sender fails before DATA
//   RCPT TO   syntax and the pipeline's recipient cap, which the Worker states in its AUTH answer
//   DATA      size and the bytes-in-flight cap, spooled to disk (spool.ts), the header section parsed as a sanity
//             check, then the exact bytes go to the Worker; 250 only after its 202
// Nothing here opens a port or reads the environment until listen() is called.

type Connection = SMTPServer["connections"] extends Set<infer C> ? C : never;

export interface BridgeDeps {
  workerClient?: WorkerClient;
  logger?: Logger;
  tls?: TlsCredentials;
  /** Clock for the credential cache (ms). */
  now?: () => number;
}

export interface BridgePorts {
  smtp: number;
  alt: number;
  smtps: number;
}

export interface BridgeServer {
  /** Binds the three listeners; ports given as 0 in the config are chosen by the OS and returned. */
  listen(): Promise<BridgePorts>;
  /**
   * Graceful stop: no new connections, idle sessions get 421, sessions in the middle of DATA get their reply
   * and then 421; whatever is still open after `timeoutMs` (SHUTDOWN_TIMEOUT_MS by default) is cut.
   */
  close(options?: { timeoutMs?: number }): Promise<void>;
  readonly sessionCount: number;
  readonly tls: TlsCredentials;
}

interface RelayUser extends RelayIdentity {
  username: string;
}

interface SessionState {
  connection: Connection | undefined;
  remoteAddress: string;
  inData: boolean;
  transactionStartedAt: number | undefined;
}

class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();
  private readonly ttlMs: number;
  private readonly now: () => number;
  private readonly maxEntries: number;

  // plain fields rather than parameter properties: Node's type stripping (the Docker image) cannot run those
  constructor(ttlMs: number, now: () => number, maxEntries = 10_000) {
    this.ttlMs = ttlMs;
    this.now = now;
    this.maxEntries = maxEntries;
  }

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V): void {
    if (this.ttlMs <= 0) return;
    // Map iteration order is insertion order, so the first key is the oldest entry.
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(key, { value, expiresAt: this.now() + this.ttlMs });
  }
}

// dot-atom local part (no quoted strings), a domain of LDH labels with a letter TLD; 254 characters at most.
const mailboxPattern =
  /^[^\s@<>()[\],;:"\\.]+(?:\.[^\s@<>()[\],;:"\\.]+)*@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+(?:[A-Za-z]{2,63}|xn--[A-Za-z0-9-]{1,59})$/;
export const isValidMailbox = (address: string) => address.length <= 254 && mailboxPattern.test(address);

const isLoopback = (address: string) => /^(?:::ffff:)?127\./.test(address) || address === "::1";

const relayUserOf = (session: SMTPServerSession): RelayUser | undefined => {
  const user: unknown = session.user;
  return typeof user === "object" && user !== null && "credentialId" in user ? (user as RelayUser) : undefined;
};

const describeReply = (error: SmtpReplyError) => `${error.responseCode} ${error.message}`;

/** What the client hears at the end of DATA, and what the transaction log says about it. */
interface DataOutcome {
  reply: SmtpReplyError | null;
  message?: string;
  fields: LogFields;
}

const refused = (reply: SmtpReplyError, fields: LogFields = {}): DataOutcome => ({
  reply,
  fields: { outcome: reply.responseCode >= 500 ? "rejected" : "deferred", reply: describeReply(reply), ...fields },
});

/**
 * Why the header section cannot be a message, if it cannot. postal-mime is lenient by design; what it cannot turn
 * into headers with a From is refused here rather than after a round trip to the Worker (which parses it whole).
 */
async function headerProblem(head: Buffer): Promise<string | undefined> {
  try {
    const email = await PostalMime.parse(head);
    if (email.headers.length === 0) return "no header section";
    if (!email.headers.some((header) => header.key === "from")) return "no From header";
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/**
 * Two adjustments to what smtp-server says on one connection:
 *  - it adds a generic enhanced status code to every reply (452 becomes 4.2.2, 550 becomes 5.1.1); the bridge's
 *    own replies carry the precise code in their text, so for those the generic one is left out;
 *  - it lists AUTH in the EHLO reply before STARTTLS too. Like Postfix's smtpd_tls_auth_only, AUTH is only
 *    offered once the connection is encrypted (unless this client may authenticate in clear), so well-behaved
 *    clients never send a password in clear; one that tries anyway gets 538.
 */
function adjustReplies(connection: Connection, authAllowedInClear: boolean): void {
  const send = connection.send.bind(connection);
  connection.send = (code, data, context) => {
    if (code === 250 && Array.isArray(data) && !connection.secure && !authAllowedInClear) {
      return send(code, data.filter((line) => !/^AUTH\b/i.test(line)), context);
    }
    return send(code, data, typeof data === "string" && ENHANCED_CODE_PREFIX.test(data) ? false : context);
  };
}

export function createServer(config: BridgeConfig, deps: BridgeDeps = {}): BridgeServer {
  const logger = deps.logger ?? createJsonLogger();
  const now = deps.now ?? Date.now;
  const tls = deps.tls ?? loadTlsCredentials(config);
  const worker =
    deps.workerClient ??
    createWorkerClient({ workerUrl: config.workerUrl, bridgeSecret: config.bridgeSecret, timeoutMs: config.workerTimeoutMs });

  // Only successes are cached: a wrong password always costs a Worker round trip, and a revoked credential stops
  // working at the latest AUTH_CACHE_TTL_MS after revocation (the Worker also re-checks it on every message).
  const authCache = new TtlCache<RelayIdentity>(config.authCacheTtlMs, now);
  const senderCache = new TtlCache<true>(config.authCacheTtlMs, now);
  const sessions = new Map<string, SessionState>();
  const inFlight = new ByteBudget(config.maxBytesInFlight);
  const connectionsPerIp = new Map<string, number>();
  let shuttingDown = false;
  let closing: Promise<void> | undefined;
  // resolved when the last session has been reported closed, for close() to wait on
  let onDrained: (() => void) | undefined;

  const smtpServers: SMTPServer[] = [];

  function hangUp(state: SessionState): void {
    const reply = replies.shuttingDown();
    // a 421 makes smtp-server close the connection after sending it
    state.connection?.send(reply.responseCode, reply.message);
  }

  function logTransaction(session: SMTPServerSession, state: SessionState | undefined, fields: LogFields): void {
    const user = relayUserOf(session);
    const started = state?.transactionStartedAt;
    logger.log("info", "smtp.transaction", {
      session_id: session.id,
      remote_ip: session.remoteAddress,
      credential_id: user?.credentialId,
      account_id: user?.accountId,
      mail_from: session.envelope.mailFrom ? session.envelope.mailFrom.address : undefined,
      recipients: session.envelope.rcptTo.length,
      ms: started === undefined ? undefined : now() - started,
      ...fields,
    });
    if (state) state.transactionStartedAt = undefined;
  }

  const handlers: Pick<SMTPServerOptions, "onConnect" | "onAuth" | "onMailFrom" | "onRcptTo" | "onData" | "onClose"> = {
    onConnect(session, callback) {
      const ip = session.remoteAddress;
      let refusal: SmtpReplyError | undefined;
      if (shuttingDown) refusal = replies.shuttingDown();
      else if (sessions.size >= config.maxClients) refusal = replies.tooManyConnections();
      else if ((connectionsPerIp.get(ip) ?? 0) >= config.maxConnectionsPerIp) refusal = replies.tooManyConnectionsFromIp();

      let connection: Connection | undefined;
      for (const server of smtpServers) {
        for (const candidate of server.connections) if (candidate.session === session) connection = candidate;
      }
      if (connection) adjustReplies(connection, config.allowInsecureAuthOnLoopback && isLoopback(ip));
      if (refusal) {
        logger.log("warn", "smtp.connection_refused", { remote_ip: ip, reply: describeReply(refusal) });
        return callback(refusal);
      }
      sessions.set(session.id, { connection, remoteAddress: ip, inData: false, transactionStartedAt: undefined });
      connectionsPerIp.set(ip, (connectionsPerIp.get(ip) ?? 0) + 1);
      callback();
    },

    onClose(session) {
      const state = sessions.get(session.id);
      if (!state) return; // refused in onConnect: never counted
      sessions.delete(session.id);
      const left = (connectionsPerIp.get(state.remoteAddress) ?? 1) - 1;
      if (left > 0) connectionsPerIp.set(state.remoteAddress, left);
      else connectionsPerIp.delete(state.remoteAddress);
      if (sessions.size === 0) onDrained?.();
    },

    onAuth(auth, session, callback) {
      const username = auth.username ?? "";
      const password = auth.password ?? "";
      const logAuth = (outcome: string, fields: LogFields = {}) =>
        logger.log(outcome === "accepted" ? "info" : "warn", "smtp.auth", {
          session_id: session.id,
          remote_ip: session.remoteAddress,
          method: auth.method,
          username,
          outcome,
          ...fields,
        });

      // allowInsecureAuth is only switched on for ALLOW_INSECURE_AUTH_ON_LOOPBACK, and then only loopback
      // clients may skip TLS; without the flag smtp-server itself answers 538 before this handler runs.
      if (!session.secure && !(config.allowInsecureAuthOnLoopback && isLoopback(session.remoteAddress))) {
        const reply = replies.encryptionRequired();
        logAuth("rejected", { reply: describeReply(reply) });
        return callback(reply);
      }

      const cacheKey = createHash("sha256").update(`${username}\0${password}`).digest("hex");
      const cached = authCache.get(cacheKey);
      if (cached) {
        logAuth("accepted", { credential_id: cached.credentialId, cached: true });
        return callback(null, { user: { ...cached, username } satisfies RelayUser });
      }
      worker.authenticate(username, password).then(
        (result) => {
          if (result.ok) {
            authCache.set(cacheKey, result.value);
            logAuth("accepted", { credential_id: result.value.credentialId });
            return callback(null, { user: { ...result.value, username } satisfies RelayUser });
          }
          const reply = result.refusal.status === 401 ? replies.authFailed() : replies.authTemporarilyUnavailable();
          logAuth(result.refusal.status === 401 ? "rejected" : "deferred", { reply: describeReply(reply), worker_status: result.refusal.status });
          callback(reply);
        },
        (error: unknown) => {
          const reply = replies.authTemporarilyUnavailable();
          logAuth("deferred", { reply: describeReply(reply), error: (error as Error).message });
          callback(reply);
        },
      );
    },

    onMailFrom(address, session, callback) {
      const state = sessions.get(session.id);
      if (state) state.transactionStartedAt = now();
      const user = relayUserOf(session);
      const reject = (reply: SmtpReplyError, fields: LogFields = {}) => {
        logTransaction(session, state, { outcome: reply.responseCode >= 500 ? "rejected" : "deferred", phase: "mail_from", reply: describeReply(reply), mail_from: address.address, ...fields });
        callback(reply);
      };
      if (shuttingDown) return reject(replies.shuttingDown());
      if (!user) return reject(replies.credentialRevoked()); // authOptional is off, so this is a safety net
      if (address.address === "") return reject(replies.nullSender());
      if (!isValidMailbox(address.address)) return reject(replies.badSender());

      const domain = address.address.slice(address.address.lastIndexOf("@") + 1).toLowerCase();
      const cacheKey = `${user.credentialId}\0${domain}`;
      if (senderCache.get(cacheKey)) return callback();
      worker.checkSender(user.credentialId, address.address).then(
        (result) => {
          if (!result.ok) return reject(replyForRefusal(result.refusal), { worker_status: result.refusal.status, error_code: result.refusal.code });
          senderCache.set(cacheKey, true);
          callback();
        },
        (error: unknown) => reject(replies.workerUnavailable(), { error: (error as Error).message }),
      );
    },

    onRcptTo(address, session, callback) {
      const user = relayUserOf(session);
      if (!user) return callback(replies.credentialRevoked()); // authOptional is off, so this is a safety net
      // the Worker's cap, learnt at AUTH; a repeated address replaces its earlier entry, so it never counts twice
      const rcptTo = session.envelope.rcptTo;
      const key = address.address.toLowerCase();
      if (rcptTo.length >= user.maxRecipients && !rcptTo.some((rcpt) => rcpt.address.toLowerCase() === key)) {
        return callback(replies.tooManyRecipients(user.maxRecipients));
      }
      callback(isValidMailbox(address.address) ? undefined : replies.badRecipient());
    },

    onData(stream, session, callback) {
      const state = sessions.get(session.id);
      if (state) state.inData = true;
      const finish = (reply: SmtpReplyError | null, message: string | undefined, fields: LogFields) => {
        logTransaction(session, state, { phase: "data", ...fields });
        if (reply) callback(reply);
        else callback(null, message);
        if (state) {
          state.inData = false;
          // the reply goes out first; a draining bridge then ends the session instead of taking another message
          if (shuttingDown) setImmediate(() => hangUp(state));
        }
      };

      receive(stream, session).then(
        ({ reply, message, fields }) => finish(reply, message, fields),
        (error: unknown) => {
          // the client went away mid-DATA (or the stream broke): nothing to answer, nothing was accepted
          finish(replies.workerUnavailable(), undefined, { outcome: "aborted", error: (error as Error).message });
        },
      );
    },
  };

  async function receive(stream: SMTPServerDataStream, session: SMTPServerSession): Promise<DataOutcome> {
    const received = await spoolData(stream, { dir: config.spoolDir, budget: inFlight, maxBytes: config.maxMessageBytes });
    let outcome: DataOutcome;
    if (received.outcome === "too_big") outcome = refused(replies.tooBig(config.maxMessageBytes));
    else if (received.outcome === "no_room") outcome = refused(replies.noRoom(), { error: received.reason });
    else {
      try {
        const problem = await headerProblem(received.head);
        outcome = problem ? refused(replies.unparseable(problem)) : await submit(received.message, session);
      } finally {
        await received.message.close();
      }
    }
    return { ...outcome, fields: { ...outcome.fields, bytes: received.bytes } };
  }

  async function submit(raw: SpooledMessage, session: SMTPServerSession): Promise<DataOutcome> {
    const user = relayUserOf(session);
    const mailFrom = session.envelope.mailFrom;
    if (!user || !mailFrom) return refused(replies.credentialRevoked());
    try {
      const result = await worker.submitMessage({
        credentialId: user.credentialId,
        mailFrom: mailFrom.address,
        rcptTo: session.envelope.rcptTo.map((rcpt) => rcpt.address),
        raw,
      });
      if (!result.ok) {
        return refused(replyForRefusal(result.refusal), { worker_status: result.refusal.status, error_code: result.refusal.code });
      }
      const message = `2.0.0 Ok: queued as ${result.value.id}`;
      return {
        reply: null,
        message,
        fields: { outcome: "queued", reply: `250 ${message}`, message_id: result.value.id, credits_charged: result.value.creditsCharged },
      };
    } catch (error) {
      if (!(error instanceof WorkerUnavailableError)) throw error;
      return refused(replies.workerUnavailable(), { error: error.message });
    }
  }

  const baseOptions: SMTPServerOptions = {
    name: config.serverName,
    banner: "Mailforge SMTP relay",
    key: tls.key,
    cert: tls.cert,
    minVersion: "TLSv1.2",
    size: config.maxMessageBytes,
    authMethods: ["PLAIN", "LOGIN"],
    authOptional: false,
    allowInsecureAuth: config.allowInsecureAuthOnLoopback,
    disableReverseLookup: true,
    // DSN and SMTPUTF8 would be promises about delivery the pipeline behind the Worker does not keep
    hideDSN: true,
    hideSMTPUTF8: true,
    hideENHANCEDSTATUSCODES: false,
    logger: false,
    socketTimeout: config.socketTimeoutMs,
    closeTimeout: config.shutdownTimeoutMs,
    maxClients: config.maxClients,
    ...handlers,
  };

  const listeners: { key: keyof BridgePorts; port: number; server: SMTPServer }[] = [
    { key: "smtp", port: config.smtpPort, server: new SMTPServer({ ...baseOptions, secure: false }) },
    { key: "alt", port: config.altPort, server: new SMTPServer({ ...baseOptions, secure: false }) },
    { key: "smtps", port: config.smtpsPort, server: new SMTPServer({ ...baseOptions, secure: true, disabledCommands: ["STARTTLS"] }) },
  ];
  for (const { key, server } of listeners) {
    smtpServers.push(server);
    // Without a listener an 'error' event (a client resetting mid-handshake, a TLS alert) would crash the process.
    server.on("error", (error: Error & { code?: string }) =>
      logger.log("warn", "smtp.connection_error", { listener: key, code: error.code, error: error.message }),
    );
  }

  function listenOn(server: SMTPServer, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      server.server.once("error", reject);
      server.listen(port, config.host, () => {
        server.server.off("error", reject);
        resolve((server.server.address() as AddressInfo).port);
      });
    });
  }

  return {
    tls,
    get sessionCount() {
      return sessions.size;
    },
    async listen() {
      // a spool directory that cannot be written would otherwise only show as 451 on every message
      try {
        await (await SpooledMessage.create(config.spoolDir, inFlight)).close();
      } catch (error) {
        throw Object.assign(new Error(`SPOOL_DIR ${config.spoolDir} cannot hold messages: ${(error as Error).message}`), {
          code: (error as NodeJS.ErrnoException).code,
        });
      }
      const ports: BridgePorts = { smtp: 0, alt: 0, smtps: 0 };
      try {
        for (const { key, port, server } of listeners) ports[key] = await listenOn(server, port);
      } catch (error) {
        await Promise.all(listeners.map(({ server }) => new Promise<void>((resolve) => (server.server.listening ? server.close(resolve) : resolve()))));
        throw error;
      }
      return ports;
    },
    close({ timeoutMs = config.shutdownTimeoutMs } = {}) {
      closing ??= (async () => {
        shuttingDown = true;
        const closed = listeners.map(
          ({ server }) => new Promise<void>((resolve) => (server.server.listening ? server.close(() => resolve()) : resolve())),
        );
        for (const state of sessions.values()) if (!state.inData) hangUp(state);
        const drained = new Promise<void>((resolve) => {
          onDrained = resolve;
          if (sessions.size === 0) resolve();
        });
        let cut: NodeJS.Timeout | undefined;
        const deadline = new Promise<void>((resolve) => {
          cut = setTimeout(() => {
            for (const { server } of listeners) for (const connection of server.connections) connection.close();
            resolve();
          }, timeoutMs);
        });
        // sessions are reported closed (onClose) a turn after their sockets, so wait for both
        await Promise.race([Promise.all([...closed, drained]), deadline]);
        await Promise.all(closed);
        clearTimeout(cut);
      })();
      return closing;
    },
  };
}
