import { drizzle } from "drizzle-orm/d1";
import { webhookDeliveries } from "../../db/schema";
import { newId } from "../../lib/ids";

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
 * The statement that writes one attempt to the delivery log, to run alone or in a D1 batch. The (endpoint, event,
 * attempt) key makes a repeated attempt (the queue redelivered a message whose ack was lost) overwrite its row
 * instead of failing.
 */
export function deliveryLogStatement(d1: D1Database, record: DeliveryRecord) {
  return drizzle(d1)
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

export async function logDeliveryAttempt(env: Env, record: DeliveryRecord): Promise<void> {
  await deliveryLogStatement(env.DB, record).run();
}
