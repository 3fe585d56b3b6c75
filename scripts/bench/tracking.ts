// The click redirect's latency, side by side with a bare route on the same Worker, through a running local stack.
//
//   npm run dev &    (or with WORKER_PORT=… DEV_STATE_DIR=…, exported for both commands)
//   npx tsx scripts/bench/tracking.ts [requests=300]
//
// The clicked link is a real one: the demo account sends a message with `track_clicks` through POST /send, and the
// link is read from what the dev mail sink received. So every redirect also does its real work after the response:
// one D1 read and one batch (rollups, recipient, contact, the `clicked` event). The bare route is a path no route
// matches: the same Worker, the same middleware (request id, body limit), hono's not-found answer, no token, no D1.
//
// Timing: `requests` sequential rounds after 20 warm-up rounds, each a click, an altered token (the signature check
// without the recording) and a bare request, 20 ms apart (the recording after a redirect runs in that gap, as it would
// between real clicks), from this process with keep-alive. Figures: p50/p95/mean per route and the redirect's added p50; then the message's `clicked` events,
// recorded after the responses.

import { readFileSync } from "node:fs";
import PostalMime from "postal-mime";
import { z } from "zod";
import { percentile } from "./stats.ts";

const config = z
  .object({
    WORKER_PORT: z.coerce.number().int().default(8787),
    SINK_HTTP_PORT: z.coerce.number().int().default(8025),
    DEV_HOST: z.string().default("127.0.0.1"),
    DEV_STATE_DIR: z.string().min(1).default(".dev"),
  })
  .parse(process.env);
const requests = Number(process.argv[2] ?? 300);
if (!Number.isInteger(requests) || requests < 1) throw new Error(`requests must be a positive integer, got ${process.argv[2]}`);
const workerUrl = `http://${config.DEV_HOST}:${config.WORKER_PORT}`;
const sinkUrl = `http://${config.DEV_HOST}:${config.SINK_HTTP_PORT}`;
// `npm run dev` seeds the demo account and its verified domain, and writes the key here.
const apiKey = process.env.API_KEY ?? (JSON.parse(readFileSync(`${config.DEV_STATE_DIR}/demo.json`, "utf8")) as { api_key: string }).api_key;

const recipient = `reader-${Date.now().toString(36)}@example.net`;
const url = "https://shop.example/sale?utm_source=mail&utm_campaign=spring";
const sent = await fetch(`${workerUrl}/api/v1/send`, {
  method: "POST",
  headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" },
  body: JSON.stringify({
    from: "Shop <hello@demo.mailforge.test>",
    to: recipient,
    subject: "Spring sale",
    html: `<p><a href="${url.replace(/&/g, "&amp;")}">Shop now</a></p>`,
    track_clicks: true,
  }),
});
if (sent.status !== 202) throw new Error(`POST /send: ${sent.status} ${await sent.text()}`);
const { id: messageId } = (await sent.json()) as { id: string };

async function received(): Promise<string> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const inbox = (await (await fetch(`${sinkUrl}/api/messages?to=${encodeURIComponent(recipient)}`)).json()) as { data: { id: string }[] };
    if (inbox.data[0]) return (await fetch(`${sinkUrl}/api/messages/${inbox.data[0].id}/raw`)).text();
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error("the tracked message did not reach the sink");
}
const html = (await PostalMime.parse(await received())).html ?? "";
const link = html.match(/href="([^"]*\/t\/c\/[^"]+)"/)?.[1];
if (!link) throw new Error(`no tracked link in the delivered html: ${html}`);
const clickPath = new URL(link).pathname;
const headers = { "User-Agent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko)" };

async function timed(path: string, expected: number): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${workerUrl}${path}`, { headers, redirect: "manual" });
  await response.arrayBuffer();
  const ms = performance.now() - started;
  if (response.status !== expected) throw new Error(`${path}: ${response.status}, expected ${expected}`);
  if (expected === 302 && response.headers.get("Location") !== url) throw new Error(`redirected to ${response.headers.get("Location")}`);
  return ms;
}

const routes = [
  { name: "GET /t/c/<token> (302)", path: clickPath, status: 302 },
  // The token check alone (HMAC, constant-time compare) without the recording: a wrong signature is a 404.
  { name: "altered token (404)", path: `${clickPath.slice(0, -1)}${clickPath.endsWith("A") ? "B" : "A"}`, status: 404 },
  { name: "bare route (404, no token)", path: "/bench-bare-route", status: 404 },
];
const warmUp = 20;
const samples = routes.map(() => [] as number[]);
for (let round = -warmUp; round < requests; round++) {
  for (const [i, route] of routes.entries()) {
    const ms = await timed(route.path, route.status);
    if (round >= 0) samples[i]!.push(ms);
    // An idle moment, as between real clicks: the recording after a redirect then runs here, not in the next request.
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

console.log(
  `\n${"route".padEnd(30)} ${"p50 ms".padStart(8)} ${"p95 ms".padStart(8)} ${"mean ms".padStart(8)}   (${requests} sequential requests each)`,
);
for (const [i, route] of routes.entries()) {
  const values = samples[i]!;
  const mean = values.reduce((sum, value) => sum + value, 0) / values.length;
  console.log(
    `${route.name.padEnd(30)} ${percentile(values, 50).toFixed(2).padStart(8)} ${percentile(values, 95).toFixed(2).padStart(8)} ${mean.toFixed(2).padStart(8)}`,
  );
}
const bare = percentile(samples[2]!, 50);
console.log(
  `p50 added over the bare route: click redirect ${(percentile(samples[0]!, 50) - bare).toFixed(2)} ms, token check alone ${(percentile(samples[1]!, 50) - bare).toFixed(2)} ms`,
);

// The recording runs after each response: read back what the message's timeline and the account's report saw.
const clicks = requests + warmUp;
for (let attempt = 0; ; attempt++) {
  const message = (await (await fetch(`${workerUrl}/api/v1/messages/${messageId}`, { headers: { Authorization: `Bearer ${apiKey}` } })).json()) as {
    events: { type: string }[];
  };
  const clickedEvents = message.events.filter((event) => event.type === "clicked").length;
  if (clickedEvents === 1 || attempt === 20) {
    console.log(`${clicks} clicks of one link by one recipient: ${clickedEvents} clicked event (once per recipient and link, as it should)`);
    break;
  }
  await new Promise((resolve) => setTimeout(resolve, 250));
}
