// `npm run bench`: every benchmark, each printing its figures side by side with its baseline or peer from the same
// run. The stack-based ones share one local stack (npm run dev's script on free ports, its own state directory);
// send.ts and send-batch.ts start their own, since they measure the Worker's request rate from a cold account.
// BENCH_ONLY=send,smtp-bridge (script names, comma-separated) runs only those; the stack starts only if one needs it.
import { spawn } from "node:child_process";
import { startStack } from "../../test/e2e/stack.ts";

type Step = { title: string; command: string[]; env?: Record<string, string>; keep?: (line: string) => boolean };

const only = process.env.BENCH_ONLY?.split(",").map((name) => name.trim());
/** The script a step runs (`send` for scripts/bench/send.ts, `d1-cost` for the vitest file). */
const scriptOf = (command: string[]) => /([\w-]+?)(\.test)?\.ts$/.exec(command.findLast((part) => part.endsWith(".ts")) ?? "")?.[1] ?? "";
const wanted = (command: string[]) => !only || only.includes(scriptOf(command));

function run(step: Step): Promise<void> {
  if (!wanted(step.command)) return Promise.resolve();
  process.stdout.write(`\n## ${step.title}\n$ ${step.command.join(" ")}\n`);
  return new Promise((resolve, reject) => {
    const child = spawn(step.command[0]!, step.command.slice(1), { env: { ...process.env, ...step.env }, stdio: ["ignore", "pipe", "inherit"] });
    let buffered = "";
    child.stdout.on("data", (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split("\n");
      buffered = lines.pop() ?? "";
      for (const line of lines) if (!step.keep || step.keep(line)) process.stdout.write(`${line}\n`);
    });
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${step.title} exited with ${code}`))));
  });
}

const tsx = "node_modules/.bin/tsx";
await run({ title: "render + MIME + DKIM CPU per message (Node, key imported once)", command: [tsx, "scripts/bench/render-mime-dkim.ts", "2000"] });
await run({ title: "opening a Drizzle handle with and without the schema (Node)", command: [tsx, "scripts/bench/drizzle-handle.ts"] });
await run({
  title: "D1, Durable Object and queue cost of an accepted send (measured in workerd)",
  command: ["node_modules/.bin/vitest", "run", "--config", "vitest.config.ts", "test/sending/d1-cost.test.ts"],
  keep: (line) => line.includes("per accepted"),
});
await run({
  title: "D1 round trips per database for a mixed load over both account databases (measured in workerd)",
  command: ["node_modules/.bin/vitest", "run", "--config", "vitest.config.ts", "test/sending/d1-spread.test.ts"],
  keep: (line) => line.includes("accepted and delivered"),
});
await run({ title: "POST /send accept rate and delivery rate", command: [tsx, "scripts/bench/send.ts", "200", "300"] });
await run({ title: "POST /send/batch vs single POST /send: accepted messages per second", command: [tsx, "scripts/bench/send-batch.ts", "1000"] });
await run({ title: "verification engine without DNS vs peers", command: [tsx, "scripts/bench/verification.ts", "--engine-only"] });
await run({
  title: "mailbox prober: 10,000 addresses over 20 MX hosts, grouped per host vs one connection per address",
  command: [tsx, "scripts/bench/prober.ts", "10000"],
});

const stackBenches = [
  "verification",
  "contact-import",
  "reports",
  "dashboard",
  "tracking",
  "automations",
  "webhooks",
  "smtp-bridge",
  "hygiene",
  "campaign",
];
const stack = !only || stackBenches.some((name) => only.includes(name)) ? await startStack() : undefined;
if (stack) {
  try {
    const env = {
      WORKER_URL: stack.workerUrl,
      WORKER_PORT: String(stack.ports.WORKER_PORT),
      DOH_PORT: String(stack.ports.DOH_PORT),
      DOH_ADMIN_URL: stack.dohAdminUrl,
      DEV_STATE_DIR: stack.stateDir,
      API_KEY: stack.apiKey,
    };
    await run({
      title: "50,000-address bulk verification job and its DoH queries",
      command: [tsx, "scripts/bench/verification.ts", "--job-only"],
      env,
    });
    await run({ title: "100,000-row contact import", command: [tsx, "scripts/bench/contact-import.ts", "100000"], env });
    await run({
      title: "GET /reports/overview over 100k vs 1M events vs a bare keyed route",
      command: [tsx, "scripts/bench/reports.ts", "100"],
      env,
    });
    await run({ title: "dashboard overview time to first byte vs a bare keyed route", command: [tsx, "scripts/bench/dashboard.ts", "200"], env });
    await run({
      title: "click redirect /t/c/<token> vs a bare route on the same Worker",
      command: [tsx, "scripts/bench/tracking.ts", "300"],
      env: { ...env, SINK_HTTP_PORT: String(stack.ports.SINK_HTTP_PORT) },
    });
    await run({
      title: "automation triggers/s via the API and the private URL vs a bare keyed route",
      command: [tsx, "scripts/bench/automations.ts", "300"],
      env,
    });
    await run({ title: "webhook deliveries vs a plain fetch loop; a slow receiver", command: [tsx, "scripts/bench/webhooks.ts", "500", "200"], env });
    await run({ title: "SMTP bridge vs a bare smtp-server; bridge RSS", command: [tsx, "scripts/bench/smtp-bridge.ts", "300"], env });
    await run({
      title: "pre-send hygiene: 10,000 contacts over 50 domains checked and fanned out vs one by one; a second campaign probes nothing",
      command: [tsx, "scripts/bench/hygiene.ts", "10000", "500"],
      env: { ...env, DEV_MX_PORT: String(stack.ports.DEV_MX_PORT) },
    });
    // Last: the campaign's 100,000 deliveries drain in the background and would slow any bench after it.
    await run({
      title: "100,000-contact campaign: POST send to the last message enqueued",
      command: [tsx, "scripts/bench/campaign.ts", process.env.BENCH_FANOUT ?? "100000"],
      env,
    });
  } finally {
    await stack.stop();
  }
}
