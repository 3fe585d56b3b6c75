// `npm run dev`: the whole local stack in one command. Applies D1 migrations (to `DB` and every account database), starts the dev DoH server and the
// dev mail sink (in this process), the Worker (wrangler dev) as a child, seeds a demo account idempotently and
// prints what a newcomer needs. Ctrl-C stops everything; state persists in .dev/ for the next run.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { z } from "zod";
import { createDohServer, upsertRecords } from "./dev/doh-server.ts";
import { createMailSink } from "./dev/mail-sink.ts";
import { createMxHosts, DEV_MX_BEHAVIOURS, DEV_MX_ZONE } from "./dev/mx-hosts.ts";
import { copyDashboardAssets } from "./lib/dashboard-assets.ts";
import { devStackFile, devStackUrlFile, readDevVars, type DevStackAddresses } from "./lib/dev-vars.ts";
import { migrateLocalDatabases } from "./lib/local-migrations.ts";
import { seedDemoDomain } from "./lib/seed-domain.ts";

const port = z.coerce.number().int().min(1).max(65535);
const config = z
  .object({
    WORKER_PORT: port.default(8787),
    DOH_PORT: port.default(8053),
    SINK_SMTP_PORT: port.default(1025),
    SINK_HTTP_PORT: port.default(8025),
    // unprivileged stand-ins for the relay's 587 and 465 (STARTTLS and implicit TLS), and 2525 (STARTTLS)
    BRIDGE_SMTP_PORT: port.default(2587),
    BRIDGE_ALT_PORT: port.default(2525),
    BRIDGE_SMTPS_PORT: port.default(2465),
    // the mailbox prober, and the port its demo MX hosts listen on at 127.0.0.2 to 127.0.0.7
    PROBER_PORT: port.default(2580),
    DEV_MX_PORT: port.default(2555),
    DEV_STATE_DIR: z.string().min(1).default(".dev"),
    DEV_HOST: z.string().default("127.0.0.1"),
  })
  .parse(process.env);

const stateDir = config.DEV_STATE_DIR;
const zonePath = `${stateDir}/zone.json`;
const demoPath = `${stateDir}/demo.json`;
const workerUrl = `http://${config.DEV_HOST}:${config.WORKER_PORT}`;
const children: ChildProcess[] = [];
// Offline-friendly: no metrics, update checks or `Request.cf` download from wrangler and miniflare, in the children
// and in this process (it migrates the local databases through wrangler's API).
Object.assign(process.env, { WRANGLER_SEND_METRICS: "false", WRANGLER_DISABLE_UPDATE_CHECK: "true", CLOUDFLARE_CF_FETCH_ENABLED: "false" });
const childEnv = process.env;

function ensureDevVars() {
  if (existsSync(".dev.vars")) return;
  // First run: secrets of our own, never the example's placeholders.
  const secret = () => randomBytes(24).toString("base64url");
  writeFileSync(
    ".dev.vars",
    [
      `ADMIN_TOKEN="${secret()}"`,
      `BRIDGE_SECRET="${secret()}"`,
      `PROBER_SECRET="${secret()}"`,
      `SESSION_SECRET="${secret()}"`,
      `DKIM_ENCRYPTION_KEY="${randomBytes(32).toString("base64")}"`,
      `SMTP_UPSTREAM_USER=""`,
      `SMTP_UPSTREAM_PASS=""`,
      "",
    ].join("\n"),
  );
}

/** A .dev.vars written before the mailbox prober existed gets its secret added. */
function ensureProberSecret() {
  if (readDevVars().PROBER_SECRET) return;
  appendFileSync(".dev.vars", `PROBER_SECRET="${randomBytes(24).toString("base64url")}"\n`);
}

function startChild(name: string, command: string, args: string[], env: NodeJS.ProcessEnv = childEnv): ChildProcess {
  // Its own process group, so stopping it also stops what it spawned (wrangler runs workerd).
  const child = spawn(command, args, { stdio: ["ignore", "inherit", "inherit"], detached: true, env });
  child.once("exit", (code, signal) => {
    if (!stopping) {
      console.error(`${name} stopped (${signal ?? code}); stopping the stack`);
      void stop(1);
    }
  });
  children.push(child);
  return child;
}

async function waitFor(url: string, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  throw new Error(`${url} did not answer within ${timeoutMs / 1000} s`);
}

async function waitForPort(port: number, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, config.DEV_HOST);
      const done = (listening: boolean) => {
        socket.destroy();
        resolve(listening);
      };
      socket.once("connect", () => done(true)).once("error", () => done(false));
      socket.setTimeout(1000, () => done(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`nothing listens on ${config.DEV_HOST}:${port} after ${timeoutMs / 1000} s`);
}

type SmtpCredential = { id: string; username: string; password: string };
type Demo = { account_id: string; api_key: string; smtp?: SmtpCredential };

async function seedDemoAccount(adminToken: string): Promise<Demo> {
  if (existsSync(demoPath)) {
    const demo = JSON.parse(readFileSync(demoPath, "utf8")) as Demo;
    const me = await fetch(`${workerUrl}/api/v1/me`, { headers: { Authorization: `Bearer ${demo.api_key}` } });
    if (me.ok) return demo;
  }
  const response = await fetch(`${workerUrl}/admin/v1/accounts`, {
    method: "POST",
    headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({
      name: "Demo",
      plan: "starter",
      features: ["email_api", "smtp_relay", "campaigns", "automations", "ai"],
      send_credits: 1000,
      verify_credits: 1000,
    }),
  });
  if (response.status !== 201) throw new Error(`seeding the demo account failed: ${response.status} ${await response.text()}`);
  const account = (await response.json()) as { id: string; api_key: string };
  const demo = { account_id: account.id, api_key: account.api_key };
  writeFileSync(demoPath, JSON.stringify(demo, null, 2));
  return demo;
}

/** The demo account's SMTP credential: reused while it is still active, else a new one (its password shows once). */
async function seedSmtpCredential(demo: Demo): Promise<SmtpCredential> {
  const headers = { Authorization: `Bearer ${demo.api_key}`, "Content-Type": "application/json" };
  if (demo.smtp) {
    const listed = await fetch(`${workerUrl}/api/v1/smtp-credentials`, { headers });
    const active = listed.ok ? ((await listed.json()) as { data: { id: string }[] }).data : [];
    if (active.some((credential) => credential.id === demo.smtp?.id)) return demo.smtp;
  }
  const response = await fetch(`${workerUrl}/api/v1/smtp-credentials`, {
    method: "POST",
    headers,
    body: JSON.stringify({ name: "Demo (npm run dev)" }),
  });
  if (response.status !== 201) throw new Error(`creating the demo SMTP credential failed: ${response.status} ${await response.text()}`);
  const created = (await response.json()) as SmtpCredential;
  const smtp = { id: created.id, username: created.username, password: created.password };
  writeFileSync(demoPath, JSON.stringify({ ...demo, smtp }, null, 2));
  return smtp;
}

const demoOwner = "owner@demo.mailforge.test";

/** The demo account's owner, invited once (the invitation, like every sign-in link, lands in the mail sink). */
async function seedDemoOwner(demo: Demo): Promise<void> {
  const headers = { Authorization: `Bearer ${demo.api_key}`, "Content-Type": "application/json" };
  const listed = await fetch(`${workerUrl}/api/v1/members?limit=100`, { headers });
  if (!listed.ok) throw new Error(`listing the demo account's members failed: ${listed.status} ${await listed.text()}`);
  if (((await listed.json()) as { data: { email: string }[] }).data.some((member) => member.email === demoOwner)) return;
  const invited = await fetch(`${workerUrl}/api/v1/members`, { method: "POST", headers, body: JSON.stringify({ email: demoOwner, role: "owner" }) });
  if (invited.status !== 201) throw new Error(`inviting the demo owner failed: ${invited.status} ${await invited.text()}`);
}

let stopping = false;
async function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  for (const child of children) {
    if (child.pid && child.exitCode === null) {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {
        // already gone
      }
    }
  }
  await Promise.allSettled([doh.close(), sink.close(), mxHosts.close()]);
  process.exit(code);
}

mkdirSync(stateDir, { recursive: true });
// The state directory holds live keys and passwords: keep it out of git wherever DEV_STATE_DIR points.
writeFileSync(`${stateDir}/.gitignore`, "*\n");
writeFileSync(devStackUrlFile(stateDir), `${workerUrl}\n`);
// So `npm run dkim:check` and `npm run admin` find this stack on whatever ports it was given.
writeFileSync(
  devStackFile(stateDir),
  `${JSON.stringify({
    workerUrl,
    dohUrl: `http://${config.DEV_HOST}:${config.DOH_PORT}/dns-query`,
    sinkUrl: `http://${config.DEV_HOST}:${config.SINK_HTTP_PORT}`,
  } satisfies DevStackAddresses)}\n`,
);
if (!existsSync(zonePath)) writeFileSync(zonePath, "{}\n");
ensureDevVars();
ensureProberSecret();
copyDashboardAssets();
const devVars = readDevVars();

const doh = createDohServer({ zonePath });
const sink = createMailSink();
const mxHosts = createMxHosts(DEV_MX_BEHAVIOURS);
process.once("SIGINT", () => void stop(0));
process.once("SIGTERM", () => void stop(0));

await doh.listen(config.DOH_PORT, config.DEV_HOST);
await sink.listen({ smtpPort: config.SINK_SMTP_PORT, httpPort: config.SINK_HTTP_PORT, host: config.DEV_HOST });
await mxHosts.listen(config.DEV_MX_PORT);
for (const [name, records] of Object.entries(DEV_MX_ZONE)) await upsertRecords(zonePath, name, records);

await migrateLocalDatabases(`${stateDir}/state`);

const vars = {
  DOH_URL: `http://${config.DEV_HOST}:${config.DOH_PORT}/dns-query`,
  SITE_URL: workerUrl,
  SMTP_UPSTREAM_HOST: config.DEV_HOST,
  SMTP_UPSTREAM_PORT: String(config.SINK_SMTP_PORT),
  SMTP_UPSTREAM_SECURE: "off",
  ALLOW_PRIVATE_WEBHOOK_URLS: "true",
  // VERP return paths; DSNs for them are handed to the email() handler at /cdn-cgi/handler/email (docs/deliverability.md).
  BOUNCE_DOMAIN: "bounces.mailforge.test",
  // sign-in links and invitations; the demo domain is verified, so they are DKIM-signed
  SYSTEM_FROM: "Mailforge <no-reply@demo.mailforge.test>",
  // mailbox checks (PROBER_SECRET is in .dev.vars)
  PROBER_URL: `http://${config.DEV_HOST}:${config.PROBER_PORT}`,
};
startChild("wrangler dev", "wrangler", [
  "dev",
  "--ip",
  config.DEV_HOST,
  "--port",
  String(config.WORKER_PORT),
  "--persist-to",
  `${stateDir}/state`,
  "--test-scheduled",
  "--show-interactive-dev-session=false",
  ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
]);
startChild("smtp bridge", "tsx", ["smtp-bridge/src/main.ts"], {
  ...childEnv,
  NODE_ENV: "development",
  WORKER_URL: workerUrl,
  BRIDGE_SECRET: devVars.BRIDGE_SECRET ?? "",
  SMTP_HOST: config.DEV_HOST,
  SMTP_HOSTNAME: "localhost",
  SMTP_PORT: String(config.BRIDGE_SMTP_PORT),
  SMTP_ALT_PORT: String(config.BRIDGE_ALT_PORT),
  SMTPS_PORT: String(config.BRIDGE_SMTPS_PORT),
  // local clients (swaks, scripts) may log in without TLS; anything off-loopback still needs STARTTLS
  ALLOW_INSECURE_AUTH_ON_LOOPBACK: "true",
});
startChild("mailbox prober", "tsx", ["smtp-bridge/src/prober/main.ts"], {
  ...childEnv,
  PROBER_HOST: config.DEV_HOST,
  PROBER_PORT: String(config.PROBER_PORT),
  PROBER_SECRET: readDevVars().PROBER_SECRET ?? "",
  PROBE_HELO_NAME: "localhost",
  PROBE_MAIL_FROM: "probe@demo.mailforge.test",
  DOH_URL: vars.DOH_URL,
  PROBE_SMTP_PORT: String(config.DEV_MX_PORT),
  // the demo MX hosts are on loopback; nothing but dev and tests sets this
  PROBE_ALLOW_PRIVATE: "1",
});
await waitFor(`${workerUrl}/api/v1/openapi.json`);

const adminToken = devVars.ADMIN_TOKEN;
if (!adminToken) throw new Error(".dev.vars has no ADMIN_TOKEN");
const demo = await seedDemoAccount(adminToken);
const demoDomain = await seedDemoDomain(workerUrl, demo.api_key, zonePath, "demo.mailforge.test");
await seedDemoOwner(demo);
await waitForPort(config.BRIDGE_SMTP_PORT);
const smtp = await seedSmtpCredential(demo);

console.log(`
Mailforge is running.

  API            ${workerUrl}/api/v1        (reference: ${workerUrl}/api/v1/docs)
  Dashboard      ${workerUrl}/dashboard/sign-in: sign in as ${demoOwner}; the link and code arrive in the mail sink,
                 http://${config.DEV_HOST}:${config.SINK_HTTP_PORT}/api/messages?to=${demoOwner} (the demo API key signs in too until the owner has)
  Demo API key   ${demo.api_key}
  Operator token ${adminToken}   (npm run admin -- accounts:get ${demo.account_id})
  Mail sink      smtp://${config.DEV_HOST}:${config.SINK_SMTP_PORT}, inbox http://${config.DEV_HOST}:${config.SINK_HTTP_PORT}/api/messages
  DoH server     ${vars.DOH_URL}   (zone: ${zonePath})
  Demo domain    ${demoDomain.name} (verified; its DKIM/SPF/DMARC records are in the dev zone)
  SMTP relay     ${config.DEV_HOST}, ports ${config.BRIDGE_SMTP_PORT} and ${config.BRIDGE_ALT_PORT} (STARTTLS), ${config.BRIDGE_SMTPS_PORT} (implicit TLS); self-signed certificate
                 username ${smtp.username}
                 password ${smtp.password}
                 (kept in ${demoPath}; AUTH without TLS is allowed from loopback in dev only)

  Mailbox checks prober http://${config.DEV_HOST}:${config.PROBER_PORT}, demo MX hosts on 127.0.0.2-7 port ${config.DEV_MX_PORT}:
                 alice@mailbox.test (valid), zed@ (no such mailbox), carol@ (disabled), dave@ (full),
                 anyone@catchall.mailbox.test (catch-all), grace@greylist.mailbox.test (greylisted for 2 s),
                 jane@tarpit.mailbox.test (never greets), jane@busy.mailbox.test (421), alice@fallback.mailbox.test

Try it:
  curl -H "Authorization: Bearer ${demo.api_key}" ${workerUrl}/api/v1/me
  curl -H "Authorization: Bearer ${demo.api_key}" -H "Content-Type: application/json" ${workerUrl}/api/v1/verify -d '{"email": "zed@mailbox.test"}'
  curl -H "Authorization: Bearer ${demo.api_key}" -H "Content-Type: application/json" ${workerUrl}/api/v1/send \\
       -d '{"from": "Demo <hello@${demoDomain.name}>", "to": ["you@example.org"], "subject": "Hi {{name}}", "text": "Hello {{name|there}}!", "variables": {"name": "Ann"}}'
  swaks --server ${config.DEV_HOST}:${config.BRIDGE_SMTP_PORT} --tls --auth-user ${smtp.username} --auth-password ${smtp.password} \\
        --from hello@${demoDomain.name} --to someone@example.org

Ctrl-C stops everything; state is kept in ${stateDir}/ for the next run.
`);
