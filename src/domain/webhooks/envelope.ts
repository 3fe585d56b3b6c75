// The event as a webhook delivers it: what the dispatcher reads, the deliveries send and the peers' formats translate.

/** The webhook request body (spec: `{id, type, created_at, data}`), byte-identical on every attempt. */
export type WebhookEnvelope = { id: string; type: string; created_at: string; data: Record<string, unknown> };
