// The mailbox prober in bulk: 10,000 addresses (200 domains, 50 addresses each, 80% existing mailboxes) over 20 MX
// hosts on loopback (127.0.1.1 to 127.0.1.20, smtp-server, each pausing 100 ms before its greeting as real MTAs
// do), sent as a bulk job sends them: signed requests of 500 domain-sorted addresses, 10 at a time (a queue batch).
// Run twice in the same process: the prober as configured by default (addresses grouped per MX host, at most 2
// connections per host, up to 200 RCPTs per connection, 250 ms between connections to a host), then with one
// connection per address (PROBE_RCPTS_PER_CONNECTION=1, no pacing: the usual open-source approach, at its fastest
// under the same 2-connection cap). Reports addresses per second, connections per host and the ratio.
//
//   npx tsx scripts/bench/prober.ts [addresses=10000]

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BRIDGE_SIGNATURE_HEADER, PROBE_BULK_BUDGET_MS, PROBE_PATH, ProbeResponse, signBridgeRequest } from "@mailforge/bridge-contract";
import { createMemoryLogger } from "../../smtp-bridge/src/log.ts";
import { loadProberConfig } from "../../smtp-bridge/src/prober/config.ts";
import { createProberServer } from "../../smtp-bridge/src/prober/server.ts";
import { createDohServer, type ZoneEntry } from "../dev/doh-server.ts";
import { createMxHosts, type MxBehaviour } from "../dev/mx-hosts.ts";

const total = Number(process.argv[2] ?? 10_000);
const HOSTS = 20;
const PER_DOMAIN = 50;
const CHUNK = 500;
const PARALLEL_CHUNKS = 10;
const SECRET = "bench-prober-secret-0123456789";

const hostAddress = (h: number) => `127.0.1.${h + 1}`;
const mailboxes = Object.fromEntries(Array.from({ length: PER_DOMAIN * 0.8 }, (_, i) => [`user${i}`, "ok" as const]));
const behaviours: Record<string, MxBehaviour> = Object.fromEntries(
  Array.from({ length: HOSTS }, (_, h) => [hostAddress(h), { greetingDelayMs: 100, mailboxes }]),
);
const domains = Array.from({ length: Math.ceil(total / PER_DOMAIN) }, (_, d) => `d${String(d).padStart(4, "0")}.bench-mx.test`);
const zone: Record<string, ZoneEntry> = {};
for (let h = 0; h < HOSTS; h++) zone[`mx${h}.bench-mx.test`] = { A: [hostAddress(h)] };
domains.forEach((domain, d) => {
  zone[domain] = { MX: [{ priority: 10, exchange: `mx${d % HOSTS}.bench-mx.test` }] };
});
// domain-sorted, as a job's input is
const addresses = domains.flatMap((domain) => Array.from({ length: PER_DOMAIN }, (_, i) => `user${i}@${domain}`)).slice(0, total);

const dir = await mkdtemp(join(tmpdir(), "bench-prober-"));
await writeFile(join(dir, "zone.json"), JSON.stringify(zone));
const doh = createDohServer({ zonePath: join(dir, "zone.json") });
const dohPort = await doh.listen(0, "127.0.0.1");
const mx = createMxHosts(behaviours);
const smtpPort = await mx.listen(0);

async function run(label: string, env: Record<string, string>) {
  const prober = createProberServer(
    loadProberConfig({
      PROBER_PORT: "0",
      PROBER_SECRET: SECRET,
      PROBE_HELO_NAME: "bench.mailforge.test",
      DOH_URL: `http://127.0.0.1:${dohPort}/dns-query`,
      PROBE_SMTP_PORT: String(smtpPort),
      PROBE_ALLOW_PRIVATE: "1",
      ...env,
    }),
    { logger: createMemoryLogger() },
  );
  const url = `http://127.0.0.1:${await prober.listen()}${PROBE_PATH}`;
  mx.resetStats();
  const chunks = Array.from({ length: Math.ceil(addresses.length / CHUNK) }, (_, i) => addresses.slice(i * CHUNK, (i + 1) * CHUNK));
  const outcomes: Record<string, number> = {};
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: PARALLEL_CHUNKS }, async () => {
      while (next < chunks.length) {
        const chunk = chunks[next++]!;
        const body = JSON.stringify({ addresses: chunk, budget_ms: PROBE_BULK_BUDGET_MS });
        const response = await fetch(url, {
          method: "POST",
          headers: { [BRIDGE_SIGNATURE_HEADER]: await signBridgeRequest(SECRET, { method: "POST", path: PROBE_PATH, body }) },
          body,
        });
        if (response.status !== 200) throw new Error(`${label}: ${response.status} ${await response.text()}`);
        for (const result of ProbeResponse.parse(await response.json()).results) {
          const outcome = result.detail ? `${result.outcome} (${result.detail})` : result.outcome;
          outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await prober.close();
  const stats = [...mx.hosts.values()].map((host) => host.stats);
  const connections = stats.map((s) => s.connections);
  const rcpts = stats.flatMap((s) => s.rcptsPerConnection);
  const rate = addresses.length / seconds;
  process.stdout.write(
    `${label}: ${addresses.length} addresses in ${seconds.toFixed(1)} s = ${rate.toFixed(0)} addresses/s; ` +
      `connections per host ${Math.min(...connections)}-${Math.max(...connections)} (total ${connections.reduce((a, b) => a + b, 0)}), ` +
      `most at once per host ${Math.max(...stats.map((s) => s.maxConcurrent))}, ` +
      `RCPTs per connection ${(rcpts.reduce((a, b) => a + b, 0) / Math.max(1, rcpts.length)).toFixed(1)} on average, ` +
      `DATA commands ${stats.reduce((sum, s) => sum + s.dataCommands, 0)}; outcomes ${JSON.stringify(outcomes)}\n`,
  );
  return rate;
}

try {
  const grouped = await run("grouped per MX host (defaults)", {});
  const single = await run("one connection per address", { PROBE_RCPTS_PER_CONNECTION: "1", PROBE_HOST_CONNECT_GAP_MS: "0" });
  process.stdout.write(`ratio grouped / one connection per address: ${(grouped / single).toFixed(1)}x (goal >= 5x)\n`);
} finally {
  await mx.close();
  await doh.close();
  await rm(dir, { recursive: true, force: true });
}
