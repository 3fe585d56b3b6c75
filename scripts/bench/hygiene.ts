// Pre-send hygiene against a running local stack (its Worker with PROBER_URL set and its prober): a 10,000-contact
// list over 50 domains whose MX records point at 10 receiving servers this script starts on loopback (127.0.2.1 to
// 127.0.2.10, on the port the stack's prober dials, each pausing 100 ms before its greeting as real MTAs do; 80% of
// the mailboxes exist). Measured side by side in one run:
//   1. a `skip_invalid` campaign to the list: its checks (one bulk job, grouped by domain) and its fan-out, with the
//      connections and RCPTs the servers saw;
//   2. the same addresses checked one by one (POST /verify {email}, 10 at a time), on a sample, from another account
//      so no result is reused: connections per address and addresses per second, against (1);
//   3. a second campaign (`valid_only`) to the same list within the freshness window: it must cost no connection, no
//      RCPT and no verification credit.
//
//   WORKER_URL=… DOH_ADMIN_URL=… DEV_MX_PORT=… npx tsx scripts/bench/hygiene.ts [contacts=10000] [sample=500]
//   (npm run bench starts a stack and passes these; by hand, start `npm run dev` on ports of your own first.)

import { z } from "zod";
import { createMxHosts, type MxBehaviour } from "../dev/mx-hosts.ts";
import { readDevVars } from "../lib/dev-vars.ts";

const env = z
  .object({
    WORKER_URL: z.string().default("http://127.0.0.1:8787"),
    DOH_ADMIN_URL: z.string().default("http://127.0.0.1:8053"),
    DEV_MX_PORT: z.coerce.number().int().default(2525),
  })
  .parse(process.env);
const total = Number(process.argv[2] ?? 10_000);
const sample = Number(process.argv[3] ?? 500);
const DOMAINS = 50;
const HOSTS = 10;
const CONCURRENCY = 10;
const perDomain = Math.ceil(total / DOMAINS);
const adminToken = process.env.ADMIN_TOKEN ?? readDevVars().ADMIN_TOKEN;
if (!adminToken) throw new Error("ADMIN_TOKEN is not set and .dev.vars has none: start the stack with `npm run dev` first");

const run = Date.now().toString(36);
const hostAddress = (h: number) => `127.0.2.${h + 1}`;
const existing = Object.fromEntries(Array.from({ length: Math.floor(perDomain * 0.8) }, (_, i) => [`user${i}`, "ok" as const]));
const behaviours: Record<string, MxBehaviour> = Object.fromEntries(
  Array.from({ length: HOSTS }, (_, h) => [hostAddress(h), { greetingDelayMs: 100, mailboxes: existing }]),
);
const domains = Array.from({ length: DOMAINS }, (_, d) => `d${d}-${run}.hygiene-bench.test`);
const addresses = domains.flatMap((domain) => Array.from({ length: perDomain }, (_, i) => `user${i}@${domain}`)).slice(0, total);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function request<T>(path: string, key: string, init: { method?: string; body?: unknown; form?: FormData } = {}): Promise<T> {
  const headers: Record<string, string> = { Authorization: `Bearer ${key}` };
  if (init.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`${env.WORKER_URL}${path}`, {
    method: init.method ?? (init.body === undefined && !init.form ? "GET" : "POST"),
    headers,
    body: init.form ?? (init.body === undefined ? undefined : JSON.stringify(init.body)),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${path}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}

async function publish(name: string, records: Record<string, unknown>) {
  const response = await fetch(`${env.DOH_ADMIN_URL}/zone/${name}`, { method: "PUT", body: JSON.stringify(records) });
  if (!response.ok) throw new Error(`publishing ${name}: ${response.status}`);
}

const newAccount = (name: string) =>
  request<{ id: string; api_key: string }>("/admin/v1/accounts", adminToken, {
    body: {
      name,
      send_credits: total * 3,
      verify_credits: total * 2,
      daily_send_limit: total * 3,
      rate_limit_per_minute: 1_000_000,
      features: ["email_api", "campaigns"],
    },
  });

const mx = createMxHosts(behaviours);
await mx.listen(env.DEV_MX_PORT);
const seen = () => {
  let connections = 0;
  let rcpts = 0;
  let maxConcurrent = 0;
  for (const host of mx.hosts.values()) {
    connections += host.stats.connections;
    rcpts += host.stats.rcptsPerConnection.reduce((sum, n) => sum + n, 0);
    maxConcurrent = Math.max(maxConcurrent, host.stats.maxConcurrent);
  }
  return { connections, rcpts, maxConcurrent };
};

try {
  for (let h = 0; h < HOSTS; h++) await publish(`mx${h}-${run}.hygiene-bench.test`, { A: [hostAddress(h)] });
  for (const [d, domain] of domains.entries())
    await publish(domain, { MX: [{ priority: 10, exchange: `mx${d % HOSTS}-${run}.hygiene-bench.test` }] });

  const account = await newAccount("Hygiene bench");
  const key = account.api_key;
  const sendingDomain = `hygiene-bench-${run}.example`;
  const domain = await request<{ id: string; records: { type: string; name: string; value: string }[] }>("/api/v1/domains", key, {
    body: { name: sendingDomain },
  });
  for (const record of domain.records.filter((r) => r.type === "TXT")) await publish(record.name, { TXT: [record.value] });
  const verified = await request<{ status: string }>(`/api/v1/domains/${domain.id}/verify`, key, { method: "POST" });
  if (verified.status !== "verified") throw new Error(`the bench domain did not verify: ${verified.status}`);
  const sender = await request<{ id: string }>("/api/v1/senders", key, { body: { name: "Bench News", email: `news@${sendingDomain}` } });
  const list = await request<{ id: string }>("/api/v1/lists", key, { body: { name: "bench" } });
  const form = new FormData();
  form.append("file", new Blob([`email\r\n${addresses.join("\r\n")}\r\n`], { type: "text/csv" }), "bench.csv");
  form.append("list_id", list.id);
  const imported = await request<{ id: string }>("/api/v1/contacts/import", key, { form });
  for (;;) {
    const status = await request<{ status: string; error: string | null }>(`/api/v1/contacts/import/${imported.id}`, key);
    if (status.status === "failed") throw new Error(`contact import failed: ${status.error}`);
    if (status.status === "completed") break;
    await sleep(500);
  }
  process.stdout.write(
    `Hygiene bench: ${total.toLocaleString("en")} contacts over ${DOMAINS} domains and ${HOSTS} MX hosts (80% existing mailboxes), ${env.WORKER_URL}\n`,
  );

  type Campaign = { verification_job_id: string | null; counters: { recipients: number; skipped: Record<string, number> } };
  const credits = async () => (await request<{ verify: { balance: number } }>("/api/v1/credits", key)).verify.balance;
  /** Sends a campaign to the list and waits until every contact is materialised (a message or a skip). */
  async function campaign(verification: string) {
    const draft = await request<{ id: string }>("/api/v1/campaigns", key, {
      body: { name: `bench ${verification}`, sender_id: sender.id, subject: "Hello", text: "Hello {{email}}", lists: [list.id], verification },
    });
    const before = { ...seen(), credits: await credits() };
    const started = performance.now();
    await request(`/api/v1/campaigns/${draft.id}/send`, key, { body: {} });
    const answered = performance.now();
    let state: Campaign;
    for (;;) {
      state = await request<Campaign>(`/api/v1/campaigns/${draft.id}`, key);
      const skipped = Object.values(state.counters.skipped).reduce((sum, n) => sum + n, 0);
      if (state.counters.recipients + skipped >= total) break;
      await sleep(250);
    }
    const fannedOut = performance.now();
    const after = seen();
    const job = state.verification_job_id
      ? await request<{ created_at: string; completed_at: string; credits_charged: number }>(
          `/api/v1/verify/${state.verification_job_id}?limit=1`,
          key,
        )
      : undefined;
    return {
      answerMs: answered - started,
      fanOutMs: fannedOut - started,
      checkMs: job ? Date.parse(job.completed_at) - Date.parse(job.created_at) : 0,
      connections: after.connections - before.connections,
      rcpts: after.rcpts - before.rcpts,
      maxConcurrent: after.maxConcurrent,
      credits: before.credits - (await credits()),
      state,
    };
  }

  const first = await campaign("skip_invalid");
  const checkedPerSecond = total / (first.checkMs / 1000);

  // One by one: single checks from an account without contacts, so nothing is reused or written back.
  const other = await newAccount("Hygiene bench, one by one");
  const picked = addresses.filter((_, i) => i % Math.max(1, Math.floor(total / sample)) === 0).slice(0, sample);
  const beforeSingles = seen();
  const singlesStarted = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < picked.length) {
        const email = picked[next++]!;
        await request("/api/v1/verify", other.api_key, { body: { email } });
      }
    }),
  );
  const singlesMs = performance.now() - singlesStarted;
  const singles = { connections: seen().connections - beforeSingles.connections, perSecond: picked.length / (singlesMs / 1000) };

  const second = await campaign("valid_only");

  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  process.stdout.write(
    [
      `  skip_invalid campaign: POST /send answered in ${s(first.answerMs)}; checks (one bulk job) ${s(first.checkMs)} → ${Math.round(checkedPerSecond)} addresses/s; ` +
        `all ${total} contacts fanned out ${s(first.fanOutMs)} after the POST; skipped ${JSON.stringify(first.state.counters.skipped)}`,
      `    MX hosts saw ${first.connections} connections and ${first.rcpts} RCPTs (${(first.rcpts / Math.max(1, first.connections)).toFixed(1)} per connection, ` +
        `at most ${first.maxConcurrent} at once per host); ${first.credits} verification credits`,
      `  one by one (POST /verify {email}, ${CONCURRENCY} at a time, ${picked.length} of the same addresses): ${singles.perSecond.toFixed(1)} addresses/s, ` +
        `${(singles.connections / picked.length).toFixed(2)} connections per address`,
      `  → grouped checks ${(checkedPerSecond / singles.perSecond).toFixed(1)}x the addresses per second, with ` +
        `${(singles.connections / picked.length / (first.connections / total)).toFixed(0)}x fewer connections per address`,
      `  valid_only campaign to the same list, within the freshness window: ${second.connections} connections, ${second.rcpts} RCPTs, ` +
        `${second.credits} verification credits, job ${second.state.verification_job_id ?? "none"}; fanned out ${s(second.fanOutMs)} after the POST ` +
        `(${(first.fanOutMs / second.fanOutMs).toFixed(1)}x faster than the first, which checked); skipped ${JSON.stringify(second.state.counters.skipped)}`,
      "",
    ].join("\n"),
  );
  if (second.connections !== 0 || second.rcpts !== 0 || second.credits !== 0)
    throw new Error("the second campaign probed or paid: fresh results were not reused");
} finally {
  await mx.close();
}
