// A large campaign's fan-out against a running local stack: N contacts imported into one list (the contacts import),
// one campaign to that list, then POST /campaigns/{id}/send and the wall time until its last message is enqueued
// (none left `scheduled`, all N written). Deliveries to the dev sink run meanwhile; the bench does not wait for them.
//
// Run (a stack on its own ports and state directory, the same exports for both commands):
//   export WORKER_PORT=28787 DOH_PORT=28053 SINK_SMTP_PORT=21025 SINK_HTTP_PORT=28025 BRIDGE_SMTP_PORT=22587 \
//     BRIDGE_ALT_PORT=22525 BRIDGE_SMTPS_PORT=22465 DEV_STATE_DIR=$(mktemp -d)
//   npm run dev &
//   npx tsx scripts/bench/campaign.ts [contacts=100000]
//
// Figures:
// - recipients/s = N / (time from POST send to the poll that saw every message enqueued); polls every 500 ms;
// - table rows per recipient = rows of messages, message_recipients, credit_ledger and events added for the campaign
//   by the send and its fan-out (before delivery), and the row updates of the fan-out (the move to `queued`);
// - workerd peak RSS (VmHWM) of the stack's workerd process: the whole local runtime (all Durable Objects, the local
//   D1's SQLite, the queues), an upper bound of the Worker's own memory. Linux only.
// D1 is read straight from the stack's local SQLite file (read-only), so polling costs the Worker nothing.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { z } from "zod";
import { readDevVars } from "../lib/dev-vars.ts";

const config = z
  .object({
    WORKER_PORT: z.coerce.number().int().default(8787),
    DOH_PORT: z.coerce.number().int().default(8053),
    DEV_HOST: z.string().default("127.0.0.1"),
    DEV_STATE_DIR: z.string().min(1).default(".dev"),
  })
  .parse(process.env);
const contacts = Number(process.argv[2] ?? 100_000);
if (!Number.isInteger(contacts) || contacts < 1) throw new Error(`contacts must be a positive integer, got ${process.argv[2]}`);
const workerUrl = `http://${config.DEV_HOST}:${config.WORKER_PORT}`;
const dohAdminUrl = `http://${config.DEV_HOST}:${config.DOH_PORT}`;
const adminToken = process.env.ADMIN_TOKEN ?? readDevVars().ADMIN_TOKEN;
if (!adminToken) throw new Error("ADMIN_TOKEN is not set and .dev.vars has none: start the stack with `npm run dev` first");

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function request<T>(path: string, key: string, init: { method?: string; body?: unknown; form?: FormData } = {}): Promise<T> {
  const headers: Record<string, string> = { Authorization: `Bearer ${key}` };
  if (init.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`${workerUrl}${path}`, {
    method: init.method ?? (init.body === undefined && !init.form ? "GET" : "POST"),
    headers,
    body: init.form ?? (init.body === undefined ? undefined : JSON.stringify(init.body)),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${path}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}

/**
 * The local D1 file that holds the account's rows (wrangler keeps one SQLite file per database under the state
 * directory, named by a hash): the one with its opening credits in the ledger, which lives in the account's database.
 */
function openD1(accountId: string): DatabaseSync {
  const dir = join(config.DEV_STATE_DIR, "state", "v3", "d1", "miniflare-D1DatabaseObject");
  for (const file of readdirSync(dir).filter((name) => name.endsWith(".sqlite") && name !== "metadata.sqlite")) {
    const database = new DatabaseSync(join(dir, file), { readOnly: true });
    const found =
      database.prepare("SELECT 1 FROM sqlite_master WHERE name = 'credit_ledger'").get() &&
      database.prepare("SELECT 1 FROM credit_ledger WHERE account_id = ? LIMIT 1").get(accountId);
    if (found) return database;
    database.close();
  }
  throw new Error(`no D1 database in ${dir} holds account ${accountId}`);
}

/** The stack's workerd processes (wrangler runs more than one): those that inherited this stack's DEV_STATE_DIR. */
function workerdPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() !== "workerd") continue;
      if (readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes(`DEV_STATE_DIR=${config.DEV_STATE_DIR}`)) pids.push(Number(entry));
    } catch {
      // A process that ended while we looked, or another user's.
    }
  }
  return pids;
}

/** Per workerd process, its resident set in MiB: VmRSS now, or VmHWM (its peak so far). */
function rssMiB(pids: number[], field: "VmHWM" | "VmRSS"): string {
  const figures = pids.map((pid) => {
    try {
      const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
      return match ? `${(Number(match[1]) / 1024).toFixed(0)} MiB` : "n/a";
    } catch {
      return "n/a";
    }
  });
  return figures.length > 0 ? figures.join(" / ") : "n/a (no /proc)";
}

const run = Date.now().toString(36);
const account = await request<{ id: string; api_key: string }>("/admin/v1/accounts", adminToken, {
  body: {
    name: `Campaign bench ${run}`,
    plan: "enterprise",
    send_credits: contacts * 2,
    daily_send_limit: contacts * 2,
    rate_limit_per_minute: 1_000_000,
    features: ["email_api", "smtp_relay", "campaigns"],
  },
});
const key = account.api_key;
const domainName = `campaign-bench-${run}.example`;
const domain = await request<{ id: string; records: { name: string; value: string }[] }>("/api/v1/domains", key, { body: { name: domainName } });
for (const record of domain.records)
  await fetch(`${dohAdminUrl}/zone/${record.name}`, { method: "PUT", body: JSON.stringify({ TXT: [record.value] }) });
const verified = await request<{ status: string }>(`/api/v1/domains/${domain.id}/verify`, key, { method: "POST" });
if (verified.status !== "verified") throw new Error(`the bench domain did not verify: ${verified.status}`);
const sender = await request<{ id: string }>("/api/v1/senders", key, { body: { name: "Bench News", email: `news@${domainName}` } });
const list = await request<{ id: string }>("/api/v1/lists", key, { body: { name: "bench" } });

process.stdout.write(`Campaign bench: ${contacts.toLocaleString("en")} contacts against ${workerUrl} (account ${account.id})\n`);
const csv = ["email,first_name,plan", ...Array.from({ length: contacts }, (_, i) => `reader${i}-${run}@example.org,Reader${i},plan${i % 3}`)].join(
  "\r\n",
);
const form = new FormData();
form.append("file", new Blob([`${csv}\r\n`], { type: "text/csv" }), "bench.csv");
form.append("mapping", JSON.stringify({ email: "email", first_name: "first_name", "custom_fields.plan": "plan" }));
form.append("list_id", list.id);
const importStarted = performance.now();
const imported = await request<{ id: string }>("/api/v1/contacts/import", key, { form });
for (;;) {
  const status = await request<{ status: string; processed: number; error: string | null }>(`/api/v1/contacts/import/${imported.id}`, key);
  if (status.status === "failed") throw new Error(`contact import failed: ${status.error}`);
  if (status.status === "completed") break;
  await sleep(500);
}
process.stdout.write(`  contacts imported in ${((performance.now() - importStarted) / 1000).toFixed(1)} s\n`);

const campaign = await request<{ id: string }>("/api/v1/campaigns", key, {
  body: {
    name: "Bench newsletter",
    sender_id: sender.id,
    subject: "Hello {{first_name|there}}",
    html: '<p>Hi {{first_name|there}}, you are on {{custom_fields.plan}}.</p><p><a href="{{unsubscribe_url}}">Unsubscribe</a></p>',
    lists: [list.id],
  },
});

const d1 = openD1(account.id);
const count = (sql: string, ...params: string[]) => Number((d1.prepare(sql).get(...params) as { n: number }).n);
/** Rows the send and the fan-out add (deliveries add their own: a ledger charge and events per message). */
const fanOutRows = () =>
  count("SELECT count(*) AS n FROM messages WHERE campaign_id = ?", campaign.id) +
  count("SELECT count(*) AS n FROM message_recipients WHERE account_id = ?", account.id) +
  count("SELECT count(*) AS n FROM credit_ledger WHERE account_id = ? AND kind = 'reservation'", account.id);
const deliveryRows = () =>
  count("SELECT count(*) AS n FROM credit_ledger WHERE account_id = ? AND kind IN ('charge', 'release')", account.id) +
  count("SELECT count(*) AS n FROM events WHERE account_id = ?", account.id);
const pids = workerdPids();
const rssBefore = rssMiB(pids, "VmRSS");

const sendStarted = performance.now();
const sent = await request<{ recipients: number }>(`/api/v1/campaigns/${campaign.id}/send`, key, { body: {} });
const accepted = performance.now();
let lastReport = accepted;
let written = 0;
for (;;) {
  written = count("SELECT count(*) AS n FROM messages WHERE campaign_id = ?", campaign.id);
  const scheduled = count("SELECT count(*) AS n FROM messages WHERE campaign_id = ? AND status = 'scheduled'", campaign.id);
  if (written === sent.recipients && scheduled === 0) break;
  if (performance.now() - lastReport > 5_000) {
    lastReport = performance.now();
    process.stdout.write(`  ${((lastReport - sendStarted) / 1000).toFixed(0)} s: ${written} written, ${written - scheduled} enqueued\n`);
  }
  await sleep(500);
}
const enqueuedAt = performance.now();
const delivered = count("SELECT count(*) AS n FROM messages WHERE campaign_id = ? AND status IN ('sent', 'delivered')", campaign.id);
const rowsPerRecipient = fanOutRows() / sent.recipients;
const rowsPerDelivery = delivered > 0 ? (deliveryRows() / delivered).toFixed(2) : "n/a";
const seconds = (enqueuedAt - sendStarted) / 1000;
process.stdout.write(
  [
    `  POST /send answered in ${((accepted - sendStarted) / 1000).toFixed(2)} s (audience counted, ${sent.recipients} credits reserved)`,
    `  POST /send → last message enqueued: ${seconds.toFixed(1)} s → ${Math.round(sent.recipients / seconds).toLocaleString("en")} recipients/s`,
    `  table rows per recipient written by the send and fan-out: ${rowsPerRecipient.toFixed(3)} ` +
      "(messages + message_recipients + the reservation), plus 1 row update each (scheduled → queued)",
    `  table rows per delivered message: ${rowsPerDelivery} (credit_ledger charge + events), plus the status updates`,
    `  delivered to the sink meanwhile: ${delivered.toLocaleString("en")} (${(delivered / seconds).toFixed(0)} msg/s while fanning out)`,
    `  workerd processes ${pids.join(" / ")}: RSS ${rssBefore} before send, peak ${rssMiB(pids, "VmHWM")} (whole local runtime, process lifetime)`,
    "",
  ].join("\n"),
);
d1.close();
