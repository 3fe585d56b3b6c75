// The request bodies of the campaigns API, parsed by the API routes and the dashboard's campaign forms alike.

import { campaignVerificationModes } from "../../db/schema";
import { evenWithFieldErrors, z } from "../../lib/schema";
import { sendLimits, tagPattern, tagRule } from "../sending/rules";
import { MAX_SCHEDULE_DAYS, type CampaignInput } from "./campaigns";
import { senderAddress } from "./senders";

const noLineBreaks = (value: string) => !/[\r\n]/.test(value);
const ids = (what: string) =>
  z
    .array(z.string().min(1).max(64))
    .max(100)
    .openapi({ description: `${what} ids of this account` });

const fields = {
  name: z.string().trim().min(1).max(200),
  sender_id: z.string().min(1).max(64).nullable().openapi({ description: "A sender (POST /senders); a draft may lack one, sending needs it" }),
  subject: z
    .string()
    .max(998)
    .refine(noLineBreaks, "The subject must not contain line breaks")
    .nullable()
    .openapi({ description: "May contain placeholders" }),
  preheader: z
    .string()
    .max(500)
    .nullable()
    .openapi({ description: "Preview text shown after the subject by most mail clients (hidden in the body)" }),
  html: z.string().max(2_000_000).nullable(),
  text: z.string().max(2_000_000).nullable(),
  template_id: z
    .string()
    .min(1)
    .max(64)
    .nullable()
    .openapi({ description: "Instead of html/text: a template whose subject and bodies are copied into the campaign when it is sent" }),
  variables: z
    .record(z.string().max(100), z.string().max(10_000))
    .openapi({ description: "Campaign-wide placeholder values; contact fields take precedence" }),
  tags: z.array(z.string().regex(tagPattern, tagRule)).max(sendLimits.tags),
  lists: ids("List"),
  segments: ids("Segment"),
  exclude_lists: ids("List"),
  topic_id: z.string().min(1).max(64).nullable().openapi({
    description: "The subscription topic (GET /topics): only contacts subscribed to it are sent to, and its unsubscribe link leaves that topic only",
  }),
  track_opens: z.boolean().openapi({ description: "Add an open pixel to the html part of each message (default true); see docs/tracking.md" }),
  track_clicks: z
    .boolean()
    .openapi({ description: "Route the html part's http(s) links through a click redirect (default true); text keeps its links" }),
  verification: z.enum(campaignVerificationModes).openapi({
    description:
      "Pre-send hygiene (default `off`): at POST /send, audience addresses without a fresh verification are checked (1 verification credit each) " +
      "before the fan-out; `skip_invalid` leaves out invalid addresses, `valid_only` sends to valid ones only (GET /campaigns/{id}/skipped says who and why)",
  }),
};

/** The body of POST /campaigns: a draft. */
export const campaignInput = z
  .object({
    ...fields,
    sender_id: fields.sender_id.optional(),
    subject: fields.subject.optional(),
    preheader: fields.preheader.optional(),
    html: fields.html.optional(),
    text: fields.text.optional(),
    template_id: fields.template_id.optional(),
    variables: fields.variables.optional(),
    tags: fields.tags.optional(),
    lists: fields.lists.optional(),
    segments: fields.segments.optional(),
    exclude_lists: fields.exclude_lists.optional(),
    topic_id: fields.topic_id.optional(),
    track_opens: fields.track_opens.optional(),
    track_clicks: fields.track_clicks.optional(),
    verification: fields.verification.optional(),
  })
  .strict()
  .superRefine((body, ctx) => {
    if (typeof body.html === "string" && typeof body.template_id === "string")
      ctx.addIssue({ code: "custom", path: ["html"], message: "Give html (and text) or a template_id, not both" });
  }, evenWithFieldErrors)
  .openapi("CreateCampaign");

/** The body of PATCH /campaigns/{id}: the fields to change. */
export const campaignChangeInput = z
  .object(
    Object.fromEntries(Object.entries(fields).map(([name, schema]) => [name, schema.optional()])) as {
      [K in keyof typeof fields]: z.ZodOptional<(typeof fields)[K]>;
    },
  )
  .strict()
  .refine((body) => Object.keys(body).length > 0, { message: "Send at least one field" })
  .openapi("UpdateCampaign");

/** The body of POST /campaigns/{id}/send; `sendCampaign` checks the time against the clock. */
export const sendCampaignInput = z
  .object({
    send_at: z.iso
      .datetime({ offset: true })
      .optional()
      .openapi({ description: `When to send (ISO 8601, in the future, at most ${MAX_SCHEDULE_DAYS} days ahead); now if absent` }),
  })
  .strict()
  .openapi("SendCampaign");

// Senders: the name and address campaigns are sent from.

const senderAddressField = z
  .string()
  .trim()
  .max(320)
  .superRefine((value, ctx) => {
    const address = senderAddress(value);
    if ("error" in address) ctx.addIssue({ code: "custom", message: address.error });
  });

const senderFields = {
  // The name goes into the From header of every campaign message.
  name: z.string().trim().min(1).max(200).refine(noLineBreaks, "The name must not contain line breaks").openapi({ example: "Acme News" }),
  email: senderAddressField.openapi({ description: "On a verified sending domain of the account", example: "news@acme.example" }),
  reply_to: senderAddressField.nullable().optional().openapi({ description: "Any address; `null` removes it", example: "support@acme.example" }),
};

/** The body of POST /senders. */
export const senderInput = z.object(senderFields).strict().openapi("CreateSender");
/** The body of PATCH /senders/{id}: the fields to change. */
export const senderChangeInput = z
  .object({ name: senderFields.name.optional(), email: senderFields.email.optional(), reply_to: senderFields.reply_to })
  .strict()
  .openapi("UpdateSender");

export type CampaignChange = z.output<typeof campaignChangeInput>;

/** A parsed body as the fields `createCampaign` and `updateDraft` take (ids deduplicated). */
export function campaignFields(body: CampaignChange): Partial<CampaignInput> {
  return {
    name: body.name,
    senderId: body.sender_id,
    subject: body.subject,
    preheader: body.preheader,
    html: body.html,
    text: body.text,
    templateId: body.template_id,
    variables: body.variables,
    tags: body.tags === undefined ? undefined : [...new Set(body.tags)],
    lists: body.lists === undefined ? undefined : [...new Set(body.lists)],
    segments: body.segments,
    excludeLists: body.exclude_lists === undefined ? undefined : [...new Set(body.exclude_lists)],
    topicId: body.topic_id,
    trackOpens: body.track_opens,
    trackClicks: body.track_clicks,
    verification: body.verification,
  };
}

/** A new campaign from a create request: what the request leaves out gets its default (tracking on, no audience). */
export function newCampaignFields(body: z.output<typeof campaignInput>): CampaignInput {
  const input = campaignFields(body);
  return {
    name: body.name,
    senderId: input.senderId ?? null,
    subject: input.subject ?? null,
    preheader: input.preheader ?? null,
    html: input.html ?? null,
    text: input.text ?? null,
    templateId: input.templateId ?? null,
    variables: input.variables ?? {},
    tags: input.tags ?? [],
    lists: input.lists ?? [],
    segments: input.segments ?? [],
    excludeLists: input.excludeLists ?? [],
    topicId: input.topicId ?? null,
    trackOpens: input.trackOpens ?? true,
    trackClicks: input.trackClicks ?? true,
    verification: input.verification ?? "off",
  };
}
