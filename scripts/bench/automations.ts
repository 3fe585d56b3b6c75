// Automation triggers per second through the API and through the private URL, side by side with a bare keyed route
// (GET /api/v1/me) on the same Worker, through a running local stack, at the same concurrency.
//
//   npm run dev &    (or with WORKER_PORT=… DEV_STATE_DIR=…, exported for both commands)
//   npx tsx scripts/bench/automations.ts [requests=300] [concurrency=10]
//
// The automation has one `add_to_list` step, so a trigger costs what every trigger costs (the contact upsert, the run
// row, starting a Workflows instance) and the run itself stays small. Each trigger uses a new address and no
// event_id. Rounds: the bare route, then the API, then the private URL, each `requests` requests after 20 warm-ups.
// A fresh account is created through the operator API so the per-key rate limit does not interfere.

import { z } from "zod";
import { readDevVars } from "../lib/dev-vars.ts";

const config = z.object({ WORKER_PORT: z.coerce.number().int().default(8787), DEV_HOST: z.string().default("127.0.0.1") }).parse(process.env);
const requests = Number(process.argv[2] ?? 300);
const concurrency = Number(process.argv[3] ?? 10);
const workerUrl = `http://${config.DEV_HOST}:${config.WORKER_PORT}`;
const adminToken = process.env.ADMIN_TOKEN ?? readDevVars().ADMIN_TOKEN;
if (!adminToken) throw new Error("ADMIN_TOKEN is not set and .dev.vars has none: start the stack with `npm run dev` first");

async function api<T>(path: string, key: string, body?: unknown): Promise<T> {
  const response = await fetch(`${workerUrl}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
}

const account = await api<{ api_key: string }>("/admin/v1/accounts", adminToken, {
  name: "automation bench",
  features: ["email_api", "automations"],
  rate_limit_per_minute: 1_000_000,
});
const key = account.api_key;
const list = await api<{ id: string }>("/api/v1/lists", key, { name: "bench" });
const automation = await api<{ id: string; private_url: string }>("/api/v1/automations", key, {
  name: "bench",
  steps: [{ type: "add_to_list", list_id: list.id }],
});
const hookPath = new URL(automation.private_url).pathname;

let counter = 0;
const address = () => `bench-${Date.now().toString(36)}-${counter++}@example.org`;
const rounds: Record<string, () => Promise<Response>> = {
  "GET /api/v1/me (bare keyed route)": () => fetch(`${workerUrl}/api/v1/me`, { headers: { Authorization: `Bearer ${key}` } }),
  "POST /automations/{id}/trigger": () =>
    fetch(`${workerUrl}/api/v1/automations/${automation.id}/trigger`, {
      method: "POST",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ email: address() }),
    }),
  // The private URL is limited to 60 triggers a minute per path: each request uses its own automation's URL would be
  // unrealistic, so the bench measures one path and lets the limiter answer past it (counted apart).
  "POST /hooks/automations/<path> (form)": () =>
    fetch(`${workerUrl}${hookPath}`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ email: address() }).toString(),
    }),
};

async function measure(run: () => Promise<Response>, count: number): Promise<{ perSecond: number; statuses: Record<number, number> }> {
  const statuses: Record<number, number> = {};
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next++;
        const response = await run();
        await response.arrayBuffer();
        statuses[response.status] = (statuses[response.status] ?? 0) + 1;
      }
    }),
  );
  return { perSecond: count / ((performance.now() - started) / 1000), statuses };
}

const results: [string, number, Record<number, number>][] = [];
for (const [name, run] of Object.entries(rounds)) {
  // The private URL's per-path limit (60/min) is part of what it is: measure it within the limit.
  const count = name.includes("hooks") ? Math.min(requests, 50) : requests;
  await measure(run, name.includes("hooks") ? 0 : 20);
  const { perSecond, statuses } = await measure(run, count);
  results.push([name, perSecond, statuses]);
}
const bare = results[0]![1];
console.log(`\nroute                                        req/s   vs bare   statuses   (concurrency ${concurrency})`);
for (const [name, perSecond, statuses] of results) {
  console.log(`${name.padEnd(42)} ${perSecond.toFixed(1).padStart(7)}   ${(perSecond / bare).toFixed(2).padStart(6)}   ${JSON.stringify(statuses)}`);
}
