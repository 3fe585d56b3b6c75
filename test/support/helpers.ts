import { exports } from "cloudflare:workers";

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

export type CreatedAccount = { id: string; api_key: string; name: string };

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
