// The body of a webhook delivery in the endpoint's format (docs/migrating.md): ours, or a peer's payload built from
// the same event. Signed the same way whatever the format.

import type { WebhookFormat } from "../endpoints";
import type { WebhookEnvelope } from "../envelope";
import { postmarkWebhookBody } from "./postmark";
import { resendWebhookBody } from "./resend";

/** The peer's body for the event, or undefined when the peer has no such event (the delivery is then skipped). */
export function peerWebhookBody(format: Exclude<WebhookFormat, "mailforge">, event: WebhookEnvelope): string | undefined {
  return format === "resend" ? resendWebhookBody(event) : postmarkWebhookBody(event);
}

/**
 * Resend's receivers read the Standard Webhooks signature under Svix's header names (`svix-id`, …), which carry the
 * same values; its client's `webhooks.verify` takes either.
 */
export function peerSignatureHeaders(
  format: WebhookFormat,
  standard: { "webhook-id": string; "webhook-timestamp": string; "webhook-signature": string },
): Record<string, string> {
  return format === "resend"
    ? { "svix-id": standard["webhook-id"], "svix-timestamp": standard["webhook-timestamp"], "svix-signature": standard["webhook-signature"] }
    : {};
}
