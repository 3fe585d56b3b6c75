// GET /reports/overview over 100,000 and over 1,000,000 events, side by side with a bare keyed route on the same
// Worker, through a running local stack.
//
//   npm run dev &    (or with WORKER_PORT=… DEV_STATE_DIR=…, exported for both commands)
//   npx tsx scripts/bench/reports.ts [requests=100]
//
// Seeding: a bulk loader writes the daily_stats rows the real event path would leave (one row per account × UTC day
// × sending domain × mailbox provider × campaign, each event adding 1 to one counter of its row), straight into each
// account's local D1 database with `wrangler d1 execute`, the way webhooks.ts seeds its events. Both accounts get the same
// realistic cardinality: 90 days, 5 sending domains × 5 providers of transactional mail every day, and 20 campaigns
// (each from one domain) whose sends, opens and clicks land over the 14 days after their send day. Only the counts in
// the rows differ: 100,000 events for one account, 1,000,000 for the other. Seeding the real path instead (a million
// SMTP transactions) would measure the sink, not the report.
//
// Timing: `requests` sequential rounds after 10 warm-up rounds; each round asks, in turn, the 100k account's overview,
// the 1M account's overview (both over the 90 seeded days) and GET /api/v1/me with the same key (authentication and
// rate limit like every keyed route, no report). Figures: p50/p95/mean per route and the overview's added p50.

import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { z } from "zod";
import { readDevVars } from "../lib/dev-vars.ts";
import { percentile } from "./stats.ts";

const config = z
  .object({
    WORKER_PORT: z.coerce.number().int().default(8787),
    DEV_HOST: z.string().default("127.0.0.1"),
    DEV_STATE_DIR: z.string().min(1).default(".dev"),
  })
  .parse(process.env);
const requests = Number(process.argv[2] ?? 100);
if (!Number.isInteger(requests) || requests < 1) throw new Error(`requests must be a positive integer, got ${process.argv[2]}`);
const workerUrl = `http://${config.DEV_HOST}:${config.WORKER_PORT}`;
const adminToken = process.env.ADMIN_TOKEN ?? readDevVars().ADMIN_TOKEN;
if (!adminToken) throw new Error("ADMIN_TOKEN is not set and .dev.vars has none: start the stack with `npm run dev` first");

const days = 90;
const domains = Array.from({ length: 5 }, (_, i) => `news${i}.bench-reports.test`);
const providers = ["gmail", "microsoft", "yahoo", "apple", "other"] as const;
const campaigns = 20;
const campaignActiveDays = 14;
const dayMs = 86_400_000;
const dayOf = (offset: number) => new Date(Date.now() - offset * dayMs).toISOString().slice(0, 10);

type Row = { day: string; domain: string; provider: string; campaign: string; weight: number };

/** The rows of one account: the keys the event path writes, each with a share of the account's events. */
function rowKeys(run: string): Row[] {
  const rows: Row[] = [];
  for (let d = 0; d < days; d++) {
    for (const domain of domains) for (const provider of providers) rows.push({ day: dayOf(d), domain, provider, campaign: "", weight: 1 });
  }
  for (let c = 0; c < campaigns; c++) {
    // Days ago the campaign was sent: spread over the range, each with its two weeks inside it.
    const sentDaysAgo = campaignActiveDays - 1 + Math.floor((c * (days - campaignActiveDays)) / campaigns);
    for (let d = 0; d < campaignActiveDays; d++) {
      for (const provider of providers) {
        // Most of a campaign's events land on its send day; opens and clicks trail off over the next two weeks.
        rows.push({
          day: dayOf(sentDaysAgo - d),
          domain: domains[c % domains.length]!,
          provider,
          campaign: `cmp_bench_${run}_${c}`,
          weight: d === 0 ? 40 : 4 / d,
        });
      }
    }
  }
  return rows;
}

// Per recipient sent: what the event path counts. Events per sent recipient = the sum of everything but `sent` and
// the unique_* columns (those count the same open and click events once per recipient).
const perSent = {
  delivered: 0.95,
  hard_bounces: 0.02,
  soft_bounces: 0.03,
  failed: 0.03,
  opens: 0.45,
  unique_opens: 0.25,
  machine_opens: 0.12,
  clicks: 0.08,
  unique_clicks: 0.05,
  unsubscribes: 0.004,
  complaints: 0.0005,
  suppressed: 0.01,
};
const eventsPerSent = Object.entries(perSent)
  .filter(([name]) => !name.startsWith("unique_"))
  .reduce((sum, [, share]) => sum + share, 0);

function insertSql(accountId: string, rows: Row[], events: number): string {
  const totalWeight = rows.reduce((sum, row) => sum + row.weight, 0);
  const columns = ["sent", ...Object.keys(perSent)];
  const values = rows.map((row) => {
    const sent = Math.max(1, Math.round((events / eventsPerSent) * (row.weight / totalWeight)));
    const counts = [sent, ...Object.values(perSent).map((share) => Math.round(sent * share))];
    return `('${accountId}', '${row.day}', '${row.domain}', '${row.provider}', '${row.campaign}', ${counts.join(", ")})`;
  });
  const statements: string[] = [];
  for (let i = 0; i < values.length; i += 500) {
    statements.push(
      `INSERT INTO daily_stats (account_id, day, domain, provider, campaign_id, ${columns.join(", ")}) VALUES ${values.slice(i, i + 500).join(",\n")};`,
    );
  }
  return statements.join("\n");
}

async function createAccount(name: string): Promise<{ id: string; api_key: string; database: string }> {
  const response = await fetch(`${workerUrl}/admin/v1/accounts`, {
    method: "POST",
    headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
    // High enough that the bench's own requests are never rate limited.
    body: JSON.stringify({ name, rate_limit_per_minute: 1_000_000 }),
  });
  if (response.status !== 201) throw new Error(`account creation: ${response.status} ${await response.text()}`);
  return (await response.json()) as { id: string; api_key: string; database: string };
}

async function seed(database: string, sql: string) {
  const dir = await mkdtemp(join(tmpdir(), "mailforge-reports-bench-"));
  try {
    const file = join(dir, "seed.sql");
    await writeFile(file, sql);
    await promisify(execFile)(
      "npx",
      ["wrangler", "d1", "execute", database, "--local", "--persist-to", `${config.DEV_STATE_DIR}/state`, "--file", file],
      {
        env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
        maxBuffer: 64 * 1024 * 1024,
      },
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function timed(path: string, key: string): Promise<{ ms: number; body: unknown }> {
  const started = performance.now();
  const response = await fetch(`${workerUrl}${path}`, { headers: { Authorization: `Bearer ${key}` } });
  const body = await response.json();
  const ms = performance.now() - started;
  if (!response.ok) throw new Error(`${path}: ${response.status} ${JSON.stringify(body)}`);
  return { ms, body };
}

const run = Date.now().toString(36);
const sizes = [100_000, 1_000_000] as const;
const accounts = await Promise.all(sizes.map((events) => createAccount(`reports bench ${events} ${run}`)));
const rows = rowKeys(run);
const seedStarted = performance.now();
// Each account's rows go to the database that holds its rows, wherever placement put it.
for (const database of new Set(accounts.map((account) => account.database))) {
  await seed(
    database,
    sizes.flatMap((events, i) => (accounts[i]!.database === database ? [insertSql(accounts[i]!.id, rows, events)] : [])).join("\n"),
  );
}
console.log(
  `seeded ${rows.length} daily_stats rows per account (${days} days, ${domains.length} domains × ${providers.length} providers, ${campaigns} campaigns) in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`,
);

const range = `?from=${dayOf(days - 1)}&to=${dayOf(0)}`;
const routes = [
  { name: "overview, 100k events", path: `/api/v1/reports/overview${range}`, key: accounts[0]!.api_key },
  { name: "overview, 1M events", path: `/api/v1/reports/overview${range}`, key: accounts[1]!.api_key },
  { name: "GET /me (bare keyed route)", path: "/api/v1/me", key: accounts[1]!.api_key },
];
const samples = routes.map(() => [] as number[]);
for (let round = -10; round < requests; round++) {
  for (const [i, route] of routes.entries()) {
    const { ms, body } = await timed(route.path, route.key);
    if (round >= 0) samples[i]!.push(ms);
    if (round === -10 && i < sizes.length) {
      const events = Object.entries((body as { totals: Record<string, number> }).totals)
        .filter(([name]) => name !== "sent" && !name.startsWith("unique_"))
        .reduce((sum, [, count]) => sum + count, 0);
      console.log(`${route.name}: the report counts ${events.toLocaleString("en-US")} events`);
    }
  }
}

console.log(
  `\n${"route".padEnd(30)} ${"p50 ms".padStart(8)} ${"p95 ms".padStart(8)} ${"mean ms".padStart(8)}   (${requests} sequential requests each)`,
);
for (const [i, route] of routes.entries()) {
  const values = samples[i]!;
  const mean = values.reduce((sum, value) => sum + value, 0) / values.length;
  console.log(
    `${route.name.padEnd(30)} ${percentile(values, 50).toFixed(1).padStart(8)} ${percentile(values, 95).toFixed(1).padStart(8)} ${mean.toFixed(1).padStart(8)}`,
  );
}
const bare = percentile(samples[2]!, 50);
console.log(
  `overview p50 added over the bare route: ${(percentile(samples[0]!, 50) - bare).toFixed(1)} ms at 100k events, ${(percentile(samples[1]!, 50) - bare).toFixed(1)} ms at 1M (goal: < 200 ms, flat)`,
);
