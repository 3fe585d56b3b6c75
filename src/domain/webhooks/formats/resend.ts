// Our events as Resend's webhook payloads (https://resend.com/docs/webhooks), for endpoints with `format: "resend"`:
// a handler written for Resend, and the resend client's `webhooks.verify`, keep working (docs/migrating.md).

import type { WebhookEnvelope } from "../envelope";

type EventData = {
  message_id?: string;
  campaign_id?: string | null;
  from?: string;
  subject?: string;
  tags?: string[];
  recipient?: string;
  recipients?: string[];
  bounce_type?: "hard" | "soft" | "blocked";
  smtp_response?: string | null;
  reason?: string;
  url?: string;
  ip?: string | null;
  user_agent?: string | null;
};

const resendTypes: Record<string, string> = {
  "relay.sent": "email.sent",
  "relay.delivered": "email.delivered",
  delivered: "email.delivered",
  "relay.bounced": "email.bounced",
  bounced: "email.bounced",
  "relay.complained": "email.complained",
  complained: "email.complained",
  opened: "email.opened",
  clicked: "email.clicked",
  "relay.failed": "email.failed",
  "relay.suppressed": "email.suppressed",
};

const bounceKind = { hard: "Permanent", soft: "Transient", blocked: "Undetermined" } as const;

/** The body Resend would post for this event, or undefined when Resend has no such event. */
export function resendWebhookBody(event: WebhookEnvelope): string | undefined {
  const type = resendTypes[event.type];
  if (!type) return undefined;
  const data = event.data as EventData;
  const id = data.message_id ?? "";
  const base = {
    ...(data.campaign_id ? { broadcast_id: data.campaign_id } : {}),
    created_at: event.created_at,
    email_id: id,
    // Resend's message_id is the Message-ID header, which our events do not carry: the message's id stands in for it.
    message_id: id,
    from: data.from ?? "",
    to: data.recipient ? [data.recipient] : (data.recipients ?? []),
    subject: data.subject ?? "",
    tags: Object.fromEntries((data.tags ?? []).map(resendTag).map((tag) => [tag.name, tag.value])),
  };
  const extra =
    type === "email.bounced"
      ? { bounce: { message: data.smtp_response ?? "", type: bounceKind[data.bounce_type ?? "hard"], subType: "General" } }
      : type === "email.clicked"
        ? { click: { ipAddress: data.ip ?? "", link: data.url ?? "", timestamp: event.created_at, userAgent: data.user_agent ?? "" } }
        : type === "email.failed"
          ? { failed: { reason: data.smtp_response ?? "The message could not be delivered" } }
          : type === "email.suppressed"
            ? {
                suppressed: {
                  message: `The address is on the account's suppression list (${data.reason ?? "manual"})`,
                  type: "OnAccountSuppressionList",
                },
              }
            : {};
  return JSON.stringify({ type, created_at: event.created_at, data: { ...base, ...extra } });
}

/** A Mailforge tag back as Resend's `{name, value}` (tags sent through /api/v1 have no value). */
export function resendTag(tag: string) {
  const at = tag.indexOf(":");
  return at < 0 ? { name: tag, value: "" } : { name: tag.slice(0, at), value: tag.slice(at + 1) };
}
