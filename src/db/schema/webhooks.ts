import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

/** The body a webhook endpoint receives: ours, or a peer's, so a handler written for that peer keeps working (docs/migrating.md). */
export const webhookFormats = ["mailforge", "resend", "postmark"] as const;

export const webhookEndpoints = sqliteTable(
  "webhook_endpoints",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    url: text("url").notNull(),
    description: text("description"),
    events: text("events", { mode: "json" }).$type<string[]>().notNull(),
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    // AES-GCM ciphertext; the clear secret is needed to sign, so it cannot be a one-way hash.
    secret: text("secret").notNull(),
    previousSecret: text("previous_secret"),
    previousSecretExpiresAt: text("previous_secret_expires_at"),
    failingSince: text("failing_since"),
    disabledReason: text("disabled_reason"),
    format: text("format", { enum: webhookFormats }).notNull().default("mailforge"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("webhook_endpoints_account").on(t.accountId)],
);

export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    id: text("id").primaryKey(),
    endpointId: text("endpoint_id").notNull(),
    accountId: text("account_id").notNull(),
    eventId: text("event_id").notNull(),
    eventType: text("event_type").notNull(),
    attempt: integer("attempt").notNull(),
    status: text("status", { enum: ["succeeded", "retrying", "failed"] }).notNull(),
    statusCode: integer("status_code"),
    responseSnippet: text("response_snippet"),
    durationMs: integer("duration_ms"),
    nextRetryAt: text("next_retry_at"),
    createdAt: createdAt(),
  },
  (t) => [
    index("webhook_deliveries_endpoint").on(t.endpointId, t.createdAt),
    uniqueIndex("webhook_deliveries_attempt").on(t.endpointId, t.eventId, t.attempt),
  ],
);
