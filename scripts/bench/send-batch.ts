// POST /send/batch against single POST /send through the real local stack (npm run dev's script on free ports), side
// by side in one run: the same `messages` single-recipient sends, accepted either as one POST /send each or as
// POST /send/batch requests of 100, both with `concurrency` requests in flight. The figure is accepted messages per
// second, batch over single (goal ≥ 5). Rounds alternate, and each waits for the previous round's deliveries to reach
// the sink first, so the consumer's work (on workerd's one thread locally) weighs on neither side.
// Run: npx tsx scripts/bench/send-batch.ts [messages=1000]
import { readDevVars } from "../lib/dev-vars.ts";
import { startStack, type Stack } from "../../test/e2e/stack.ts";

const messages = Number(process.argv[2] ?? 1000);
const batchSize = 100;
const concurrency = 16;
const rounds = 3;

async function json<T>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

async function setupAccount(stack: Stack) {
  const created = await json<{ api_key: string }>(
    await fetch(`${stack.workerUrl}/admin/v1/accounts`, {
      method: "POST",
      headers: { Authorization: `Bearer ${readDevVars().ADMIN_TOKEN}`, "Content-Type": "application/json" },
      body: JSON.stringify({
        name: "Bench",
        plan: "enterprise",
        send_credits: 10_000_000,
        daily_send_limit: 10_000_000,
        rate_limit_per_minute: 1_000_000,
      }),
    }),
  );
  const headers = { Authorization: `Bearer ${created.api_key}`, "Content-Type": "application/json" };
  const name = `bench-batch-${Date.now().toString(36)}.example`;
  const domain = await json<{ id: string; records: { name: string; value: string }[] }>(
    await fetch(`${stack.workerUrl}/api/v1/domains`, { method: "POST", headers, body: JSON.stringify({ name }) }),
  );
  for (const record of domain.records)
    await fetch(`${stack.dohAdminUrl}/zone/${record.name}`, { method: "PUT", body: JSON.stringify({ TXT: [record.value] }) });
  await fetch(`${stack.workerUrl}/api/v1/domains/${domain.id}/verify`, { method: "POST", headers });
  return { headers, from: `Bench <bench@${name}>` };
}

/** Sends `requests` requests with `concurrency` in flight; each must answer 202. Returns the seconds taken. */
async function timed(requests: number, request: (i: number) => Promise<Response>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, requests) }, async () => {
      while (next < requests) {
        const response = await request(next++);
        if (response.status !== 202) throw new Error(`a request answered ${response.status}: ${await response.text()}`);
        await response.arrayBuffer();
      }
    }),
  );
  return (performance.now() - started) / 1000;
}

async function sinkCount(stack: Stack): Promise<number> {
  return (await json<{ messages: number }>(await fetch(`${stack.sinkUrl}/api/stats`))).messages;
}

async function drained(stack: Stack, count: number): Promise<void> {
  const deadline = performance.now() + 600_000;
  while ((await sinkCount(stack)) < count) {
    if (performance.now() > deadline) throw new Error(`the sink did not reach ${count} messages in time`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const stack = await startStack();
try {
  const { headers, from } = await setupAccount(stack);
  const message = (label: string, i: number) => ({ from, to: [`${label}-${i}@example.org`], subject: `Bench ${i}`, text: "Hello", tags: ["bench"] });
  let expected = await sinkCount(stack);
  const rates = { single: [] as number[], batch: [] as number[] };
  for (let round = 0; round < rounds; round++) {
    const single = () =>
      timed(messages, (i) =>
        fetch(`${stack.workerUrl}/api/v1/send`, { method: "POST", headers, body: JSON.stringify(message(`single${round}`, i)) }),
      );
    const batch = () =>
      timed(Math.ceil(messages / batchSize), (b) =>
        fetch(`${stack.workerUrl}/api/v1/send/batch`, {
          method: "POST",
          headers,
          body: JSON.stringify(
            Array.from({ length: Math.min(batchSize, messages - b * batchSize) }, (_, i) => message(`batch${round}`, b * batchSize + i)),
          ),
        }),
      );
    // Alternate which side goes first, so a slow start or a warming cache favours neither.
    for (const side of round % 2 === 0 ? (["single", "batch"] as const) : (["batch", "single"] as const)) {
      const seconds = await (side === "single" ? single() : batch());
      rates[side].push(messages / seconds);
      expected += messages;
      await drained(stack, expected);
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const single = median(rates.single);
  const batch = median(rates.batch);
  process.stdout.write(
    `POST /send/batch (${batchSize} per request) ${batch.toFixed(0)} accepted msg/s vs POST /send ${single.toFixed(0)} accepted msg/s ` +
      `(${messages} messages a side, concurrency ${concurrency}, median of ${rounds} rounds): ratio ${(batch / single).toFixed(1)} (goal ≥ 5; ` +
      `rounds: ${rates.batch.map((rate, i) => (rate / rates.single[i]!).toFixed(1)).join(", ")})\n`,
  );
} finally {
  await stack.stop();
}
