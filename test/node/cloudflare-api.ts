// A stand-in for the Cloudflare API calls `npm run provision` makes through wrangler (CLOUDFLARE_API_BASE_URL points
// wrangler at it): D1 databases, queues and R2 buckets of one account, kept in memory, in the response envelopes the
// real API uses (and the analytics query `r2 bucket info` makes). Each D1 database is an in-memory SQLite database
// that answers D1's query endpoint, which `wrangler d1 migrations apply --remote` uses. Any other call is answered 404 and recorded, so a test sees what wrangler asked that it does not know.
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { DatabaseSync } from "node:sqlite";

export type CloudflareStandIn = {
  baseUrl: string;
  accountId: string;
  /** name → id */
  databases: Map<string, string>;
  /** id → the database's contents */
  sqlite: Map<string, DatabaseSync>;
  queues: Map<string, string>;
  buckets: Set<string>;
  /** Every request, as "METHOD /path" (no query). */
  requests: string[];
  unknown: string[];
  close(): Promise<void>;
};

const envelope = (result: unknown, resultInfo?: Record<string, number>) => ({
  success: true,
  errors: [],
  messages: [],
  result,
  ...(resultInfo ? { result_info: resultInfo } : {}),
});
const failure = (code: number, message: string) => ({ success: false, errors: [{ code, message }], messages: [], result: null });

async function bodyOf(request: IncomingMessage): Promise<Record<string, unknown>> {
  let text = "";
  for await (const chunk of request) text += chunk;
  return text ? (JSON.parse(text) as Record<string, unknown>) : {};
}

export async function startCloudflareStandIn(accountId = "0123456789abcdef0123456789abcdef"): Promise<CloudflareStandIn> {
  const databases = new Map<string, string>();
  const sqlite = new Map<string, DatabaseSync>();
  const queues = new Map<string, string>();
  const buckets = new Set<string>();
  const requests: string[] = [];
  const unknown: string[] = [];
  const now = new Date().toISOString();
  const queueOf = (name: string, id: string) => ({
    queue_id: id,
    queue_name: name,
    created_on: now,
    modified_on: now,
    producers: [],
    producers_total_count: 0,
    consumers: [],
    consumers_total_count: 0,
  });

  async function answer(request: IncomingMessage, response: ServerResponse) {
    const url = new URL(request.url ?? "/", "http://stand-in");
    const path = url.pathname.replace(/^\/client\/v4/, "");
    const method = request.method ?? "GET";
    requests.push(`${method} ${path}`);
    const send = (status: number, body: unknown) => {
      response.writeHead(status, { "Content-Type": "application/json" });
      response.end(JSON.stringify(body));
    };
    const account = `/accounts/${accountId}`;
    if (path === `${account}/d1/database` && method === "GET") {
      const page = Number(url.searchParams.get("page") ?? 1);
      const list = page === 1 ? [...databases].map(([name, uuid]) => ({ uuid, name, created_at: now, version: "production" })) : [];
      return send(200, envelope(list, { page, per_page: 1000, count: list.length, total_count: databases.size }));
    }
    if (path === `${account}/d1/database` && method === "POST") {
      const { name } = await bodyOf(request);
      if (databases.has(String(name))) return send(400, failure(7502, "A database with that name already exists"));
      const uuid = randomUUID();
      databases.set(String(name), uuid);
      sqlite.set(uuid, new DatabaseSync(":memory:"));
      return send(200, envelope({ uuid, name, created_at: now, version: "production", num_tables: 0, file_size: 0 }));
    }
    // D1's query endpoint: one result per statement; a statement that fails fails the request, as D1's does.
    const query = path.match(new RegExp(`^${account}/d1/database/([0-9a-f-]+)/query$`));
    if (query && method === "POST") {
      const database = sqlite.get(query[1]!);
      if (!database) return send(404, failure(7404, "The database could not be found"));
      const { sql } = await bodyOf(request);
      const started = performance.now();
      try {
        // A read answers its rows; anything else (a migration is many statements) runs as one script, in a transaction.
        const read = /^\s*(SELECT|PRAGMA)\b/i.test(String(sql));
        if (!read) database.exec(`BEGIN;${String(sql)}\nCOMMIT;`);
        const rows = read ? database.prepare(String(sql)).all() : [];
        return send(
          200,
          envelope([{ results: rows, success: true, meta: { duration: performance.now() - started, changes: 0, rows_read: 0, rows_written: 0 } }]),
        );
      } catch (error) {
        if (database.isTransaction) database.exec("ROLLBACK");
        return send(400, failure(7500, `${String(error)}: SQLITE_ERROR`));
      }
    }
    if (path === `${account}/queues` && method === "GET") {
      const name = url.searchParams.get("name");
      const page = Number(url.searchParams.get("page") ?? 1);
      const list = page === 1 ? [...queues].filter(([queue]) => name === null || queue === name).map(([queue, id]) => queueOf(queue, id)) : [];
      return send(200, envelope(list, { page, per_page: 100, count: list.length, total_count: list.length }));
    }
    if (path === `${account}/queues` && method === "POST") {
      const { queue_name: name } = await bodyOf(request);
      if (queues.has(String(name))) return send(409, failure(11009, "Queue name already taken"));
      const id = randomUUID().replaceAll("-", "");
      queues.set(String(name), id);
      return send(200, envelope(queueOf(String(name), id)));
    }
    const queueById = path.match(new RegExp(`^${account}/queues/([0-9a-f]+)$`));
    if (queueById && method === "GET") {
      const found = [...queues].find(([, id]) => id === queueById[1]);
      return found ? send(200, envelope(queueOf(found[0], found[1]))) : send(404, failure(11000, "Queue does not exist"));
    }
    if (path === `${account}/r2/buckets` && method === "POST") {
      const { name } = await bodyOf(request);
      if (buckets.has(String(name))) return send(409, failure(10004, "The bucket you tried to create already exists, and you own it."));
      buckets.add(String(name));
      return send(200, envelope({ name, creation_date: now, location: "WEUR", storage_class: "Standard" }));
    }
    const bucket = path.match(new RegExp(`^${account}/r2/buckets/([a-z0-9-]+)$`));
    if (bucket && method === "GET") {
      return buckets.has(bucket[1]!)
        ? send(200, envelope({ name: bucket[1], creation_date: now, location: "WEUR", storage_class: "Standard" }))
        : send(404, failure(10006, "The specified bucket does not exist."));
    }
    // `r2 bucket info` asks the analytics API for the bucket's size and object count: none yet.
    if (path === "/graphql" && method === "POST") {
      return send(200, { data: { viewer: { accounts: [{ r2StorageAdaptiveGroups: [] }] } }, errors: null });
    }
    unknown.push(`${method} ${path}`);
    return send(404, failure(7003, "Could not route to this path: the stand-in does not know it"));
  }

  const server = createServer((request, response) => {
    answer(request, response).catch((error: unknown) => {
      response.writeHead(500, { "Content-Type": "application/json" });
      response.end(JSON.stringify(failure(10000, String(error))));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/client/v4`,
    accountId,
    databases,
    sqlite,
    queues,
    buckets,
    requests,
    unknown,
    close: () =>
      new Promise((resolve) =>
        server.close(() => {
          for (const database of sqlite.values()) database.close();
          resolve();
        }),
      ),
  };
}
