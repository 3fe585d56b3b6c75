import type { AddressInfo } from "node:net";
import { SMTPServer, type SMTPServerOptions } from "smtp-server";
import type { BridgeConfig } from "./config.ts";
import { createJsonLogger, type Logger } from "./log.ts";
import { authHandler } from "./phases/auth.ts";
import { connectHandlers } from "./phases/connect.ts";
import { dataHandler } from "./phases/data.ts";
import { mailFromHandler } from "./phases/mail-from.ts";
import { rcptToHandler } from "./phases/rcpt-to.ts";
import { hangUp, Sessions, type BridgeContext } from "./session.ts";
import { ByteBudget, SpooledMessage } from "./spool.ts";
import { loadTlsCredentials, type TlsCredentials } from "./tls.ts";
import { createWorkerClient, type WorkerClient } from "./worker-client.ts";

// The SMTP side of the relay. Three listeners (STARTTLS on SMTP_PORT and SMTP_ALT_PORT, implicit TLS on
// SMTPS_PORT) share one set of handlers, each in phases/ under the name of the SMTP phase it acts in:
//   connect    global and per-IP connection caps
//   auth       PLAIN/LOGIN after TLS, checked by the Worker, successes cached for at most AUTH_CACHE_TTL_MS
//   mail-from  the Worker confirms the account may send from that domain, so a bad sender fails before DATA
//   rcpt-to    syntax and the pipeline's recipient cap, which the Worker states in its AUTH answer
//   data       size and the bytes-in-flight cap, spooled to disk (spool.ts), the header section parsed as a sanity
//              check, then the exact bytes go to the Worker; 250 only after its 202
// This file wires them to the listeners and runs listen and close. Nothing here opens a port or reads the
// environment until listen() is called.

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

export function createServer(config: BridgeConfig, deps: BridgeDeps = {}): BridgeServer {
  const logger = deps.logger ?? createJsonLogger();
  const tls = deps.tls ?? loadTlsCredentials(config);
  const sessions = new Sessions();
  const inFlight = new ByteBudget(config.maxBytesInFlight);
  let shuttingDown = false;
  let closing: Promise<void> | undefined;

  const context: BridgeContext = {
    config,
    logger,
    now: deps.now ?? Date.now,
    worker:
      deps.workerClient ??
      createWorkerClient({
        workerUrl: config.workerUrl,
        bridgeSecret: config.bridgeSecret,
        timeoutMs: config.workerTimeoutMs,
        maxSockets: config.workerMaxSockets,
      }),
    sessions,
    inFlight,
    get shuttingDown() {
      return shuttingDown;
    },
    connectionOf(session) {
      for (const { server } of listeners) {
        for (const candidate of server.connections) if (candidate.session === session) return candidate;
      }
      return undefined;
    },
  };

  const handlers: Pick<SMTPServerOptions, "onConnect" | "onAuth" | "onMailFrom" | "onRcptTo" | "onData" | "onClose"> = {
    ...connectHandlers(context),
    onAuth: authHandler(context),
    onMailFrom: mailFromHandler(context),
    onRcptTo: rcptToHandler(),
    onData: dataHandler(context),
  };

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
        await Promise.all(
          listeners.map(({ server }) => new Promise<void>((resolve) => (server.server.listening ? server.close(resolve) : resolve()))),
        );
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
        const drained = sessions.drained();
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
        context.worker.close?.();
      })();
      return closing;
    },
  };
}
