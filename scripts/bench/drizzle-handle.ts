// What opening a Drizzle handle costs, with the schema (as src/db/client.ts opens one) and without, side by side;
// client.ts keeps one per binding because of the difference. `npx tsx scripts/bench/drizzle-handle.ts`
import { drizzle } from "drizzle-orm/d1";

// Loaded untyped: the schema's imports are written for the Worker's bundler, not for this Node typecheck.
const schemaPath = "../../src/db/schema/index.ts";
const schema = (await import(schemaPath)) as Record<string, unknown>;
// Opening a handle never touches its client, so any object stands in for the binding.
const binding = {} as Parameters<typeof drizzle>[0];
const perHandleMicroseconds = (open: () => unknown, times = 2_000) => {
  for (let i = 0; i < 200; i++) open();
  const started = performance.now();
  for (let i = 0; i < times; i++) open();
  return ((performance.now() - started) * 1000) / times;
};

const withSchema = perHandleMicroseconds(() => drizzle(binding, { schema }));
const bare = perHandleMicroseconds(() => drizzle(binding));
process.stdout.write(
  `drizzle handle: ${withSchema.toFixed(1)} µs with the schema, ${bare.toFixed(1)} µs without (${(withSchema / bare).toFixed(0)}x)\n`,
);
