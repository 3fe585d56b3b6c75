import { hostname } from "node:os";
import { z } from "zod";
import { flag, parseEnv, port, positiveInt } from "../config.ts";

// The prober is configured by environment variables only, parsed here once (as the bridge's config.ts does), so
// tests build a config from a plain object.

const envSchema = z.object({
  PROBER_HOST: z.string().min(1).default("127.0.0.1"),
  PROBER_PORT: port.default(2580),
  /** The Worker's PROBER_SECRET: every request is signed with it. */
  PROBER_SECRET: z.string().min(16, "must be the Worker's PROBER_SECRET (at least 16 characters)"),
  /** Requests whose body is being read before its signature can be checked; more are refused with 503. */
  PROBER_MAX_UNVERIFIED_REQUESTS: positiveInt.max(10_000).default(32),
  /** How long a request, headers and body, may take to arrive; a connection silent that long is closed too. */
  PROBER_REQUEST_TIMEOUT_MS: positiveInt.min(100).default(5_000),
  /** The EHLO name: it should be this host's PTR name, and resolve back to its IP. */
  PROBE_HELO_NAME: z.string().min(1).default(hostname()),
  /** The MAIL FROM of every probe; its domain should publish SPF for this host's IP. Default postmaster@<HELO name>. */
  PROBE_MAIL_FROM: z
    .string()
    .regex(/^[^@\s<>]+@[^@\s<>]+$/, "must be an email address")
    .optional(),
  /** DoH JSON resolver for MX and A/AAAA lookups (the Worker's DOH_URL). */
  DOH_URL: z.url().default("https://cloudflare-dns.com/dns-query"),
  /** The port every MX host is dialled on: 25, except in tests and the dev stack. */
  PROBE_SMTP_PORT: port.default(25),
  /** Let MX hosts resolve to private, loopback and link-local addresses: dev and tests only. */
  PROBE_ALLOW_PRIVATE: flag,
  /** MX hosts tried for one address at most, most preferred first, as MTAs do (Postfix: 5 addresses by default). */
  PROBE_MAX_MX_HOSTS: positiveInt.max(20).default(5),
  /** Connections one MX host gets at once for bulk chunks, across every request. */
  PROBE_CONNECTIONS_PER_HOST: z.coerce.number().int().min(1).max(2).default(2),
  /** Connections one MX host gets on top of those, for single checks only, so bulk jobs never make one wait. */
  PROBE_SINGLE_CONNECTIONS_PER_HOST: z.coerce.number().int().min(0).max(2).default(1),
  /** RCPTs one connection carries before it is closed (RSET between transactions of PROBE_RCPTS_PER_TRANSACTION). */
  PROBE_RCPTS_PER_CONNECTION: positiveInt.max(1_000).default(200),
  PROBE_RCPTS_PER_TRANSACTION: positiveInt.max(100).default(50),
  /** The least time between two connections opened to one MX host. */
  PROBE_HOST_CONNECT_GAP_MS: z.coerce.number().int().min(0).default(250),
  /** How long one SMTP reply (the greeting included) may take. */
  PROBE_COMMAND_TIMEOUT_MS: positiveInt.default(30_000),
  /** When to try a greylisted address again if the reply names no delay. */
  PROBE_GREYLIST_RETRY_MS: positiveInt.default(60_000),
});

export interface ProberConfig {
  host: string;
  port: number;
  secret: string;
  maxUnverifiedRequests: number;
  requestTimeoutMs: number;
  heloName: string;
  mailFrom: string;
  dohUrl: string;
  smtpPort: number;
  allowPrivate: boolean;
  maxMxHosts: number;
  connectionsPerHost: number;
  singleConnectionsPerHost: number;
  rcptsPerConnection: number;
  rcptsPerTransaction: number;
  hostConnectGapMs: number;
  commandTimeoutMs: number;
  greylistRetryMs: number;
}

export class ProberConfigError extends Error {
  override name = "ProberConfigError";
}

/** Parses the environment (process.env by default); throws a ProberConfigError naming every bad variable. */
export function loadProberConfig(env: Record<string, string | undefined> = process.env): ProberConfig {
  const e = parseEnv(envSchema, env, (message) => new ProberConfigError(message), "smtp-bridge prober");
  return {
    host: e.PROBER_HOST,
    port: e.PROBER_PORT,
    secret: e.PROBER_SECRET,
    maxUnverifiedRequests: e.PROBER_MAX_UNVERIFIED_REQUESTS,
    requestTimeoutMs: e.PROBER_REQUEST_TIMEOUT_MS,
    heloName: e.PROBE_HELO_NAME,
    mailFrom: e.PROBE_MAIL_FROM ?? `postmaster@${e.PROBE_HELO_NAME}`,
    dohUrl: e.DOH_URL,
    smtpPort: e.PROBE_SMTP_PORT,
    allowPrivate: e.PROBE_ALLOW_PRIVATE,
    maxMxHosts: e.PROBE_MAX_MX_HOSTS,
    connectionsPerHost: e.PROBE_CONNECTIONS_PER_HOST,
    singleConnectionsPerHost: e.PROBE_SINGLE_CONNECTIONS_PER_HOST,
    rcptsPerConnection: e.PROBE_RCPTS_PER_CONNECTION,
    rcptsPerTransaction: Math.min(e.PROBE_RCPTS_PER_TRANSACTION, e.PROBE_RCPTS_PER_CONNECTION),
    hostConnectGapMs: e.PROBE_HOST_CONNECT_GAP_MS,
    commandTimeoutMs: e.PROBE_COMMAND_TIMEOUT_MS,
    greylistRetryMs: e.PROBE_GREYLIST_RETRY_MS,
  };
}
