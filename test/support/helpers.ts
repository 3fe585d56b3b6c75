import { env, exports } from "cloudflare:workers";
import { accountDb, type AccountDb } from "../../src/db/client";

export const ADMIN_TOKEN = "test-admin-token";

type CallOptions = {
  method?: string;
  key?: string;
  headers?: Record<string, string>;
  /** Sent as JSON unless it is already a string. */
  body?: unknown;
};

/** A request to the Worker's own fetch handler, as a client would make it. */
export function call(path: string, options: CallOptions = {}): Promise<Response> {
  const headers = new Headers(options.headers);
  if (options.key) headers.set("Authorization", `Bearer ${options.key}`);
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === "string" ? options.body : JSON.stringify(options.body);
    if (!headers.has("Content-Type")) headers.set("Content-Type", "application/json");
  }
  return exports.default.fetch(
    new Request(`http://localhost${path}`, { method: options.method ?? (body === undefined ? "GET" : "POST"), headers, body }),
  );
}

/** An account as the operator API made it: `database` is the account database that holds its rows. */
export type CreatedAccount = { id: string; api_key: string; name: string; database: string };

/** The D1 binding that holds an account's rows, for a test that reads or writes them directly. */
export function d1Of(account: { database: string }): D1Database {
  return (env as unknown as Record<string, D1Database>)[account.database]!;
}

/** Where the account with this id keeps its rows, as the directory in `DB` says: for `d1Of` and `dbOf`. */
export async function databaseOfAccount(accountId: string): Promise<{ database: string }> {
  const row = await env.DB.prepare("SELECT database FROM accounts WHERE id = ?").bind(accountId).first<{ database: string }>();
  if (!row) throw new Error(`no account ${accountId}`);
  return row;
}

/** The D1 binding that holds the rows of the account with this id (read from the directory in `DB`). */
export const d1OfAccount = async (accountId: string): Promise<D1Database> => d1Of(await databaseOfAccount(accountId));

/** The Drizzle handle for an account's rows, for a test that calls a domain function directly. */
export const dbOf = (account: { database: string }): AccountDb => accountDb(env, account);

export async function createAccount(overrides: Record<string, unknown> = {}): Promise<CreatedAccount> {
  const response = await call("/admin/v1/accounts", {
    key: ADMIN_TOKEN,
    body: { name: "Acme", send_credits: 100, verify_credits: 100, ...overrides },
  });
  if (response.status !== 201) throw new Error(`account creation failed: ${response.status} ${await response.text()}`);
  return response.json();
}

export async function createKey(fullKey: string, body: Record<string, unknown>): Promise<{ id: string; key: string }> {
  const response = await call("/api/v1/api-keys", { key: fullKey, body });
  if (response.status !== 201) throw new Error(`key creation failed: ${response.status} ${await response.text()}`);
  return response.json();
}

export async function json<T = Record<string, unknown>>(response: Response): Promise<T> {
  return (await response.json()) as T;
}
