// Our events as Postmark's webhook bodies (Delivery, Bounce, SpamComplaint, Open, Click), for endpoints with
// `format: "postmark"`, so a handler written for Postmark keeps working (docs/migrating.md).

import type { WebhookEnvelope } from "../envelope";

type EventData = {
  message_id?: string;
  from?: string;
  subject?: string;
  stream?: string;
  tags?: string[];
  metadata?: Record<string, string>;
  recipient?: string;
  bounce_type?: keyof typeof bounceType;
  smtp_response?: string | null;
  feedback_type?: string | null;
  url?: string;
  user_agent?: string | null;
};

const recordTypes: Record<string, "Delivery" | "Bounce" | "SpamComplaint" | "Open" | "Click"> = {
  "relay.delivered": "Delivery",
  delivered: "Delivery",
  "relay.bounced": "Bounce",
  bounced: "Bounce",
  "relay.complained": "SpamComplaint",
  complained: "SpamComplaint",
  opened: "Open",
  clicked: "Click",
};

/** The body Postmark would post for this event, or undefined when Postmark has no such webhook. */
export function postmarkWebhookBody(event: WebhookEnvelope): string | undefined {
  const recordType = recordTypes[event.type];
  if (!recordType) return undefined;
  const data = event.data as EventData;
  const common = {
    RecordType: recordType,
    MessageStream: data.stream === "broadcast" ? "broadcast" : "outbound",
    MessageID: data.message_id ?? "",
    Tag: data.tags?.[0] ?? "",
    Metadata: data.metadata ?? {},
  };
  const engagement = { Platform: "Unknown", UserAgent: data.user_agent ?? "", OS: {}, Client: {}, Geo: {} };
  switch (recordType) {
    case "Delivery":
      return JSON.stringify({
        ...common,
        ServerID: 0,
        Recipient: data.recipient ?? "",
        DeliveredAt: event.created_at,
        Details: data.smtp_response ?? "",
      });
    case "Open":
      return JSON.stringify({
        ...common,
        FirstOpen: true,
        Recipient: data.recipient ?? "",
        ReceivedAt: event.created_at,
        ReadSeconds: 0,
        ...engagement,
      });
    case "Click":
      return JSON.stringify({
        ...common,
        Recipient: data.recipient ?? "",
        ReceivedAt: event.created_at,
        ClickLocation: "HTML",
        OriginalLink: data.url ?? "",
        ...engagement,
      });
    case "Bounce":
    case "SpamComplaint": {
      const kind = recordType === "Bounce" ? bounceType[data.bounce_type ?? "hard"] : { Type: "SpamComplaint", TypeCode: 512 };
      return JSON.stringify({
        ...common,
        ID: event.id,
        ...kind,
        Name: recordType === "Bounce" ? kind.Type : "Spam complaint",
        ServerID: 0,
        Description: recordType === "Bounce" ? (data.smtp_response ?? "") : "The recipient marked the message as spam",
        Details: recordType === "Bounce" ? (data.smtp_response ?? "") : (data.feedback_type ?? ""),
        Email: data.recipient ?? "",
        From: data.from ?? "",
        BouncedAt: event.created_at,
        DumpAvailable: false,
        // A hard bounce or a complaint suppresses the address: Postmark calls that inactive.
        Inactive: recordType === "SpamComplaint" || data.bounce_type === "hard",
        CanActivate: false,
        Subject: data.subject ?? "",
        Content: "",
      });
    }
  }
}

/** Postmark's bounce type names for ours. */
export const bounceType = {
  hard: { Type: "HardBounce", TypeCode: 1 },
  soft: { Type: "SoftBounce", TypeCode: 4096 },
  blocked: { Type: "Blocked", TypeCode: 100_000 },
};
