import { openCtx } from "../../src/db/client";
import { sharedDb } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { expect, it } from "vitest";
import { createApp } from "../../src/app";
import { findAccount } from "../../src/domain/accounts/accounts";
import { acceptMessage } from "../../src/domain/sending/accept";
import { countingDatabases } from "../support/d1-counting";
import { createAccount } from "../support/helpers";
import { verifiedDomain } from "../support/sending";

/** The figures of the account's database, and `DB`'s round trips (what the isolate's caches did not hold). */
const split = (databases: ReturnType<typeof countingDatabases>, account: { database: string }) => ({
  ...databases.usage[account.database]!,
  sharedRoundTrips: databases.usage.DB!.roundTrips,
});

it("an accepted single-recipient send with a tag and an Idempotency-Key costs 2 round trips and 7 table rows in its account's database, none in DB", async () => {
  const created = await createAccount({ send_credits: 10 });
  expect(created.database).toMatch(/^ACCOUNT_DB_\d+$/);
  const domain = await verifiedDomain(created.api_key);
  const account = (await findAccount(sharedDb(env), created.id))!;
  const databases = countingDatabases(env);
  const accept = async (key: string) => {
    const ctx = createExecutionContext();
    const result = await acceptMessage(
      openCtx(databases.env, ctx, account),
      { account, testMode: false },
      {
        source: "api",
        stream: "transactional",
        from: { address: `hello@${domain.name}` },
        recipients: ["ann@example.org"],
        tags: ["receipt"],
        metadata: {},
        compose: () => ({ subject: "Hi", content: { kind: "compose", to: ["ann@example.org"], text: "Hi", variables: {}, attachments: [] } }),
      },
      { key, route: "POST /send", requestHash: "h" },
    );
    await waitOnExecutionContext(ctx);
    expect(result.kind).toBe("accepted");
  };
  // The first send reads the verified domain from DB (1 round trip beside the account's read batch); the next ones find
  // it in the isolate's cache (30 s).
  await accept("cost-0");
  expect(split(databases, account)).toMatchObject({ roundTrips: 2, sharedRoundTrips: 1 });
  databases.reset();
  await accept("cost-1");
  const usage = databases.usage[account.database]!;
  // one read batch and one write transaction: ledger entry, account balance, the day's usage row (GET /usage), message,
  // recipient, tag, idempotency record
  expect(split(databases, account)).toMatchObject({ roundTrips: 2, rowsChanged: 7, sharedRoundTrips: 0 });
  // The charge is written beside the ledger in the account's own rows: the shared accounts table is not touched, so
  // the accept transaction can stay one transaction once an account's rows live in a database of their own.
  const writes = (table: string) =>
    usage.queries.filter((query) => new RegExp(`^\\s*(INSERT( OR \\w+)? INTO|UPDATE|DELETE FROM)\\s+[\`"]?${table}\\b`, "i").test(query));
  expect(writes("accounts")).toEqual([]);
  expect(writes("account_balances")).toHaveLength(1);
  console.info(
    `D1 per accepted single-recipient send: ${usage.roundTrips} round trips, ${usage.statements} statements, ` +
      `${usage.rowsChanged} table rows written (${usage.rowsWritten} incl. index entries, as D1 bills them) in ${account.database}; ` +
      `${databases.usage.DB!.roundTrips} in DB`,
  );
});

/** Counts the calls made on Durable Object stubs of `namespace` and the sends on `queue`. */
function countingBindings(namespace: DurableObjectNamespace, queue: Queue) {
  const usage = { durableObjectCalls: 0, queueSends: 0 };
  const countedNamespace: DurableObjectNamespace = Object.create(namespace, {
    getByName: {
      value: (name: string) =>
        new Proxy(namespace.getByName(name), {
          get(stub, property) {
            const value: unknown = Reflect.get(stub, property);
            if (typeof value !== "function" || typeof property !== "string" || property === "then") return value;
            return (...args: unknown[]) => {
              usage.durableObjectCalls += 1;
              // Reflect.apply: an RPC method stub would take `.apply` for a remote method of that name
              return Reflect.apply(value as (...args: unknown[]) => unknown, stub, args);
            };
          },
        }),
    },
  });
  // One send or one sendBatch is one call to the queue.
  const countedQueue: Queue = Object.create(queue, {
    send: {
      value: (...args: Parameters<Queue["send"]>) => {
        usage.queueSends += 1;
        return queue.send(...args);
      },
    },
    sendBatch: {
      value: (...args: Parameters<Queue["sendBatch"]>) => {
        usage.queueSends += 1;
        return queue.sendBatch(...args);
      },
    },
  });
  return { countedNamespace, countedQueue, usage };
}

it("a whole accepted POST /send, its key and domain seen in the last few seconds, costs 2 round trips in its account's database, none in DB, 2 Durable Object calls and 1 queue send", async () => {
  const created = await createAccount({ send_credits: 10 });
  const domain = await verifiedDomain(created.api_key);
  const databases = countingDatabases(env);
  const bindings = countingBindings(env.RATE_LIMITER, env.SEND_QUEUE);
  const countedEnv = { ...databases.env, RATE_LIMITER: bindings.countedNamespace, SEND_QUEUE: bindings.countedQueue };
  const app = createApp();
  const send = async (to: string) => {
    const ctx = createExecutionContext();
    const response = await app.fetch(
      new Request("http://localhost/api/v1/send", {
        method: "POST",
        headers: { Authorization: `Bearer ${created.api_key}`, "Content-Type": "application/json" },
        body: JSON.stringify({ from: `hello@${domain.name}`, to: [to], subject: "Hi", text: "Hi" }),
      }),
      countedEnv,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    return response;
  };
  // The first request reads the key from DB and the domain (beside the account's reads); the next ones find both in the
  // isolate's caches (5 s and 30 s).
  expect((await send("first@example.org")).status).toBe(202);
  databases.reset();
  Object.assign(bindings.usage, { durableObjectCalls: 0, queueSends: 0 });
  expect((await send("second@example.org")).status).toBe(202);
  // per-key rate limit (which also counts the API call) and the daily quota, the latter beside the D1 reads
  const usage = split(databases, created);
  expect({ ...usage, ...bindings.usage }).toMatchObject({ roundTrips: 2, sharedRoundTrips: 0, durableObjectCalls: 2, queueSends: 1 });
  console.info(
    `per accepted POST /send (key cached): ${usage.roundTrips} D1 round trips, ${usage.statements} statements, ` +
      `${usage.rowsChanged} table rows written in ${created.database}, ${usage.sharedRoundTrips} in DB, ` +
      `${bindings.usage.durableObjectCalls} Durable Object calls, ${bindings.usage.queueSends} queue send`,
  );
});

it("POST /send/batch costs the same 2 round trips in the account's database, none in DB, 2 Durable Object calls and 1 queue send for 3 messages as for 100", async () => {
  const created = await createAccount({ send_credits: 1000, daily_send_limit: 1000 });
  const domain = await verifiedDomain(created.api_key);
  const databases = countingDatabases(env);
  const bindings = countingBindings(env.RATE_LIMITER, env.SEND_QUEUE);
  const countedEnv = { ...databases.env, RATE_LIMITER: bindings.countedNamespace, SEND_QUEUE: bindings.countedQueue };
  const app = createApp();
  const post = async (count: number, label: string) => {
    const ctx = createExecutionContext();
    const response = await app.fetch(
      new Request("http://localhost/api/v1/send/batch", {
        method: "POST",
        headers: { Authorization: `Bearer ${created.api_key}`, "Content-Type": "application/json" },
        body: JSON.stringify(
          Array.from({ length: count }, (_, i) => ({
            from: `hello@${domain.name}`,
            to: `${label}-${i}@example.org`,
            subject: "Hi",
            text: "Hi",
            tags: ["batch"],
            ...(i % 2 === 1 ? { scheduled_at: new Date(Date.now() + 3_600_000).toISOString() } : {}),
          })),
        ),
      }),
      countedEnv,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(202);
  };
  // Each measured batch right after a request that puts the key and domain in the isolate's caches (the key's for 5 s:
  // on a busy machine a batch of 100 can take longer than that, so one warm-up for all would measure a cache miss).
  const sendBatch = async (count: number, label: string) => {
    await post(1, `${label}-warm`);
    databases.reset();
    Object.assign(bindings.usage, { durableObjectCalls: 0, queueSends: 0 });
    await post(count, label);
    return { ...split(databases, created), ...bindings.usage };
  };
  const small = await sendBatch(3, "small");
  const full = await sendBatch(100, "full");
  expect(small).toMatchObject({ roundTrips: 2, sharedRoundTrips: 0, durableObjectCalls: 2, queueSends: 1 });
  expect(full).toMatchObject({ roundTrips: 2, sharedRoundTrips: 0, durableObjectCalls: 2, queueSends: 1 });
  console.info(
    `per accepted POST /send/batch of 100 (key cached): ${full.roundTrips} D1 round trips, ${full.statements} statements in ${created.database}, ` +
      `${full.rowsChanged} table rows written, ${full.durableObjectCalls} Durable Object calls, ${full.queueSends} queue send`,
  );
});
