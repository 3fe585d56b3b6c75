// Throughput of the SMTP relay: messages accepted per second with 10 concurrent pooled nodemailer clients
// (STARTTLS + AUTH, one connection each, reused), through the real bridge into the Worker, side by side with a bare
// smtp-server that discards each message, on the same machine in the same run; plus the bridge's peak RSS, and
// POST /send with 10 pooled HTTP connections, alternated with the bridge over 3 rounds: bridge / direct is the ratio
// (goal ≥ 0.9), the share of the Worker's own rate that survives the SMTP hop.
// With --large: the bridge's memory with big messages instead, `parallel` nodemailer clients (10) each sending one
// message of `mib` MiB (20) at the same time; its peak RSS should grow by about the bytes in flight, not a multiple.
//
// Needs the local stack (`npm run dev`, or on other ports:
//   WORKER_PORT=38787 DOH_PORT=38053 SINK_SMTP_PORT=31025 SINK_HTTP_PORT=38025 \
//   BRIDGE_SMTP_PORT=32587 BRIDGE_ALT_PORT=32525 BRIDGE_SMTPS_PORT=32465 npm run dev)
// then: WORKER_PORT=38787 DOH_PORT=38053 npx tsx scripts/bench/smtp-bridge.ts [messages=1000]
//   or: WORKER_PORT=38787 DOH_PORT=38053 npx tsx scripts/bench/smtp-bridge.ts --large [parallel=10] [mib=20]
// It starts its own bridge process (so it can read its peak RSS), sets up a verified bench domain on the demo
// account, tops up the credits the run needs, and stops the bridge afterwards.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import nodemailer from "nodemailer";
import { SMTPServer } from "smtp-server";
import { z } from "zod";
import { generateSelfSignedCertificate } from "../../smtp-bridge/src/tls.ts";
import { readDevVars } from "../lib/dev-vars.ts";
import { percentile } from "./stats.ts";

const env = z
  .object({
    WORKER_PORT: z.coerce.number().int().default(8787),
    DOH_PORT: z.coerce.number().int().default(8053),
    DEV_HOST: z.string().default("127.0.0.1"),
    DEV_STATE_DIR: z.string().default(".dev"),
  })
  .parse(process.env);
const large = process.argv[2] === "--large";
const args = process.argv.slice(large ? 3 : 2).map(Number);
const total = large ? (args[0] ?? 10) : (args[0] ?? 1000);
const clients = large ? total : 10;
const largeMessageBytes = (args[1] ?? 20) * 1024 * 1024;
const workerUrl = `http://${env.DEV_HOST}:${env.WORKER_PORT}`;
const devVars = readDevVars();
const demoPath = `${env.DEV_STATE_DIR}/demo.json`;
if (!existsSync(demoPath)) throw new Error(`${demoPath} not found: start the stack with npm run dev first (same DEV_STATE_DIR)`);
const demo = JSON.parse(readFileSync(demoPath, "utf8")) as { account_id: string; api_key: string; smtp?: { username: string; password: string } };
if (!demo.smtp) throw new Error(`${demoPath} has no SMTP credential: restart npm run dev to seed one`);
const smtpCredential = demo.smtp;

async function api<T>(path: string, init: { method?: string; body?: unknown; admin?: boolean } = {}): Promise<T> {
  const response = await fetch(`${workerUrl}${path}`, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: { Authorization: `Bearer ${init.admin ? devVars.ADMIN_TOKEN : demo.api_key}`, "Content-Type": "application/json" },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
}

/** A verified sending domain for the run: records published into the dev DoH zone, then checked by the Worker. */
async function benchDomain(): Promise<string> {
  const name = `bench-${Date.now().toString(36)}.test`;
  const domain = await api<{ id: string; records: { name: string; value: string }[] }>("/api/v1/domains", { body: { name } });
  for (const record of domain.records) {
    const published = await fetch(`http://${env.DEV_HOST}:${env.DOH_PORT}/zone/${encodeURIComponent(record.name)}`, {
      method: "PUT",
      body: JSON.stringify({ TXT: [record.value] }),
    });
    if (!published.ok) throw new Error(`publishing ${record.name} failed: ${published.status}`);
  }
  const verified = await api<{ status: string }>(`/api/v1/domains/${domain.id}/verify`, { method: "POST" });
  if (verified.status !== "verified") throw new Error(`bench domain ${name} did not verify`);
  return name;
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createNetServer().listen(0, env.DEV_HOST, () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });

const message = (from: string, i: number) => ({
  from: `Bench <${from}>`,
  to: `reader${i % 50}@example.org`,
  subject: `Bench message ${i}`,
  text: `Hello,\n\n${"This is a benchmark paragraph of ordinary length. ".repeat(30)}\n`,
  html: `<p>Hello,</p>${"<p>This is a benchmark paragraph of ordinary length.</p>".repeat(30)}`,
});

type RunResult = { accepted: number; failed: number; seconds: number; latencies: number[]; firstError?: string };

/**
 * `clients` workers taking message numbers from one counter until `total` are sent; `send` resolves for an accepted
 * message and throws with the reason for a refused one.
 */
async function drive(workers: number, send: (worker: number, i: number) => Promise<void>): Promise<RunResult> {
  const latencies: number[] = [];
  let accepted = 0;
  let failed = 0;
  let firstError: string | undefined;
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      while (next < total) {
        const i = next++;
        const t0 = performance.now();
        try {
          await send(worker, i);
          accepted++;
          latencies.push(performance.now() - t0);
        } catch (error) {
          failed++;
          firstError ??= (error as Error).message;
        }
      }
    }),
  );
  return { accepted, failed, seconds: (performance.now() - started) / 1000, latencies, firstError };
}

/** `clients` pooled transports, one connection each, each sending its share back to back. */
async function run(port: number, user: string, pass: string, from: string): Promise<RunResult> {
  const transports = Array.from({ length: clients }, () =>
    nodemailer.createTransport({
      host: env.DEV_HOST,
      port,
      secure: false,
      requireTLS: true,
      tls: { rejectUnauthorized: false },
      auth: { user, pass },
      pool: true,
      maxConnections: 1,
      maxMessages: Infinity,
    }),
  );
  const result = await drive(clients, async (worker, i) => {
    await transports[worker]!.sendMail(message(from, i));
  });
  for (const transport of transports) transport.close();
  return result;
}

/** The same messages through POST /send with 10 concurrent HTTP clients: the Worker's own rate, for scale. */
async function runApi(from: string): Promise<RunResult> {
  return drive(clients, async (_, i) => {
    const mail = message(from, i);
    const response = await fetch(`${workerUrl}/api/v1/send`, {
      method: "POST",
      headers: { Authorization: `Bearer ${demo.api_key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ from: mail.from, to: [mail.to], subject: mail.subject, text: mail.text, html: mail.html }),
    });
    if (response.status !== 202) throw new Error(`${response.status} ${await response.text()}`);
  });
}

/** Resident set size of a process in MiB, where /proc exists: VmHWM is the peak so far, VmRSS the current one. */
function rssMiB(pid: number, field: "VmHWM" | "VmRSS"): number | undefined {
  try {
    const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}
const showMiB = (value: number | undefined) => (value === undefined ? "n/a (no /proc)" : `${value.toFixed(1)} MiB`);

/**
 * A message of `bytes` bytes (to within one line): a short text part and a random attachment filling the rest, in
 * base64 lines of 76 characters as mail clients send it.
 */
function largeMessage(from: string, bytes: number): Buffer {
  const boundary = "bench-boundary-0123456789";
  const head = [
    `From: Bench <${from}>`,
    "To: reader@example.org",
    "Subject: Bench large message",
    "MIME-Version: 1.0",
    `Content-Type: multipart/mixed; boundary="${boundary}"`,
    "",
    `--${boundary}`,
    "Content-Type: text/plain; charset=utf-8",
    "",
    "A large attachment follows.",
    `--${boundary}`,
    "Content-Type: application/octet-stream",
    "Content-Transfer-Encoding: base64",
    'Content-Disposition: attachment; filename="bench.bin"',
    "",
    "",
  ].join("\r\n");
  const tail = `--${boundary}--\r\n`;
  // a full line is 78 bytes (76 characters + CRLF) and carries 57 bytes of the attachment
  const lines = Math.floor((bytes - Buffer.byteLength(head) - Buffer.byteLength(tail)) / 78);
  const body = randomBytes(lines * 57)
    .toString("base64")
    .replace(/.{76}/g, "$&\r\n");
  return Buffer.from(`${head}${body}${tail}`);
}

/** `clients` separate connections, each sending one large message, all at once. */
async function runLarge(port: number, user: string, pass: string, from: string, raw: Buffer): Promise<RunResult> {
  const run = randomBytes(6).toString("hex");
  return drive(clients, async (_worker, i) => {
    const transport = nodemailer.createTransport({
      host: env.DEV_HOST,
      port,
      secure: false,
      requireTLS: true,
      tls: { rejectUnauthorized: false },
      auth: { user, pass },
    });
    try {
      // A Message-ID of its own: the Worker takes byte-identical submissions as retries of one message (docs/smtp-relay.md).
      const messageId = Buffer.from(`Message-ID: <bench-large-${run}-${i}@${from.split("@")[1]}>\r\n`);
      await transport.sendMail({ envelope: { from, to: ["reader@example.org"] }, raw: Buffer.concat([messageId, raw]) });
    } finally {
      transport.close();
    }
  });
}

// --- setup ---
const from = `bench@${await benchDomain()}`;
await api(`/admin/v1/accounts/${demo.account_id}/credits`, { admin: true, body: { send: total * 8, note: "smtp bridge bench" } });
await api(`/admin/v1/accounts/${demo.account_id}`, {
  admin: true,
  method: "PATCH",
  body: { daily_send_limit: 1_000_000, rate_limit_per_minute: 1_000_000 },
});

const bridgePorts = { smtp: await freePort(), alt: await freePort(), smtps: await freePort() };
// tsx as a loader inside this Node binary (not the tsx CLI, which runs a second process), so bridge.pid is the
// process whose memory is measured
const bridge = spawn(process.execPath, ["--import", "tsx", "smtp-bridge/src/main.ts"], {
  stdio: ["ignore", "ignore", "inherit"],
  env: {
    ...process.env,
    NODE_ENV: "development",
    WORKER_URL: workerUrl,
    BRIDGE_SECRET: devVars.BRIDGE_SECRET ?? "",
    SMTP_HOST: env.DEV_HOST,
    SMTP_HOSTNAME: "localhost",
    SMTP_PORT: String(bridgePorts.smtp),
    SMTP_ALT_PORT: String(bridgePorts.alt),
    SMTPS_PORT: String(bridgePorts.smtps),
    MAX_CONNECTIONS_PER_IP: "50",
    // the local Worker can take more than the default 25 s over ten 27 MB bodies at once; what --large measures is
    // the bridge's memory, so it waits for the answer rather than giving up with 451 4.3.0
    ...(large ? { WORKER_TIMEOUT_MS: "120000" } : {}),
  },
});
const bridgeReady = async () => {
  for (let i = 0; i < 100; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const probe = createNetServer();
      probe.once("error", () => resolve(true)).listen(bridgePorts.smtp, env.DEV_HOST, () => probe.close(() => resolve(false)));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("the bridge did not start");
};
await bridgeReady();

const row = (name: string, result: RunResult) =>
  `${name.padEnd(28)} ${String(result.accepted).padStart(8)} ${String(result.failed).padStart(6)} ${result.seconds.toFixed(2).padStart(8)} ${(result.accepted / result.seconds).toFixed(1).padStart(9)} ${percentile(result.latencies, 50).toFixed(1).padStart(8)} ${percentile(result.latencies, 95).toFixed(1).padStart(8)}`;
const header = `${"target".padEnd(28)} ${"accepted".padStart(8)} ${"failed".padStart(6)} ${"seconds".padStart(8)} ${"msg/s".padStart(9)} ${"p50 ms".padStart(8)} ${"p95 ms".padStart(8)}`;

if (large) {
  const raw = largeMessage(from, largeMessageBytes);
  const idle = rssMiB(bridge.pid ?? 0, "VmRSS");
  process.stderr.write(`bench: ${clients} connections at once, one ${raw.length}-byte message each, through the bridge → Worker at ${workerUrl}\n`);
  const result = await runLarge(bridgePorts.smtp, smtpCredential.username, smtpCredential.password, from, raw);
  const lines = [
    header,
    row(`bridge → Worker, ${(raw.length / 1024 / 1024).toFixed(0)} MiB each`, result),
    `bridge RSS idle before the run: ${showMiB(idle)}`,
    `bridge peak RSS: ${showMiB(rssMiB(bridge.pid ?? 0, "VmHWM"))} (${clients} × ${raw.length} bytes sent at once = ${((clients * raw.length) / 1024 / 1024).toFixed(0)} MiB)`,
    ...(result.firstError ? [`first error: ${result.firstError}`] : []),
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
  bridge.kill("SIGTERM");
  process.exit(0);
}

const bareCert = generateSelfSignedCertificate(["localhost"]);
const bare = new SMTPServer({
  ...bareCert,
  authMethods: ["PLAIN", "LOGIN"],
  disableReverseLookup: true,
  logger: false,
  onAuth: (_auth, _session, callback) => callback(null, { user: "bench" }),
  onData(stream, _session, callback) {
    stream.on("data", () => undefined);
    stream.on("end", () => callback(null, "Ok: discarded"));
  },
});
const barePort = await new Promise<number>((resolve) => bare.listen(0, env.DEV_HOST, () => resolve((bare.server.address() as AddressInfo).port)));

process.stderr.write(
  `bench: ${total} messages, ${clients} pooled clients; bare smtp-server first, then 3 alternating rounds of the bridge → Worker at ${workerUrl} and POST /send\n`,
);
const bareResult = await run(barePort, "bench", "bench", from);
// Alternated over rounds so machine noise (2 shared cores) hits both alike; the medians are compared.
const bridgeRounds: RunResult[] = [];
const apiRounds: RunResult[] = [];
for (let round = 0; round < 3; round++) {
  bridgeRounds.push(await run(bridgePorts.smtp, smtpCredential.username, smtpCredential.password, from));
  apiRounds.push(await runApi(from));
}
const rate = (result: RunResult) => result.accepted / result.seconds;
const medianRun = (results: RunResult[]) => [...results].sort((a, b) => rate(a) - rate(b))[Math.floor(results.length / 2)]!;
const bridgeResult = medianRun(bridgeRounds);
const apiResult = medianRun(apiRounds);

const bridgeRss = rssMiB(bridge.pid ?? 0, "VmHWM");

const lines = [
  header,
  row("bare smtp-server (discard)", bareResult),
  row("bridge → Worker (median of 3)", bridgeResult),
  row("POST /send (median of 3)", apiResult),
  `bridge → Worker ${rate(bridgeResult).toFixed(1)} msg/s vs direct POST /send ${rate(apiResult).toFixed(1)} msg/s, both ${clients} pooled ` +
    `connections: ratio ${(rate(bridgeResult) / rate(apiResult)).toFixed(2)} (goal ≥ 0.9)`,
  `bridge peak RSS with ${clients} parallel clients: ${showMiB(bridgeRss)}`,
  ...[bareResult, ...bridgeRounds, ...apiRounds].flatMap((result) => (result.firstError ? [`first error: ${result.firstError}`] : [])),
];
process.stdout.write(`${lines.join("\n")}\n`);

bridge.kill("SIGTERM");
await new Promise<void>((resolve) => bare.close(() => resolve()));
