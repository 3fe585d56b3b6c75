// Webhook endpoints and their delivery log. This module owns their queries: the webhooks routes, the delivery
// consumer, the dead-letter consumer and the dispatcher go through it.

import { and, eq, inArray, sql } from "drizzle-orm";
import { statement, type AccountDb, type Ctx } from "../../db/client";
import { webhookDeliveries, webhookEndpoints } from "../../db/schema";
import { chunk } from "../../lib/chunk";
import { decryptSecret, encryptSecret } from "../../lib/crypto";
import { newId, nowIso } from "../../lib/ids";
import { accountPage, keysetPage } from "../pagination";
import { createResolver } from "../dns/doh";
import type { EventType } from "../events/events";
import { findOwned, owned, updateOwned } from "../owned";
import { refused, type Refusal } from "../refusal";
import { generateWebhookSecret } from "./signing";
import { allowPrivateWebhookUrls, checkWebhookUrl } from "./url-policy";
import { config } from "../../config";

export type WebhookEndpointRow = typeof webhookEndpoints.$inferSelect;
export type WebhookFormat = WebhookEndpointRow["format"];
export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;

/** What an endpoint subscribes to: event types, or `*` for every type (including types added later). */
export type EventSubscription = EventType | "*";

/** After a rotation the old secret keeps signing this long, so receivers can roll out the new one without gaps. */
export const ROTATION_GRACE_MS = 24 * 60 * 60 * 1000;

/** An endpoint whose every delivery has failed for this long is disabled. */
export const AUTO_DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;

/** At most this many endpoints per account: each one multiplies every event into one more delivery. */
export const MAX_ENDPOINTS_PER_ACCOUNT = 20;

export function subscribesTo(subscription: readonly string[], type: string): boolean {
  return subscription.includes("*") || subscription.includes(type);
}

/**
 * Received mail (its sender, subject, excerpt and attachment links) goes only to endpoints set up by a key that may
 * read it: subscribing to `email.received`, by name or through `*`, and changing such an endpoint need the `inbound`
 * scope (or full access). Otherwise a `webhooks` key could point an endpoint at itself and read the mailbox.
 */
export function receivesInboundMail(subscription: readonly string[]): boolean {
  return subscribesTo(subscription, "email.received");
}

function inboundScopeRefusal(action: string): Refusal {
  return refused(
    "scope_missing",
    `${action} an endpoint that receives email.received (by name or through "*") needs a key with the \`inbound\` scope; pick other events or use such a key`,
  );
}

/** `["*", "delivered"]` is just `["*"]`; duplicates go. */
export function normalizeSubscription(events: readonly EventSubscription[]): EventSubscription[] {
  return events.includes("*") ? ["*"] : [...new Set(events)];
}

export function previousSecretActive(row: Pick<WebhookEndpointRow, "previousSecret" | "previousSecretExpiresAt">, now: number): boolean {
  return row.previousSecret !== null && row.previousSecretExpiresAt !== null && Date.parse(row.previousSecretExpiresAt) > now;
}

/** The secrets a delivery is signed with, newest first: the current one, plus the previous one during its 24 h grace. */
export async function signingSecrets(
  row: Pick<WebhookEndpointRow, "secret" | "previousSecret" | "previousSecretExpiresAt">,
  encryptionKey: string,
  now = Date.now(),
): Promise<string[]> {
  const current = await decryptSecret(row.secret, encryptionKey);
  const previous = previousSecretActive(row, now) ? row.previousSecret : null;
  return previous ? [current, await decryptSecret(previous, encryptionKey)] : [current];
}

/**
 * The URL as stored, or why it is refused (checked against the URL policy on a DNS answer): a 422 on `url`, or a 503
 * when DNS did not answer and the same URL may pass later.
 */
async function acceptableUrl(ctx: Ctx, url: string): Promise<{ kind: "ok"; url: string } | Refusal> {
  const { env } = ctx;
  const check = await checkWebhookUrl(url, {
    allowPrivate: allowPrivateWebhookUrls(env),
    resolver: createResolver({ url: config(env).dohUrl, db: ctx.shared }),
  });
  if (check.ok) return { kind: "ok", url: check.url };
  if (check.transient) return refused("upstream_unavailable", check.reason);
  return refused("validation_failed", "The webhook URL is not accepted", { errors: { url: [check.reason] } });
}

/** A page of the account's endpoints, newest first (`limit + 1` rows, for `pageOf`). */
export function listEndpoints(db: AccountDb, accountId: string, page: { cursor?: string; limit: number }): Promise<WebhookEndpointRow[]> {
  return accountPage(db, webhookEndpoints, accountId, page);
}

export async function findEndpoint(db: AccountDb, accountId: string, endpointId: string): Promise<WebhookEndpointRow | undefined> {
  return findOwned(db, webhookEndpoints, accountId, endpointId);
}

/** Endpoints by id, whatever their account (the delivery consumer checks the account against the event's). */
export async function findEndpointsByIds(db: AccountDb, ids: string[]): Promise<Map<string, WebhookEndpointRow>> {
  const found = new Map<string, WebhookEndpointRow>();
  for (const slice of chunk(ids, IDS_PER_STATEMENT)) {
    const rows = await db.select().from(webhookEndpoints).where(inArray(webhookEndpoints.id, slice)).all();
    for (const row of rows) found.set(row.id, row);
  }
  return found;
}

// D1 binds at most 100 parameters per statement.
const IDS_PER_STATEMENT = 90;

/** The enabled endpoints of these accounts, with what they subscribe to. */
export async function enabledEndpointsOf(db: AccountDb, accountIds: string[]): Promise<Pick<WebhookEndpointRow, "id" | "accountId" | "events">[]> {
  const endpoints: Pick<WebhookEndpointRow, "id" | "accountId" | "events">[] = [];
  for (const slice of chunk(accountIds, IDS_PER_STATEMENT)) {
    endpoints.push(
      ...(await db
        .select({ id: webhookEndpoints.id, accountId: webhookEndpoints.accountId, events: webhookEndpoints.events })
        .from(webhookEndpoints)
        .where(and(inArray(webhookEndpoints.accountId, slice), eq(webhookEndpoints.enabled, true)))
        .all()),
    );
  }
  return endpoints;
}

export type CreateEndpointOutcome =
  | Refusal
  /** `secret` in full: shown to the owner this once. */
  | { kind: "created"; endpoint: WebhookEndpointRow; secret: string };

export async function createEndpoint(
  ctx: Ctx,
  caller: { accountId: string; readsInbound: boolean },
  input: { url: string; description?: string; events: EventSubscription[]; enabled: boolean; format?: WebhookFormat },
): Promise<CreateEndpointOutcome> {
  const { env, db } = ctx;
  const { accountId } = caller;
  const events = normalizeSubscription(input.events);
  if (!caller.readsInbound && receivesInboundMail(events)) return inboundScopeRefusal("Subscribing");
  const existing = await db.select({ n: sql<number>`count(*)` }).from(webhookEndpoints).where(eq(webhookEndpoints.accountId, accountId)).get();
  if ((existing?.n ?? 0) >= MAX_ENDPOINTS_PER_ACCOUNT) {
    return refused("validation_failed", "Too many webhook endpoints", {
      errors: { url: [`An account can have at most ${MAX_ENDPOINTS_PER_ACCOUNT} webhook endpoints; delete one first`] },
    });
  }
  const url = await acceptableUrl(ctx, input.url);
  if (url.kind !== "ok") return url;
  const secret = generateWebhookSecret();
  const endpoint = await db
    .insert(webhookEndpoints)
    .values({
      id: newId("wh"),
      accountId,
      url: url.url,
      description: input.description ?? null,
      events,
      enabled: input.enabled,
      format: input.format ?? "mailforge",
      secret: await encryptSecret(secret, config(env).encryptionKey),
    })
    .returning()
    .get();
  return { kind: "created", endpoint, secret };
}

export type EndpointChange = {
  url?: string;
  events?: EventSubscription[];
  description?: string | null;
  enabled?: boolean;
  format?: WebhookFormat;
  rotateSecret?: boolean;
};

export type UpdateEndpointOutcome =
  | { kind: "not_found" }
  | Refusal
  /** `secret` in full when a rotation issued a new one. */
  | { kind: "updated"; endpoint: WebhookEndpointRow; secret?: string };

/**
 * Changes an endpoint. Enabling or disabling it is the owner's decision and clears the service's (the reason and
 * the failure streak); a rotation keeps the previous secret signing for ROTATION_GRACE_MS.
 */
export async function updateEndpoint(
  ctx: Ctx,
  caller: { accountId: string; readsInbound: boolean },
  endpointId: string,
  change: EndpointChange,
): Promise<UpdateEndpointOutcome> {
  const { env, db } = ctx;
  const { accountId } = caller;
  const current = await findEndpoint(db, accountId, endpointId);
  if (!current) return { kind: "not_found" };
  if (!caller.readsInbound && (receivesInboundMail(current.events) || (change.events && receivesInboundMail(change.events)))) {
    return inboundScopeRefusal("Changing");
  }
  const now = nowIso();
  const changes: Partial<typeof webhookEndpoints.$inferInsert> = { updatedAt: now };
  if (change.url !== undefined) {
    const url = await acceptableUrl(ctx, change.url);
    if (url.kind !== "ok") return url;
    changes.url = url.url;
  }
  if (change.events !== undefined) changes.events = normalizeSubscription(change.events);
  if (change.description !== undefined) changes.description = change.description;
  if (change.format !== undefined) changes.format = change.format;
  if (change.enabled !== undefined) {
    changes.enabled = change.enabled;
    changes.disabledReason = null;
    changes.failingSince = null;
  }
  let secret: string | undefined;
  if (change.rotateSecret) {
    secret = generateWebhookSecret();
    changes.secret = await encryptSecret(secret, config(env).encryptionKey);
    changes.previousSecret = current.secret;
    changes.previousSecretExpiresAt = new Date(Date.parse(now) + ROTATION_GRACE_MS).toISOString();
  }
  const endpoint = await updateOwned(db, webhookEndpoints, accountId, endpointId, changes);
  if (!endpoint) return { kind: "not_found" };
  return secret ? { kind: "updated", endpoint, secret } : { kind: "updated", endpoint };
}

/** Deletes an endpoint and its delivery log; false if the account has no such endpoint. */
export async function deleteEndpoint(db: AccountDb, accountId: string, endpointId: string): Promise<boolean> {
  const [, deleted] = await db.batch([
    db
      .delete(webhookDeliveries)
      .where(
        and(
          eq(webhookDeliveries.endpointId, endpointId),
          sql`EXISTS (SELECT 1 FROM ${webhookEndpoints} WHERE ${webhookEndpoints.id} = ${endpointId} AND ${webhookEndpoints.accountId} = ${accountId})`,
        ),
      ),
    db
      .delete(webhookEndpoints)
      .where(owned(webhookEndpoints, accountId, endpointId))
      .returning({ id: webhookEndpoints.id }),
  ]);
  return deleted.length > 0;
}

/** A page of an endpoint's delivery log, newest first (`limit + 1` rows), or undefined if the endpoint is not the account's. */
export async function listDeliveries(
  db: AccountDb,
  accountId: string,
  endpointId: string,
  filters: { status?: WebhookDeliveryRow["status"]; eventId?: string },
  page: { cursor?: string; limit: number },
): Promise<WebhookDeliveryRow[] | undefined> {
  const keyset = keysetPage({ createdAt: webhookDeliveries.createdAt, id: webhookDeliveries.id }, page.cursor);
  const [endpoint, rows] = await db.batch([
    db
      .select({ id: webhookEndpoints.id })
      .from(webhookEndpoints)
      .where(owned(webhookEndpoints, accountId, endpointId)),
    db
      .select()
      .from(webhookDeliveries)
      .where(
        and(
          eq(webhookDeliveries.endpointId, endpointId),
          filters.status ? eq(webhookDeliveries.status, filters.status) : undefined,
          filters.eventId ? eq(webhookDeliveries.eventId, filters.eventId) : undefined,
          keyset.where,
        ),
      )
      .orderBy(...keyset.orderBy)
      .limit(page.limit + 1),
  ]);
  return endpoint.length > 0 ? rows : undefined;
}

/** The highest attempt number logged for the event at the endpoint (0 when none): a replay logs the next one. */
export async function lastAttemptNumber(db: AccountDb, endpointId: string, eventId: string): Promise<number> {
  const row = await db
    .select({ attempt: sql<number | null>`max(${webhookDeliveries.attempt})` })
    .from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.endpointId, endpointId), eq(webhookDeliveries.eventId, eventId)))
    .get();
  return row?.attempt ?? 0;
}

export type DeliveryRecord = {
  endpointId: string;
  accountId: string;
  eventId: string;
  eventType: string;
  attempt: number;
  status: "succeeded" | "retrying" | "failed";
  statusCode: number | null;
  responseSnippet: string | null;
  durationMs: number | null;
  nextRetryAt: string | null;
  createdAt: string;
};

/**
 * Writes one attempt to the delivery log. The (endpoint, event, attempt) key makes a repeated attempt (the queue
 * redelivered a message whose ack was lost) overwrite its row instead of failing.
 */
function deliveryLogQuery(db: AccountDb, record: DeliveryRecord) {
  return db
    .insert(webhookDeliveries)
    .values({ id: newId("whd"), ...record })
    .onConflictDoUpdate({
      target: [webhookDeliveries.endpointId, webhookDeliveries.eventId, webhookDeliveries.attempt],
      set: {
        status: record.status,
        statusCode: record.statusCode,
        responseSnippet: record.responseSnippet,
        durationMs: record.durationMs,
        nextRetryAt: record.nextRetryAt,
        createdAt: record.createdAt,
      },
    });
}

export async function logDeliveryAttempt(db: AccountDb, record: DeliveryRecord): Promise<void> {
  await deliveryLogQuery(db, record).run();
}

/**
 * The writes of a successful attempt, for the caller to batch with others: its log row, and the end of the
 * endpoint's failure streak if it had one.
 */
export function deliverySucceededStatements(
  db: AccountDb,
  endpoint: Pick<WebhookEndpointRow, "id" | "failingSince">,
  record: Omit<DeliveryRecord, "status" | "nextRetryAt">,
): D1PreparedStatement[] {
  const log = statement(db, deliveryLogQuery(db, { ...record, status: "succeeded", nextRetryAt: null }));
  if (endpoint.failingSince === null) return [log];
  const recovered = db.update(webhookEndpoints).set({ failingSince: null, updatedAt: record.createdAt }).where(eq(webhookEndpoints.id, endpoint.id));
  return [log, statement(db, recovered)];
}

/**
 * After a failed attempt: sets `failing_since` if unset, and disables the endpoint when it was set more than 5 days
 * ago. Returns whether the endpoint is still enabled.
 */
export async function recordEndpointFailure(db: AccountDb, endpointId: string, at: string): Promise<boolean> {
  const cutoff = new Date(Date.parse(at) - AUTO_DISABLE_AFTER_MS).toISOString();
  // SET expressions all read the row as it was, so `failing_since` below is the value before this failure.
  const expired = sql`(${webhookEndpoints.failingSince} IS NOT NULL AND ${webhookEndpoints.failingSince} <= ${cutoff})`;
  const row = await db
    .update(webhookEndpoints)
    .set({
      failingSince: sql`COALESCE(${webhookEndpoints.failingSince}, ${at})`,
      enabled: sql`CASE WHEN ${expired} THEN 0 ELSE ${webhookEndpoints.enabled} END`,
      disabledReason: sql`CASE WHEN ${expired} THEN 'Disabled automatically: every delivery has failed since ' || ${webhookEndpoints.failingSince} || ' (5 days)' ELSE ${webhookEndpoints.disabledReason} END`,
      updatedAt: at,
    })
    .where(eq(webhookEndpoints.id, endpointId))
    .returning({ enabled: webhookEndpoints.enabled })
    .get();
  return row?.enabled ?? false;
}

/** Marks a dead-lettered attempt failed; when the attempt itself was logged, its status code and snippet stay. */
export async function logDeadLetteredDelivery(
  db: AccountDb,
  record: Pick<DeliveryRecord, "endpointId" | "accountId" | "eventId" | "eventType" | "attempt">,
): Promise<void> {
  await db
    .insert(webhookDeliveries)
    .values({
      id: newId("whd"),
      ...record,
      status: "failed",
      responseSnippet: "Gave up: this delivery could not be processed (dead-lettered)",
      createdAt: new Date().toISOString(),
    })
    .onConflictDoUpdate({
      target: [webhookDeliveries.endpointId, webhookDeliveries.eventId, webhookDeliveries.attempt],
      set: { status: "failed", nextRetryAt: null },
    })
    .run();
}
