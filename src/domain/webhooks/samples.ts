import type { EventData, EventType } from "../events/events";

// Sample `data` per event type: what POST /webhooks/{id}/test sends and what the OpenAPI document shows. Ids carry
// `_test` and addresses are on example.com, so a receiver can tell a test event from a real one.

const message = {
  message_id: "msg_test0000000000000000000",
  from: "Acme <hello@acme.example.com>",
  subject: "Welcome to Acme",
  source: "api" as const,
  tags: ["welcome"],
  metadata: { user_id: "42" },
};
const recipient = { ...message, recipient: "jane@example.com" };
const mailClient = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148";
const bounce = {
  bounce_type: "hard" as const,
  smtp_code: 550,
  enhanced_code: "5.1.1",
  smtp_response: "550 5.1.1 The email account that you tried to reach does not exist",
};

export const sampleEventData: { [T in EventType]: EventData<T> } = {
  delivered: { ...recipient, smtp_response: "250 2.0.0 OK queued" },
  bounced: { ...recipient, ...bounce },
  // A bare "Mozilla/5.0" is Apple Mail Privacy Protection, a machine open that emits no event: a mail client's agent instead.
  opened: { ...recipient, user_agent: mailClient, ip: "203.0.113.7" },
  clicked: { ...recipient, url: "https://example.com/pricing", user_agent: mailClient, ip: "203.0.113.7" },
  complained: { ...recipient, feedback_type: "abuse" },
  unsubscribed: { email: "jane@example.com", message_id: message.message_id, campaign_id: null, method: "one_click" },
  "verification.completed": {
    verification_id: "vjob_test000000000000000000",
    kind: "bulk",
    total: 3,
    counts: { valid: 1, invalid: 1, risky: 1, unknown: 0 },
  },
  "campaign.completed": {
    campaign_id: "cmp_test0000000000000000000",
    name: "November newsletter",
    outcome: "partially_delivered",
    recipients: 3,
    sent: 2,
    delivered: 1,
    hard_bounces: 1,
    soft_bounces: 0,
    failed: 0,
    suppressed: 1,
    cancelled: 0,
    unknown: 0,
    skipped: { invalid: 1, risky: 0, unknown: 0 },
  },
  "warmup.status_changed": { domain_id: "dom_test0000000000000000000", domain: "example.com", previous_status: "active", status: "completed" },
  "automation.completed": {
    automation_id: "aut_test0000000000000000000",
    run_id: "run_test0000000000000000000",
    email: "jane@example.com",
    contact_id: "con_test0000000000000000000",
    status: "completed",
    event_id: "signup-4711",
  },
  "relay.sent": { ...message, recipients: ["jane@example.com"], smtp_response: "250 2.0.0 Ok: queued as 4F2A1" },
  "relay.failed": { ...message, recipients: ["jane@example.com"], attempts: 5, smtp_response: "451 4.7.1 Try again later" },
  "relay.suppressed": { ...recipient, reason: "bounce" },
  "relay.cancelled": { ...message, recipients: ["jane@example.com"], credits_refunded: 1, scheduled_at: "2026-12-01T09:00:00.000Z" },
  "relay.delivered": { ...recipient, smtp_response: "250 2.0.0 OK queued" },
  "relay.bounced": { ...recipient, ...bounce },
  "relay.complained": { ...recipient, feedback_type: "abuse" },
  "email.received": {
    inbound_id: "inb_test0000000000000000000",
    domain_id: "dom_test0000000000000000000",
    envelope_from: "jane@example.com",
    envelope_to: "support@acme.example.com",
    from: "Jane Doe <jane@example.com>",
    to: ["support@acme.example.com"],
    cc: [],
    subject: "Re: Welcome to Acme",
    date: "2026-11-22T10:15:00.000Z",
    message_id: "<CAF=test@mail.example.com>",
    in_reply_to: "<msg_test0000000000000000000@acme.example.com>",
    references: ["<msg_test0000000000000000000@acme.example.com>"],
    text_excerpt: "Thanks, that worked!",
    attachments: [
      {
        index: 0,
        filename: "screenshot.png",
        content_type: "image/png",
        size: 48213,
        content_id: null,
        download_url: "https://mail.example.com/inbound-files/inb_test0000000000000000000/0?expires=1795000000&signature=test",
        download_expires_at: "2026-11-25T10:15:00.000Z",
      },
    ],
    size: 66120,
    authentication: { spf: "pass", dkim: "pass", dmarc: "pass" },
    auto_submitted: null,
    in_reply_to_message_id: message.message_id,
    campaign_id: null,
  },
  replied: {
    message_id: message.message_id,
    campaign_id: null,
    inbound_id: "inb_test0000000000000000000",
    from: "Jane Doe <jane@example.com>",
    subject: "Re: Welcome to Acme",
  },
};
