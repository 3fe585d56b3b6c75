// Time to first byte of the dashboard's overview page, side by side with a bare keyed route on the same Worker,
// through a running local stack.
//
//   npm run dev &    (or with WORKER_PORT=… DEV_STATE_DIR=…, exported for both commands)
//   npx tsx scripts/bench/dashboard.ts [requests=200]
//
// The overview does what a signed-in page always does (verify the session cookie's HMAC, load the key and its account
// from D1) plus its own work: the 30-day overview report from the daily rollups, rendered with hono/jsx. The bare
// route is GET /api/v1/me with the same account's key (authentication and the rate limiter's Durable Object, no
// report). Timing: `requests` sequential rounds after 10 warm-up rounds, each one overview and one /me, from this
// process with keep-alive; time to first byte is when fetch resolves (status and headers read), before the body.

import { readFileSync } from "node:fs";
import { z } from "zod";
import { percentile } from "./stats.ts";

const config = z
  .object({
    WORKER_PORT: z.coerce.number().int().default(8787),
    DEV_HOST: z.string().default("127.0.0.1"),
    DEV_STATE_DIR: z.string().min(1).default(".dev"),
  })
  .parse(process.env);
const requests = Number(process.argv[2] ?? 200);
if (!Number.isInteger(requests) || requests < 1) throw new Error(`requests must be a positive integer, got ${process.argv[2]}`);
const workerUrl = `http://${config.DEV_HOST}:${config.WORKER_PORT}`;
// `npm run dev` seeds the demo account and writes its key here.
const apiKey = process.env.API_KEY ?? (JSON.parse(readFileSync(`${config.DEV_STATE_DIR}/demo.json`, "utf8")) as { api_key: string }).api_key;

const cookieOf = (response: Response) => response.headers.getSetCookie().map((line) => line.split(";")[0]!);

/** Signs in through the form as a browser would and returns the Cookie header of the session. */
async function signIn(): Promise<string> {
  const form = await fetch(`${workerUrl}/dashboard/sign-in`);
  const token = /name="_csrf" value="([^"]+)"/.exec(await form.text())?.[1];
  if (!token) throw new Error("the sign-in page has no CSRF token");
  const response = await fetch(`${workerUrl}/dashboard/sign-in`, {
    method: "POST",
    redirect: "manual",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Cookie: cookieOf(form).join("; ") },
    body: new URLSearchParams({ _csrf: token, key: apiKey }),
  });
  if (response.status !== 303) throw new Error(`sign-in: ${response.status} ${await response.text()}`);
  return cookieOf(response).join("; ");
}

async function firstByte(path: string, headers: Record<string, string>): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${workerUrl}${path}`, { headers, redirect: "manual" });
  const ms = performance.now() - started;
  const body = await response.text();
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${body.slice(0, 300)}`);
  return ms;
}

const cookie = await signIn();
const routes: { name: string; path: string; headers: Record<string, string> }[] = [
  { name: "GET /dashboard (overview)", path: "/dashboard", headers: { Cookie: cookie } },
  { name: "GET /api/v1/me (bare keyed)", path: "/api/v1/me", headers: { Authorization: `Bearer ${apiKey}` } },
];
const samples = routes.map(() => [] as number[]);
for (let round = -10; round < requests; round++) {
  for (const [i, route] of routes.entries()) {
    const ms = await firstByte(route.path, route.headers);
    if (round >= 0) samples[i]!.push(ms);
  }
}

console.log(
  `${"route".padEnd(30)} ${"p50 ms".padStart(8)} ${"p95 ms".padStart(8)} ${"mean ms".padStart(8)}   (time to first byte, ${requests} each)`,
);
for (const [i, route] of routes.entries()) {
  const values = samples[i]!;
  const mean = values.reduce((sum, value) => sum + value, 0) / values.length;
  console.log(
    `${route.name.padEnd(30)} ${percentile(values, 50).toFixed(1).padStart(8)} ${percentile(values, 95).toFixed(1).padStart(8)} ${mean.toFixed(1).padStart(8)}`,
  );
}
console.log(`overview p50 added over the bare route: ${(percentile(samples[0]!, 50) - percentile(samples[1]!, 50)).toFixed(1)} ms`);
