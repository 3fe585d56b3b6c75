import { createJsonLogger } from "../log.ts";
import { loadProberConfig, ProberConfigError, type ProberConfig } from "./config.ts";
import { createProberServer } from "./server.ts";

// `npm run prober`: the mailbox prober, configured by the environment only (config.ts; docs/operations.md says where
// it can run).

const logger = createJsonLogger();

let config: ProberConfig;
try {
  config = loadProberConfig();
} catch (error) {
  if (!(error instanceof ProberConfigError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}

const prober = createProberServer(config, { logger });
const port = await prober.listen().catch((error: Error & { code?: string }) => {
  logger.log("error", "prober.listen_failed", { host: config.host, code: error.code, error: error.message });
  process.exit(1);
});
logger.log("info", "prober.listening", {
  host: config.host,
  port,
  helo_name: config.heloName,
  mail_from: config.mailFrom,
  smtp_port: config.smtpPort,
  allow_private: config.allowPrivate,
  doh_url: config.dohUrl,
});

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    logger.log("info", "prober.stopping", { signal });
    void prober.close().then(() => process.exit(0));
  });
}
