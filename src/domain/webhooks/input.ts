// The request bodies of the webhooks API, parsed by the API routes and the dashboard's endpoint forms alike.

import { z } from "../../lib/schema";
import { webhookFormats } from "../../db/schema";
import { eventTypes } from "../events/events";

const subscription = z
  .array(z.enum([...eventTypes, "*"]))
  .min(1)
  .max(eventTypes.length + 1)
  .openapi({
    description: 'Event types to receive, or `["*"]` for all of them (also types added later)',
    example: ["relay.delivered", "relay.bounced"],
  });

const format = z.enum(webhookFormats).openapi({
  description:
    "The body the endpoint receives: `mailforge` (the default), or a peer's so an existing handler keeps working (docs/migrating.md): " +
    "`resend` (email.sent, email.delivered, … with Standard Webhooks / svix signature headers) or `postmark` (Delivery, Bounce, SpamComplaint, Open, Click). " +
    "Events without a counterpart in the chosen format are not sent",
});

const endpointUrl = z.string().trim().min(1).max(2048).openapi({
  description: "An https URL whose host resolves to public addresses only (no IP literals, no private ranges)",
  example: "https://example.com/webhooks/mailforge",
});

/** The body of POST /webhooks. */
export const webhookInput = z
  .object({
    url: endpointUrl,
    events: subscription,
    description: z.string().trim().max(500).optional(),
    enabled: z.boolean().default(true),
    format: format.default("mailforge"),
  })
  .strict()
  .openapi("CreateWebhookEndpoint");

/** The body of PATCH /webhooks/{id}: the fields to change. */
export const webhookChangeInput = z
  .object({
    url: endpointUrl.optional(),
    events: subscription.optional(),
    description: z.string().trim().max(500).nullable().optional(),
    format: format.optional(),
    enabled: z.boolean().optional().openapi({ description: "Re-enabling also clears `disabled_reason` and `failing_since`" }),
    rotate_secret: z.boolean().optional().openapi({
      description: "Issue a new secret, returned once in `secret`. The old one keeps signing (a second `v1=`) for 24 hours.",
    }),
  })
  .strict()
  .openapi("UpdateWebhookEndpoint");

/** The body of POST /webhooks/{id}/test (optional). */
export const webhookTestInput = z
  .object({
    type: z.enum(eventTypes).default("relay.delivered").openapi({ description: "Which event type to send, with sample data" }),
  })
  .strict()
  .openapi("TestWebhook");
