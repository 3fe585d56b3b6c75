import { ConfigError, loadConfig, type BridgeConfig } from "./config.ts";
import { createJsonLogger } from "./log.ts";
import { createServer } from "./server.ts";

// `npm run bridge`: configured by the environment only (see config.ts and the README's "SMTP relay" section).

const logger = createJsonLogger();

let config: BridgeConfig;
try {
  config = loadConfig();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}

const bridge = createServer(config, { logger });
const ports = await bridge.listen().catch((error: Error & { code?: string }) => {
  // EADDRINUSE / EACCES: say which, in the same format as everything else, instead of a stack trace
  logger.log("error", "bridge.listen_failed", { host: config.host, code: error.code, error: error.message });
  process.exit(1);
});
logger.log("info", "bridge.listening", {
  host: config.host,
  smtp_port: ports.smtp,
  alt_port: ports.alt,
  smtps_port: ports.smtps,
  worker_url: config.workerUrl,
  self_signed_certificate: bridge.tls.selfSigned,
  insecure_auth_on_loopback: config.allowInsecureAuthOnLoopback,
  max_message_bytes: config.maxMessageBytes,
  max_bytes_in_flight: config.maxBytesInFlight,
  spool_dir: config.spoolDir,
});

let stopping = false;
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    // a second signal means "now": the operator has given up waiting for sessions to finish
    if (stopping) process.exit(1);
    stopping = true;
    logger.log("info", "bridge.stopping", { signal, open_sessions: bridge.sessionCount, timeout_ms: config.shutdownTimeoutMs });
    void bridge.close().then(() => {
      logger.log("info", "bridge.stopped", {});
      process.exit(0);
    });
  });
}
