import { createExecutionContext, createMessageBatch, getQueueResult, type QueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import type { WebhookDeliveryMessage } from "../../src/domain/webhooks/dispatch";
import { deliverWebhookBatch } from "../../src/queues/webhooks";
import { call, json } from "./helpers";

// ---------------------------------------------------------------------------------------------------------------
// The signature check written from the spec text alone (Authentication 8), independent of src/: "header
// `X-Service-Signature` has the form `t=<unix_seconds>,v1=<hex_digest>`. The digest is HMAC-SHA256, keyed with the
// endpoint secret, over the string `<t>.<raw_request_body>`, hex-encoded. Compare in constant time. Reject the
// request when the absolute difference between current time and t exceeds 300 seconds."

export async function specVerify(secret: string, header: string, rawBody: string, nowSeconds: number): Promise<boolean> {
  const fields = header.split(",").map((part) => part.split("=", 2) as [string, string]);
  const t = fields.find(([name]) => name === "t")?.[1];
  const digests = fields.filter(([name]) => name === "v1").map(([, value]) => value);
  if (!t || !/^\d+$/.test(t) || digests.length === 0) return false;
  if (Math.abs(nowSeconds - Number(t)) > 300) return false;
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${t}.${rawBody}`)));
  const expected = [...mac].map((byte) => byte.toString(16).padStart(2, "0")).join("");
  let matched = false;
  for (const digest of digests) {
    let diff = digest.length ^ expected.length;
    for (let i = 0; i < expected.length; i++) diff |= expected.charCodeAt(i) ^ (digest.charCodeAt(i) || 0);
    matched = diff === 0 || matched;
  }
  return matched;
}

/** The v1 digests of an `X-Service-Signature` header, in order. */
export function v1Digests(header: string): string[] {
  return header
    .split(",")
    .filter((part) => part.startsWith("v1="))
    .map((part) => part.slice(3));
}

// ---------------------------------------------------------------------------------------------------------------
// The programmable receiver (scripts/dev/webhook-receiver.ts) started by the global setup. Tests share it, so each
// test receives on a path of its own.

export type ReceivedRequest = {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  received_at_ms: number;
  answered_status: number;
};

export function receiverPath(): string {
  return `/hooks/${crypto.randomUUID()}`;
}

export function receiverUrl(path: string): string {
  return `${env.TEST_WEBHOOK_RECEIVER_URL}${path}`;
}

export async function addReceiverRule(rule: { path: string; status: number; delay_ms?: number; times?: number; body?: string }) {
  const response = await fetch(`${env.TEST_WEBHOOK_RECEIVER_URL}/_rules`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(rule),
  });
  expect(response.status).toBe(201);
}

export async function receivedOn(path: string): Promise<ReceivedRequest[]> {
  const response = await fetch(`${env.TEST_WEBHOOK_RECEIVER_URL}/_requests?path=${encodeURIComponent(path)}`);
  return (await response.json<{ data: ReceivedRequest[] }>()).data;
}

/** Polls the receiver until `count` requests arrived on `path` (deliveries through the real queue are asynchronous). */
export async function waitForRequests(path: string, count: number, timeoutMs = 15_000): Promise<ReceivedRequest[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const requests = await receivedOn(path);
    if (requests.length >= count) return requests;
    if (Date.now() > deadline) throw new Error(`expected ${count} request(s) on ${path}, got ${requests.length}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// A WEBHOOK_QUEUE stand-in that records what is sent, so dispatch and retry scheduling are asserted exactly
// (delaySeconds included) without waiting for the real queue.

export type SentMessage = { body: WebhookDeliveryMessage; delaySeconds: number | undefined };

export class RecordingQueue {
  readonly sent: SentMessage[] = [];
  readonly batches: number[] = [];

  async send(body: WebhookDeliveryMessage, options?: QueueSendOptions): Promise<QueueSendResponse> {
    this.sent.push({ body, delaySeconds: options?.delaySeconds });
    return { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } };
  }

  async sendBatch(messages: Iterable<MessageSendRequest<WebhookDeliveryMessage>>): Promise<QueueSendBatchResponse> {
    const list = [...messages];
    this.batches.push(list.length);
    for (const message of list) this.sent.push({ body: message.body, delaySeconds: message.delaySeconds });
    return { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } };
  }

  take(): SentMessage[] {
    return this.sent.splice(0);
  }
}

/** `overrides` may also set vars (strings) that src/config.ts reads, such as ALLOW_PRIVATE_WEBHOOK_URLS. */
export function envWith(queue: RecordingQueue, overrides: Partial<Env> & Record<string, unknown> = {}): Env {
  return { ...env, WEBHOOK_QUEUE: queue as unknown as Queue, ...overrides };
}

let messageSeq = 0;

/** Runs the webhook consumer on these message bodies, as the queue would, and returns the ack/retry outcome. */
export async function runConsumer(bodies: unknown[], options: { env: Env; timeoutMs?: number }): Promise<QueueResult> {
  const batch = createMessageBatch(
    "mailforge-webhooks",
    bodies.map((body) => ({ id: `msg-${++messageSeq}`, timestamp: new Date(), attempts: 1, body })),
  );
  await deliverWebhookBatch(batch, options.env, { timeoutMs: options.timeoutMs });
  return getQueueResult(batch, createExecutionContext());
}

// ---------------------------------------------------------------------------------------------------------------

export type Endpoint = {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  secret: string;
  description: string | null;
  disabled_reason: string | null;
  failing_since: string | null;
  previous_secret_expires_at: string | null;
};

export async function createEndpoint(key: string, body: Record<string, unknown>): Promise<Endpoint> {
  const response = await call("/api/v1/webhooks", { key, body });
  if (response.status !== 201) throw new Error(`endpoint creation failed: ${response.status} ${await response.text()}`);
  return json<Endpoint>(response);
}

export type Delivery = {
  id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  status: string;
  status_code: number | null;
  response_snippet: string | null;
  duration_ms: number | null;
  next_retry_at: string | null;
  created_at: string;
};

export async function deliveriesOf(key: string, endpointId: string, query = ""): Promise<Delivery[]> {
  const response = await call(`/api/v1/webhooks/${endpointId}/deliveries?limit=100${query}`, { key });
  expect(response.status).toBe(200);
  return (await json<{ data: Delivery[] }>(response)).data;
}

let dedupeSeq = 0;
export const uniqueKey = (prefix: string) => `${prefix}:${Date.now()}:${++dedupeSeq}:${crypto.randomUUID()}`;
