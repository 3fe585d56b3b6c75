import { exports } from "cloudflare:workers";
import { expect, vi } from "vitest";
import { call, json } from "./helpers";

export type Contact = {
  id: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  company: string | null;
  phone: string | null;
  country: string | null;
  custom_fields: Record<string, string | number | boolean>;
  status: "subscribed" | "unsubscribed" | "bounced" | "complained" | "pending";
  lists: string[];
  topics: Record<string, boolean>;
  verification: { result: string; status: string; sub_status: string | null; checked_at: string } | null;
  created_at: string;
  updated_at: string;
};

export type ContactImport = {
  id: string;
  status: "pending" | "processing" | "completed" | "failed";
  list_id: string | null;
  total: number;
  processed: number;
  created: number;
  updated: number;
  failed: number;
  error: string | null;
  errors: { row: number; message: string }[];
};

export type ErrorBody = { code: string; message: string; errors?: Record<string, string[]> };

export async function createContact(key: string, body: Record<string, unknown>): Promise<Contact> {
  const response = await call("/api/v1/contacts", { key, body });
  if (response.status !== 201) throw new Error(`contact creation failed: ${response.status} ${await response.text()}`);
  return json<Contact>(response);
}

export async function createList(key: string, name = "Newsletter"): Promise<{ id: string }> {
  const response = await call("/api/v1/lists", { key, body: { name } });
  if (response.status !== 201) throw new Error(`list creation failed: ${response.status} ${await response.text()}`);
  return json<{ id: string }>(response);
}

/** A subscription topic (docs/streams.md): opt-out (`defaultSubscribed`, the API's default) or opt-in. */
export async function createTopic(key: string, name: string, defaultSubscribed = true): Promise<{ id: string }> {
  const response = await call("/api/v1/topics", { key, body: { name, default_subscribed: defaultSubscribed } });
  if (response.status !== 201) throw new Error(`topic creation failed: ${response.status} ${await response.text()}`);
  return json<{ id: string }>(response);
}

/** A multipart upload, as `curl -F file=@contacts.csv` sends it. */
export function postMultipart(path: string, key: string, fields: Record<string, string | File>): Promise<Response> {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  return exports.default.fetch(new Request(`http://localhost${path}`, { method: "POST", headers: { Authorization: `Bearer ${key}` }, body: form }));
}

export function dataUri(csv: string | Uint8Array): string {
  const bytes = typeof csv === "string" ? new TextEncoder().encode(csv) : csv;
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return `data:text/csv;base64,${btoa(binary)}`;
}

/** Polls the import until it is completed or failed: the runtime delivers the queue messages to the Worker. */
export async function waitForImport(key: string, id: string, timeout = 20_000): Promise<ContactImport> {
  return vi.waitFor(
    async () => {
      const response = await call(`/api/v1/contacts/import/${id}`, { key });
      expect(response.status).toBe(200);
      const body = await json<ContactImport>(response);
      expect(["completed", "failed"]).toContain(body.status);
      return body;
    },
    { timeout, interval: 100 },
  );
}
