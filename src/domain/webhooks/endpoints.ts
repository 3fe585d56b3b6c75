import { decryptSecret } from "../../lib/crypto";
import { webhookEndpoints } from "../../db/schema";
import type { EventType } from "../events/events";

export type WebhookEndpointRow = typeof webhookEndpoints.$inferSelect;

/** What an endpoint subscribes to: event types, or `*` for every type (including types added later). */
export type EventSubscription = EventType | "*";

/** After a rotation the old secret keeps signing this long, so receivers can roll out the new one without gaps. */
export const ROTATION_GRACE_MS = 24 * 60 * 60 * 1000;

/** At most this many endpoints per account: each one multiplies every event into one more delivery. */
export const MAX_ENDPOINTS_PER_ACCOUNT = 20;

export function subscribesTo(subscription: readonly string[], type: string): boolean {
  return subscription.includes("*") || subscription.includes(type);
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
