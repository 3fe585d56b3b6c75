import type { Ctx } from "../../db/client";
import { peerSignatureHeaders, peerWebhookBody } from "./formats";
import { createResolver, type DnsResolver } from "../dns/doh";
import { newId, nowIso } from "../../lib/ids";
import type { EventType } from "../events/events";
import { findDispatchedEvents } from "./dispatch";
import { lastAttemptNumber, logDeliveryAttempt, signingSecrets, subscribesTo, type WebhookEndpointRow } from "./endpoints";
import { sampleEventData } from "./samples";
import { signWebhook } from "./signing";
import { allowPrivateWebhookUrls, checkWebhookUrl } from "./url-policy";
import { config } from "../../config";
import type { WebhookEnvelope } from "./envelope";
import { endpointReadsInbound, replyWordsFor } from "../inbound/reply-words";

/** Spec, Events rule 2: a failed delivery is retried after 1 min, 5 min, 30 min, 2 h, 6 h and 12 h. */
export const RETRY_DELAYS_SECONDS = [60, 300, 1800, 7200, 21600, 43200] as const;
/** The first attempt plus one per retry. */
export const MAX_ATTEMPTS = RETRY_DELAYS_SECONDS.length + 1;
export const DELIVERY_TIMEOUT_MS = 10_000;
export const RESPONSE_SNIPPET_MAX_CHARS = 500;

// Enough bytes for 500 characters of UTF-8 text; the rest of a large error page is never read.
const SNIPPET_MAX_BYTES = 4 * RESPONSE_SNIPPET_MAX_CHARS;
const USER_AGENT = "Mailforge-Webhooks/1.0";

export function envelopeBody(event: WebhookEnvelope): string {
  return JSON.stringify({ id: event.id, type: event.type, created_at: event.created_at, data: event.data });
}

export type AttemptResult = {
  ok: boolean;
  /** null when no HTTP response came back (timeout, connection error, URL refused). */
  statusCode: number | null;
  durationMs: number;
  /** The start of the response body, or what went wrong when there was none; at most 500 characters. */
  responseSnippet: string | null;
};

/** How old a DNS answer the SSRF check at delivery time may use: never older than this, nor than its own TTL. */
export const DELIVERY_DNS_MAX_AGE_S = 30;

export type DeliveryContext = {
  env: Env;
  /** Fresh answers only (see DELIVERY_DNS_MAX_AGE_S), shared by the deliveries of one run. */
  resolver: DnsResolver;
  timeoutMs: number;
};

export function deliveryContext(env: Env, options: { timeoutMs?: number } = {}): DeliveryContext {
  // Not the D1 DNS cache: its rows live as long as the record's TTL (up to a day), so a name re-pointed to a private
  // address after an earlier delivery would still pass on the old answer.
  const resolver = createResolver({ url: config(env).dohUrl, maxAgeSeconds: DELIVERY_DNS_MAX_AGE_S });
  return { env, resolver, timeoutMs: options.timeoutMs ?? DELIVERY_TIMEOUT_MS };
}

/**
 * One signed POST of `event` to `endpoint`, with the URL policy checked again first on a fresh DNS answer (the name
 * may have moved to a private address since the endpoint was saved).
 *
 * Why this is not airtight: fetch() in Workers cannot be told which address to connect to, so it resolves the name
 * again itself. A name with a near-zero TTL served by a hostile DNS server can answer our lookup with a public
 * address and fetch's, a moment later, with a private one (DNS rebinding). The fresh lookup narrows that window to
 * the gap between two lookups of one delivery and catches every name re-pointed before it; closing it needs an
 * egress proxy that checks the address it actually connects to.
 */
export async function attemptDelivery(
  context: DeliveryContext,
  endpoint: Pick<WebhookEndpointRow, "url" | "secret" | "previousSecret" | "previousSecretExpiresAt" | "events" | "format">,
  stored: WebhookEnvelope,
): Promise<AttemptResult> {
  const event = { ...stored, data: replyWordsFor(endpointReadsInbound(endpoint), stored.type, stored.data) };
  const started = Date.now();
  const body = endpoint.format === "mailforge" ? envelopeBody(event) : peerWebhookBody(endpoint.format, event);
  // A peer that has no such event would not send one: nothing is posted, and nothing is left to retry.
  if (body === undefined) {
    return { ok: true, statusCode: null, durationMs: 0, responseSnippet: `Not sent: ${event.type} has no ${endpoint.format} counterpart` };
  }
  const check = await checkWebhookUrl(endpoint.url, { allowPrivate: allowPrivateWebhookUrls(context.env), resolver: context.resolver });
  if (!check.ok) {
    return { ok: false, statusCode: null, durationMs: Date.now() - started, responseSnippet: `Not sent: ${check.reason}` };
  }
  const signature = await signWebhook({
    secrets: await signingSecrets(endpoint, config(context.env).encryptionKey),
    eventId: event.id,
    timestamp: Math.floor(Date.now() / 1000),
    body,
  });
  return postWebhook({
    url: check.url,
    body,
    headers: { ...signature, ...peerSignatureHeaders(endpoint.format, signature) },
    timeoutMs: context.timeoutMs,
  });
}

export async function postWebhook(input: { url: string; body: string; headers: Record<string, string>; timeoutMs: number }): Promise<AttemptResult> {
  const started = Date.now();
  const signal = AbortSignal.timeout(input.timeoutMs);
  try {
    const response = await fetch(input.url, {
      method: "POST",
      headers: { ...input.headers, "Content-Type": "application/json", "User-Agent": USER_AGENT },
      body: input.body,
      // A redirect is not a delivery: following it would also let a public URL bounce us to a private one.
      redirect: "manual",
      signal,
    });
    let snippet = await readSnippet(response);
    if (response.status >= 300 && response.status < 400) {
      const location = response.headers.get("Location");
      snippet = `Redirect${location ? ` to ${location}` : ""} not followed; answer with a 2xx status. ${snippet}`;
    }
    return {
      ok: response.status >= 200 && response.status < 300,
      statusCode: response.status,
      durationMs: Date.now() - started,
      responseSnippet: snippet.slice(0, RESPONSE_SNIPPET_MAX_CHARS),
    };
  } catch (error) {
    const timedOut = signal.aborted;
    const reason = timedOut
      ? `Timed out after ${input.timeoutMs / 1000} s`
      : `Request failed: ${error instanceof Error ? error.message : String(error)}`;
    return { ok: false, statusCode: null, durationMs: Date.now() - started, responseSnippet: reason.slice(0, RESPONSE_SNIPPET_MAX_CHARS) };
  }
}

async function readSnippet(response: Response): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < SNIPPET_MAX_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } catch {
    // The body broke off or timed out after the status line arrived: the status decides, the snippet is partial.
  } finally {
    // Releases the connection without downloading the rest.
    await reader.cancel().catch(() => undefined);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  // A cut multi-byte character at the end decodes to U+FFFD instead of throwing.
  return new TextDecoder().decode(bytes.subarray(0, SNIPPET_MAX_BYTES));
}

/**
 * Sends one event of `type` with sample data to the endpoint now, signed like every delivery, and logs it (never
 * retried). Works on a disabled endpoint, so its owner can check it before re-enabling it.
 */
export async function sendTestEvent(
  ctx: Ctx,
  endpoint: WebhookEndpointRow,
  type: EventType,
): Promise<{ event: WebhookEnvelope; result: AttemptResult }> {
  const event: WebhookEnvelope = { id: newId("evt"), type, created_at: nowIso(), data: sampleEventData[type] };
  return { event, result: await deliverOnce(ctx, endpoint, event, 1) };
}

/**
 * Sends an event the endpoint already had (a delivery from its log) once more, now, signed like every delivery, and
 * logs it as the next attempt so the original attempts stay in the log. Never retried: the person replaying it is
 * watching. undefined when the event is not the endpoint's account's.
 */
export async function replayEvent(ctx: Ctx, endpoint: WebhookEndpointRow, eventId: string): Promise<AttemptResult | undefined> {
  const { db } = ctx;
  const event = (await findDispatchedEvents(db, [eventId])).get(eventId);
  // Only what the endpoint subscribes to: a replay must not send it events (received mail) it was never given.
  if (!event || event.accountId !== endpoint.accountId || !subscribesTo(endpoint.events, event.type)) return undefined;
  const { accountId: _accountId, ...envelope } = event;
  const attempt = (await lastAttemptNumber(db, endpoint.id, event.id)) + 1;
  return deliverOnce(ctx, endpoint, envelope, attempt);
}

/** One attempt made now on someone's request (a test or a replay), logged as final: it is never retried. */
async function deliverOnce(ctx: Ctx, endpoint: WebhookEndpointRow, event: WebhookEnvelope, attempt: number): Promise<AttemptResult> {
  const { env, db } = ctx;
  const result = await attemptDelivery(deliveryContext(env), endpoint, event);
  await logDeliveryAttempt(db, {
    endpointId: endpoint.id,
    accountId: endpoint.accountId,
    eventId: event.id,
    eventType: event.type,
    attempt,
    status: result.ok ? "succeeded" : "failed",
    statusCode: result.statusCode,
    responseSnippet: result.responseSnippet,
    durationMs: result.durationMs,
    nextRetryAt: null,
    createdAt: nowIso(),
  });
  return result;
}
