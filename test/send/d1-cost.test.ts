import { env } from "cloudflare:workers";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { drizzle } from "drizzle-orm/d1";
import { expect, it } from "vitest";
import { findAccount } from "../../src/domain/accounts/accounts";
import { acceptMessage } from "../../src/domain/sending/accept";
import { createAccount } from "../helpers";
import { verifiedDomain } from "./helpers";

/** Counts what the accept path asks of D1: round trips, statements and the rows D1 reports written. */
function countingD1(d1: D1Database) {
  const usage = { roundTrips: 0, statements: 0, rowsChanged: 0, rowsWritten: 0 };
  const roundTrip = <T>(run: () => T): T => {
    usage.roundTrips += 1;
    return run();
  };
  const counted: D1Database = Object.create(d1, {
    batch: {
      value: async (statements: D1PreparedStatement[]) => {
        usage.roundTrips += 1;
        usage.statements += statements.length;
        const results = await d1.batch(statements);
        for (const result of results) {
          usage.rowsChanged += result.meta.changes ?? 0;
          usage.rowsWritten += result.meta.rows_written ?? 0;
        }
        return results;
      },
    },
    // A statement run on its own is a round trip too; wrap them so one slipping into the path is counted.
    prepare: {
      value: (query: string) => {
        const counting = (statement: D1PreparedStatement): D1PreparedStatement =>
          Object.create(statement, {
            bind: { value: (...values: unknown[]) => counting(statement.bind(...values)) },
            first: { value: (...args: [string?]) => roundTrip(() => statement.first(...(args as []))) },
            run: { value: () => roundTrip(() => statement.run()) },
            all: { value: () => roundTrip(() => statement.all()) },
            raw: { value: () => roundTrip(() => statement.raw()) },
          });
        return counting(d1.prepare(query));
      },
    },
  });
  return { counted, usage };
}

it("an accepted single-recipient send with a tag and an Idempotency-Key costs 2 D1 round trips and 7 table rows", async () => {
  const created = await createAccount({ send_credits: 10 });
  const domain = await verifiedDomain(created.api_key);
  const account = (await findAccount(drizzle(env.DB), created.id))!;
  const { counted, usage } = countingD1(env.DB);
  const ctx = createExecutionContext();
  const result = await acceptMessage(
    { ...env, DB: counted },
    ctx,
    { account, testMode: false },
    {
      source: "api",
      from: { address: `hello@${domain.name}` },
      recipients: ["ann@example.org"],
      tags: ["receipt"],
      metadata: {},
      compose: () => ({ subject: "Hi", content: { kind: "compose", to: ["ann@example.org"], text: "Hi", variables: {}, attachments: [] } }),
    },
    { key: "cost-1", route: "POST /send", requestHash: "h" },
  );
  await waitOnExecutionContext(ctx);
  expect(result.status).toBe(202);
  // ledger entry, account balance, the day's usage row (GET /usage), message, recipient, tag, idempotency record
  expect(usage).toMatchObject({ roundTrips: 2, rowsChanged: 7 });
  console.info(
    `D1 per accepted single-recipient send: ${usage.roundTrips} round trips, ${usage.statements} statements, ` +
      `${usage.rowsChanged} table rows written (${usage.rowsWritten} incl. index entries, as D1 bills them)`,
  );
});
