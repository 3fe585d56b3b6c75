import { hostname, tmpdir } from "node:os";
import { maxRawMessageBytes } from "@mailforge/bridge-contract";
import { z } from "zod";

// The bridge is configured by environment variables only, parsed here once. Nothing else reads process.env, so
// tests build a config from a plain object and the server never depends on the process it runs in.

// Shared with the prober's config (prober/config.ts): the same words for a port, a count and a yes/no setting.
export const port = z.coerce.number().int().min(0).max(65535);
export const positiveInt = z.coerce.number().int().positive();
export const flag = z
  .enum(["true", "false", "1", "0", "yes", "no"], { message: "use true or false" })
  .default("false")
  .transform((value) => value === "true" || value === "1" || value === "yes");

const envSchema = z
  .object({
    SMTP_HOST: z.string().min(1).default("127.0.0.1"),
    SMTP_PORT: port.default(587),
    SMTP_ALT_PORT: port.default(2525),
    SMTPS_PORT: port.default(465),
    /** The name in the greeting and EHLO reply; it should match the certificate. */
    SMTP_HOSTNAME: z.string().min(1).default(hostname()),
    TLS_CERT: z.string().min(1).optional(),
    TLS_KEY: z.string().min(1).optional(),
    NODE_ENV: z.string().default("development"),
    // the most whose /messages request the Worker still takes (the raw message travels base64-encoded in JSON)
    MAX_MESSAGE_BYTES: positiveInt.max(maxRawMessageBytes).default(25 * 1024 * 1024),
    /**
     * The DATA bytes all sessions together may hold while their messages wait for the Worker (spooled to SPOOL_DIR,
     * so this bounds disk use and the load put on the Worker); a message that would go past it gets 451 4.3.1.
     */
    MAX_BYTES_IN_FLIGHT: positiveInt.default(512 * 1024 * 1024),
    SPOOL_DIR: z.string().min(1).default(tmpdir()),
    WORKER_URL: z.url({ protocol: /^https?$/, message: "must be the Worker's http(s) base URL, e.g. http://127.0.0.1:8787" }),
    BRIDGE_SECRET: z.string().min(16, "must be the Worker's BRIDGE_SECRET (at least 16 characters)"),
    ALLOW_INSECURE_AUTH_ON_LOOPBACK: flag,
    /** How long a successful AUTH and a sender check are reused; revocation takes effect within this time. */
    AUTH_CACHE_TTL_MS: z.coerce.number().int().min(0).max(5_000).default(5_000),
    WORKER_TIMEOUT_MS: positiveInt.default(25_000),
    /** Keep-alive connections to the Worker, at most; a message beyond them waits for one to be free. */
    WORKER_MAX_SOCKETS: positiveInt.default(64),
    MAX_CLIENTS: positiveInt.default(1_000),
    MAX_CONNECTIONS_PER_IP: positiveInt.default(20),
    SOCKET_TIMEOUT_MS: positiveInt.default(60_000),
    /** SIGTERM: how long sessions in the middle of a message get to finish before they are cut. */
    SHUTDOWN_TIMEOUT_MS: positiveInt.default(30_000),
  })
  .superRefine((env, ctx) => {
    if (Boolean(env.TLS_CERT) !== Boolean(env.TLS_KEY)) {
      ctx.addIssue({ code: "custom", path: [env.TLS_CERT ? "TLS_KEY" : "TLS_CERT"], message: "set TLS_CERT and TLS_KEY together" });
    }
    if (env.NODE_ENV === "production" && !env.TLS_CERT) {
      ctx.addIssue({
        code: "custom",
        path: ["TLS_CERT"],
        message: "required in production (PEM file paths in TLS_CERT and TLS_KEY); a self-signed certificate is generated only outside production",
      });
    }
    if (env.MAX_BYTES_IN_FLIGHT < env.MAX_MESSAGE_BYTES) {
      ctx.addIssue({
        code: "custom",
        path: ["MAX_BYTES_IN_FLIGHT"],
        message: `must be at least MAX_MESSAGE_BYTES (${env.MAX_MESSAGE_BYTES}), or a message of the announced SIZE could never be taken`,
      });
    }
    if (env.NODE_ENV === "production" && env.ALLOW_INSECURE_AUTH_ON_LOOPBACK) {
      ctx.addIssue({ code: "custom", path: ["ALLOW_INSECURE_AUTH_ON_LOOPBACK"], message: "must not be set in production" });
    }
  });

export interface BridgeConfig {
  host: string;
  /** STARTTLS submission port (587 in production). */
  smtpPort: number;
  /** Second STARTTLS port (2525), for networks that block 587. */
  altPort: number;
  /** Implicit TLS port (465). */
  smtpsPort: number;
  serverName: string;
  /** PEM file paths; undefined: a self-signed pair is generated at start. */
  tls: { certPath: string; keyPath: string } | undefined;
  maxMessageBytes: number;
  /** Total DATA bytes held at once across sessions; past it, 451 4.3.1. */
  maxBytesInFlight: number;
  /** Where messages wait (as unlinked files) between DATA and the Worker's answer. */
  spoolDir: string;
  workerUrl: string;
  bridgeSecret: string;
  allowInsecureAuthOnLoopback: boolean;
  authCacheTtlMs: number;
  workerMaxSockets: number;
  workerTimeoutMs: number;
  maxClients: number;
  maxConnectionsPerIp: number;
  socketTimeoutMs: number;
  shutdownTimeoutMs: number;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * The environment parsed by `schema`, for the bridge and the prober alike; throws `error` naming every bad variable.
 * An empty variable (`TLS_CERT=` in a compose file) means "not set", not "the empty string".
 */
export function parseEnv<T extends z.ZodType>(
  schema: T,
  env: Record<string, string | undefined>,
  error: (message: string) => Error,
  label: string,
): z.output<T> {
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ""));
  const parsed = schema.safeParse(present);
  if (!parsed.success) throw error(`${label}: invalid environment\n${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** Parses the environment (process.env by default); throws a ConfigError naming every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): BridgeConfig {
  const e = parseEnv(envSchema, env, (message) => new ConfigError(message), "smtp-bridge");
  return {
    host: e.SMTP_HOST,
    smtpPort: e.SMTP_PORT,
    altPort: e.SMTP_ALT_PORT,
    smtpsPort: e.SMTPS_PORT,
    serverName: e.SMTP_HOSTNAME,
    tls: e.TLS_CERT && e.TLS_KEY ? { certPath: e.TLS_CERT, keyPath: e.TLS_KEY } : undefined,
    maxMessageBytes: e.MAX_MESSAGE_BYTES,
    maxBytesInFlight: e.MAX_BYTES_IN_FLIGHT,
    spoolDir: e.SPOOL_DIR,
    workerUrl: e.WORKER_URL.replace(/\/+$/, ""),
    bridgeSecret: e.BRIDGE_SECRET,
    allowInsecureAuthOnLoopback: e.ALLOW_INSECURE_AUTH_ON_LOOPBACK,
    authCacheTtlMs: e.AUTH_CACHE_TTL_MS,
    workerTimeoutMs: e.WORKER_TIMEOUT_MS,
    workerMaxSockets: e.WORKER_MAX_SOCKETS,
    maxClients: e.MAX_CLIENTS,
    maxConnectionsPerIp: e.MAX_CONNECTIONS_PER_IP,
    socketTimeoutMs: e.SOCKET_TIMEOUT_MS,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
  };
}
