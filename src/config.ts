// The Worker's configuration: every var and secret is read and checked here, once per `env` object, with its default
// in this one place. Bindings (DB, BLOBS, queues, Durable Objects) stay on `env`. wrangler.toml sets only what the
// local stack needs to differ from these defaults.

import { z } from "zod";

const flag = z
  .enum(["true", "false"])
  .default("false")
  .transform((value) => value === "true");
const optionalText = z
  .string()
  .optional()
  .transform((value) => value || undefined);

// A value that is not JSON stays a string, which the schema then refuses with its own message.
const parseJson = (value: string): unknown => {
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
};

const configSchema = z.object({
  /** DNS-over-HTTPS resolver (JSON API). */
  DOH_URL: z.url().default("https://cloudflare-dns.com/dns-query"),
  /** Root of the public links (one-click unsubscribe) and the EHLO name sent to the smarthost. */
  SITE_URL: z.url().default("http://127.0.0.1:8787"),
  /** The include a sending domain's SPF record must carry. */
  SPF_INCLUDE: z.string().min(1).default("_spf.mailforge.dev"),
  /** Lets webhook endpoints and their DNS answers point at private addresses (local development only). */
  ALLOW_PRIVATE_WEBHOOK_URLS: flag,
  SMTP_UPSTREAM_HOST: optionalText,
  SMTP_UPSTREAM_PORT: z.preprocess((value) => (value === "" ? undefined : value), z.coerce.number().int().min(1).max(65535).optional()),
  SMTP_UPSTREAM_SECURE: z.enum(["tls", "starttls", "off"]).default("tls"),
  SMTP_UPSTREAM_USER: optionalText,
  SMTP_UPSTREAM_PASS: optionalText,
  /** First delay before retrying a delivery after an SMTP 4xx or a connection failure; it doubles each attempt. */
  SEND_RETRY_BASE_SECONDS: z.coerce.number().int().min(0).default(60),
  /** Delivery attempts before a message fails and is refunded. */
  SEND_MAX_ATTEMPTS: z.coerce.number().int().min(1).default(6),
  /** How messages leave: SMTP to the smarthost above, or Cloudflare Email Sending through the `EMAIL` binding. */
  TRANSPORT: z.enum(["smtp", "cloudflare"]).default("smtp"),
  /**
   * Domain of the per-message return path (`bounces+<token>@BOUNCE_DOMAIN`) used with SMTP; its MX must reach this
   * Worker's email() handler (Cloudflare Email Routing). Unset: the From address is the return path.
   */
  BOUNCE_DOMAIN: optionalText,
  /** Amazon SNS topics (comma-separated ARNs) whose SES notifications POST /feedback/ses accepts; unset: none. */
  SES_SNS_TOPIC_ARNS: optionalText,
  /** An extra origin trusted to serve SNS signing certificates besides sns.<region>.amazonaws.com: local tests only. */
  SNS_TRUSTED_CERT_ORIGIN: optionalText,
  /** Recipients a domain must have sent to today before its bounce and complaint rates can hold or pause it. */
  REPUTATION_MIN_SENT: z.coerce.number().int().min(1).default(100),
  /** SMTP connections a send-queue batch spreads its messages over, each reused with RSET. */
  SMTP_CONNECTIONS_PER_BATCH: z.coerce.number().int().min(1).max(10).default(5),
  /**
   * Days a finished message (with its recipients, events, feedback and content) and the webhook log are kept; 0 keeps
   * everything. Never 1-29: a message's one-click unsubscribe link needs its row, and CAN-SPAM wants opt-outs honoured
   * for 30 days after sending.
   */
  RETENTION_DAYS: z.preprocess(
    (value) => (value === "" ? undefined : value),
    z.coerce
      .number({ error: "must be a whole number of days" })
      .int("must be a whole number of days")
      .max(3650, "must be at most 3650 days")
      .refine((days) => days === 0 || days >= 30, "must be 0 (keep everything) or at least 30 days: unsubscribe links must work for 30 days")
      .default(30),
  ),
  /** Received mail stored per receiving domain in any rolling hour; past it, mail is refused temporarily (docs/inbound.md). */
  INBOUND_MAX_PER_HOUR: z.coerce.number().int().min(1).default(1000),
  /**
   * Verification credits granted each calendar month (UTC) per plan, as JSON (`{"free":100}`) or a wrangler.toml
   * table; a plan left out gets none. The cron grants them: docs/verification.md ("Free monthly credits").
   */
  MONTHLY_VERIFY_CREDITS: z.preprocess(
    (value) => (value === undefined || value === "" ? undefined : typeof value === "string" ? parseJson(value) : value),
    z.record(z.string().min(1), z.int("must be a whole number of credits").min(0)).default({ free: 100 }),
  ),
  /**
   * How long a contact's verification result is reused (free) before a campaign's pre-send checks or
   * POST /contacts/verify check the address again; 0 checks it every time.
   */
  VERIFY_FRESH_DAYS: z.coerce.number().int().min(0).max(3650).default(30),
  ADMIN_TOKEN: optionalText,
  BRIDGE_SECRET: optionalText,
  /** The mailbox prober (smtp-bridge, `npm run prober`); with PROBER_SECRET, verification asks mailboxes over SMTP. */
  PROBER_URL: z.preprocess((value) => (value === "" ? undefined : value), z.url({ protocol: /^https?$/ }).optional()),
  PROBER_SECRET: z.preprocess(
    (value) => (value === "" ? undefined : value),
    z.string().min(16, "must be the prober's PROBER_SECRET (at least 16 characters)").optional(),
  ),
  /**
   * From of the mail the platform sends for itself (sign-in links, invitations): `Name <address>` or an address. Its
   * domain's DKIM key signs it when that domain is verified in any account. Unset: `Mailforge <no-reply@SITE_URL's host>`.
   */
  SYSTEM_FROM: optionalText,
  /** HMAC key of dashboard session cookies and CSRF tokens; unset, one is derived from DKIM_ENCRYPTION_KEY. */
  SESSION_SECRET: optionalText,
  /** How long a dashboard sign-in lasts. */
  SESSION_TTL_HOURS: z.coerce
    .number()
    .int()
    .min(1)
    .max(24 * 30)
    .default(12),
  /** AES-GCM key (32 bytes, base64) for DKIM keys and webhook secrets at rest; also keys unsubscribe links. */
  DKIM_ENCRYPTION_KEY: z.string().min(1, "DKIM_ENCRYPTION_KEY is not set"),
  /** An OpenAI-compatible API including `/v1` (OpenAI, Workers AI's /v1, AI Gateway, Ollama, vLLM, llama.cpp); wins over the `AI` binding. */
  AI_BASE_URL: z.preprocess((value) => (value === "" ? undefined : value), z.url().optional()),
  AI_API_KEY: optionalText,
  /** The model: required with AI_BASE_URL; with the `AI` binding, a Workers AI model name. */
  AI_MODEL: optionalText,
  /** How long one provider call may take before it counts as a time-out (retried). */
  AI_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(900).default(120),
  /** First delay before retrying a generation after a time-out, 429 or 5xx; it doubles each attempt. */
  AI_RETRY_BASE_SECONDS: z.coerce.number().int().min(0).default(30),
  /** Generation attempts (queue deliveries) before a request fails on provider errors. */
  AI_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(10).default(4),
});

export type Config = {
  dohUrl: string;
  siteUrl: string;
  spfInclude: string;
  allowPrivateWebhookUrls: boolean;
  smtp: { host?: string; port?: number; secure: "tls" | "starttls" | "off"; user?: string; pass?: string };
  send: { retryBaseSeconds: number; maxAttempts: number; connectionsPerBatch: number };
  transport: "smtp" | "cloudflare";
  bounceDomain?: string;
  ses: { topicArns: string[]; trustedCertOrigin?: string };
  reputationMinSent: number;
  /** Verification credits each plan gets every calendar month (UTC). */
  monthlyVerifyCredits: Record<string, number>;
  /** Days a contact's verification result counts as fresh (VERIFY_FRESH_DAYS). */
  verifyFreshDays: number;
  /** Undefined: nothing is purged. */
  retentionDays?: number;
  inboundMaxPerHour: number;
  adminToken?: string;
  bridgeSecret?: string;
  /** Undefined unless both PROBER_URL and PROBER_SECRET are set: mailbox checks are off. */
  prober?: { url: string; secret: string };
  session: { secret?: string; ttlSeconds: number };
  /** SYSTEM_FROM, or its default. */
  systemFrom: string;
  encryptionKey: string;
  ai: { baseUrl?: string; apiKey?: string; model?: string; timeoutMs: number; retryBaseSeconds: number; maxAttempts: number };
};

export class ConfigError extends Error {
  override name = "ConfigError";
}

const parsed = new WeakMap<object, Config>();

/** The configuration of this deployment; throws ConfigError naming every invalid var. */
export function config(env: Env): Config {
  const cached = parsed.get(env);
  if (cached) return cached;
  const result = configSchema.safeParse(env);
  if (!result.success) {
    throw new ConfigError(`invalid configuration: ${result.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ")}`);
  }
  const vars = result.data;
  const value: Config = {
    dohUrl: vars.DOH_URL,
    siteUrl: vars.SITE_URL,
    spfInclude: vars.SPF_INCLUDE,
    allowPrivateWebhookUrls: vars.ALLOW_PRIVATE_WEBHOOK_URLS,
    smtp: {
      host: vars.SMTP_UPSTREAM_HOST,
      port: vars.SMTP_UPSTREAM_PORT,
      secure: vars.SMTP_UPSTREAM_SECURE,
      user: vars.SMTP_UPSTREAM_USER,
      pass: vars.SMTP_UPSTREAM_PASS,
    },
    send: {
      retryBaseSeconds: vars.SEND_RETRY_BASE_SECONDS,
      maxAttempts: vars.SEND_MAX_ATTEMPTS,
      connectionsPerBatch: vars.SMTP_CONNECTIONS_PER_BATCH,
    },
    transport: vars.TRANSPORT,
    bounceDomain: vars.BOUNCE_DOMAIN?.toLowerCase(),
    ses: {
      topicArns: (vars.SES_SNS_TOPIC_ARNS ?? "")
        .split(",")
        .map((arn) => arn.trim())
        .filter(Boolean),
      trustedCertOrigin: vars.SNS_TRUSTED_CERT_ORIGIN,
    },
    reputationMinSent: vars.REPUTATION_MIN_SENT,
    monthlyVerifyCredits: vars.MONTHLY_VERIFY_CREDITS,
    verifyFreshDays: vars.VERIFY_FRESH_DAYS,
    retentionDays: vars.RETENTION_DAYS === 0 ? undefined : vars.RETENTION_DAYS,
    inboundMaxPerHour: vars.INBOUND_MAX_PER_HOUR,
    adminToken: vars.ADMIN_TOKEN,
    bridgeSecret: vars.BRIDGE_SECRET,
    prober: vars.PROBER_URL && vars.PROBER_SECRET ? { url: vars.PROBER_URL.replace(/\/+$/, ""), secret: vars.PROBER_SECRET } : undefined,
    session: { secret: vars.SESSION_SECRET, ttlSeconds: vars.SESSION_TTL_HOURS * 3600 },
    systemFrom: vars.SYSTEM_FROM ?? `Mailforge <no-reply@${new URL(vars.SITE_URL).hostname}>`,
    encryptionKey: vars.DKIM_ENCRYPTION_KEY,
    ai: {
      baseUrl: vars.AI_BASE_URL,
      apiKey: vars.AI_API_KEY,
      model: vars.AI_MODEL,
      timeoutMs: vars.AI_TIMEOUT_SECONDS * 1000,
      retryBaseSeconds: vars.AI_RETRY_BASE_SECONDS,
      maxAttempts: vars.AI_MAX_ATTEMPTS,
    },
  };
  parsed.set(env, value);
  return value;
}
