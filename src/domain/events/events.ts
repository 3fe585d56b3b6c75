import { newId } from "../../lib/ids";

/** Every event type the platform emits (spec, Events). */
export const eventTypes = [
  "delivered",
  "bounced",
  "opened",
  "clicked",
  "complained",
  "unsubscribed",
  "verification.completed",
  "campaign.completed",
  "warmup.status_changed",
  "automation.completed",
  "relay.sent",
  "relay.failed",
  "relay.suppressed",
  "relay.delivered",
  "relay.bounced",
  "relay.complained",
] as const;
export type EventType = (typeof eventTypes)[number];

export type EventInput = {
  accountId: string;
  type: EventType;
  /** The object the event is about (msg_…, vjob_…), for timelines. */
  subjectId?: string;
  /**
   * Names the fact, e.g. `relay.sent:msg_…` or `relay.bounced:msg_…:user@example.com`. A producer that runs again
   * for the same fact (a retried queue message) writes the same key, and the unique index keeps the first event.
   */
  dedupeKey: string;
  data: Record<string, unknown>;
};

/**
 * The one way events are written: an INSERT that is a no-op when the fact is already recorded, so it can join the
 * producer's own D1 batch (one transaction with the state change it reports). After the batch commits, call
 * `dispatchEvents` (webhooks) with the same account and dedupe keys.
 */
export function eventStatement(d1: D1Database, event: EventInput): D1PreparedStatement {
  return d1
    .prepare(
      `INSERT INTO events (id, account_id, type, subject_id, dedupe_key, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
       ON CONFLICT (account_id, dedupe_key) DO NOTHING`,
    )
    .bind(newId("evt"), event.accountId, event.type, event.subjectId ?? null, event.dedupeKey, JSON.stringify(event.data));
}

export type StoredEvent = { id: string; type: EventType; created_at: string; data: Record<string, unknown> };
