// A `replied` event on a sent message quotes the reply: who wrote it and its subject. That is received mail, which
// only keys with the `inbound` scope may read (GET /inbound/{id}); everyone who may see the message may still see
// that a reply arrived and its inbound id.

import { hasScope } from "../accounts/api-keys";
import type { ApiKeyContext } from "../../types";
import { receivesInboundMail } from "../webhooks/endpoints";

/** The event's data without the reply's own words when `readsInbound` is false; other events unchanged. */
export function replyWordsFor(readsInbound: boolean, type: string, data: Record<string, unknown>): Record<string, unknown> {
  if (readsInbound || type !== "replied") return data;
  const { from: _from, subject: _subject, ...rest } = data;
  return rest;
}

/** Whether an API key may read received mail. */
export const keyReadsInbound = (apiKey: ApiKeyContext) => hasScope(apiKey, "inbound");

/**
 * Whether a webhook endpoint may: one subscribed to `email.received` (which takes a key with `inbound` to set up)
 * gets the words anyway, so its `replied` events carry them too.
 */
export const endpointReadsInbound = (endpoint: { events: readonly string[] }) => receivesInboundMail(endpoint.events);
