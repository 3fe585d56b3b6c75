import { acceptMessage, acceptMessages, batchLimit, type AcceptInput, type AcceptRefusal } from "../domain/sending/accept";
import { parseMailbox, type Mailbox } from "../domain/sending/addresses";
import { renderTemplate } from "../domain/sending/render";
import { sendLimits, tagPattern, tagRule } from "../domain/sending/rules";
import { scheduleLimitDays } from "../domain/sending/schedule";
import { AppError, validationError } from "../errors";
import { sha256Hex } from "../lib/crypto";
import { createRouter, errorResponse, evenWithFieldErrors, jsonBody, jsonResponse, keyedRoute, z } from "../lib/openapi";

const { recipients: maxRecipients, attachmentBytes: maxAttachmentBytes } = sendLimits;

const noLineBreaks = (value: string) => !/[\r\n]/.test(value);
const base64 = /^[A-Za-z0-9+/\s]*={0,2}\s*$/;

/** `Name <address>` or a bare address, checked in the schema so its error comes with every other field's. */
const MailboxSchema = z
  .string()
  .max(320)
  .superRefine((value, ctx) => {
    const parsed = parseMailbox(value);
    if (!parsed.ok) ctx.addIssue({ code: "custom", message: parsed.error });
  });

const AttachmentSchema = z.object({
  filename: z.string().min(1).max(255).refine(noLineBreaks, "Must not contain line breaks"),
  content: z
    .string()
    .min(1)
    .refine((value) => base64.test(value), "Must be base64")
    .refine((value) => value.replace(/\s+/g, "").length % 4 === 0, "Must be base64 (length a multiple of 4)"),
  content_type: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$/, "Must be a MIME type such as application/pdf")
    .default("application/octet-stream"),
});

/** When a scheduled send goes out; accept.ts checks it is in the future and within the limit. */
export const ScheduledAtSchema = z.iso.datetime({ offset: true }).openapi({
  example: "2026-12-01T09:00:00+01:00",
  description:
    `Send at this time instead of now (ISO 8601 with an offset or Z, in the future, at most ${scheduleLimitDays} days ahead). ` +
    "The message is charged now and has status scheduled until then; move it with PATCH /messages/{id}, cancel it with POST /messages/{id}/cancel",
});

const SendRequestSchema = z
  .object({
    from: MailboxSchema.openapi({ example: "Acme <hello@example.com>" }),
    to: z.union([MailboxSchema, z.array(MailboxSchema).min(1).max(maxRecipients)]).openapi({
      example: ["ann@example.org", "Bob Lee <bob@example.org>"],
      description: `1 to ${maxRecipients} recipients, each an address or \`Name <address>\`; one message, all recipients see the To list`,
    }),
    reply_to: MailboxSchema.optional(),
    subject: z.string().max(998).refine(noLineBreaks, "The subject must not contain line breaks").optional(),
    html: z.string().max(5_000_000).optional(),
    text: z.string().max(5_000_000).optional(),
    template_id: z.string().max(64).optional(),
    variables: z
      .record(z.string().max(100), z.string().max(10_000))
      .optional()
      .openapi({ example: { first_name: "Ann" } }),
    metadata: z
      .record(z.string().min(1).max(sendLimits.metadataKeyLength), z.string().max(sendLimits.metadataValueLength))
      .optional()
      .openapi({ example: { order_id: "1042" } }),
    tags: z.array(z.string().regex(tagPattern, tagRule)).max(sendLimits.tags).optional(),
    attachments: z.array(AttachmentSchema).max(20).optional(),
    track_opens: z
      .boolean()
      .optional()
      .openapi({ description: "Add an open pixel to the html part (default false). See docs/tracking.md for what counts as an open" }),
    track_clicks: z
      .boolean()
      .optional()
      .openapi({ description: "Send the html part's http(s) links through a click redirect (default false); the text part keeps its links" }),
    scheduled_at: ScheduledAtSchema.optional(),
  })
  .strict()
  .superRefine((body, ctx) => {
    // Runs even when fields failed (see evenWithFieldErrors), so a field may hold any JSON value here.
    if (!body.template_id && body.html === undefined && body.text === undefined) {
      ctx.addIssue({ code: "custom", path: ["html"], message: "Give html, text or a template_id" });
    }
    if (body.template_id && (body.html !== undefined || body.text !== undefined)) {
      ctx.addIssue({ code: "custom", path: ["template_id"], message: "Use either template_id or html/text, not both" });
    }
    if (!body.template_id && body.subject === undefined) ctx.addIssue({ code: "custom", path: ["subject"], message: "Required" });
    if (typeof body.metadata === "object" && body.metadata !== null && Object.keys(body.metadata).length > sendLimits.metadataKeys) {
      ctx.addIssue({ code: "custom", path: ["metadata"], message: `At most ${sendLimits.metadataKeys} keys` });
    }
  }, evenWithFieldErrors)
  .openapi("SendRequest");

const SendAcceptedSchema = z
  .object({
    id: z.string().openapi({ example: "msg_2Yq8Lm4Nc0Zp7Tx1Bv9Rk3" }),
    recipients: z.array(z.object({ email: z.string(), status: z.enum(["queued", "suppressed"]) })),
    credits_charged: z.number().int().openapi({ description: "1 per deliverable recipient; suppressed recipients are free" }),
    status: z.enum(["queued", "scheduled", "suppressed"]).openapi({ description: "scheduled: it has a scheduled_at and waits for it" }),
    scheduled_at: z.string().optional().openapi({ description: "Only on a scheduled send: when it goes out (UTC)" }),
    test_mode: z.boolean().openapi({ description: "Sent with an sk_test_ key: simulated, never delivered, never charged" }),
  })
  .openapi("SendAccepted");

const send = keyedRoute(
  "send",
  {
    method: "post",
    path: "/send",
    tags: ["Sending"],
    summary: "Send an email",
    description:
      "Accepted messages are charged (1 credit per deliverable recipient), stored and queued. Send `Idempotency-Key` to make retries safe: " +
      "the same key and body within 24 h replays the first response, the same key with another body is a 409. " +
      "Needs the account features `email_api` and `smtp_relay`.",
    request: {
      body: jsonBody(SendRequestSchema),
      headers: z.object({ "idempotency-key": z.string().min(1).max(255).optional() }),
    },
    responses: {
      202: jsonResponse(SendAcceptedSchema, "Accepted"),
      402: errorResponse("Not enough sending credits"),
      403: errorResponse("Scope, feature, or the from domain is not verified in this account"),
      409: errorResponse("Idempotency-Key reused with a different body"),
      413: errorResponse("Attachments larger than 10 MB in total"),
      429: errorResponse("Rate limit or daily sending limit reached; see Retry-After"),
      503: errorResponse("The message could not be queued; nothing was charged. Retry with back-off"),
    },
  },
  { features: ["email_api", "smtp_relay"] },
);

const SendBatchRequestSchema = z
  .array(SendRequestSchema)
  .min(1)
  .max(batchLimit)
  .openapi("SendBatchRequest", { description: `1 to ${batchLimit} send requests, each as POST /send takes it` });

const SendBatchAcceptedSchema = z
  .object({ data: z.array(SendAcceptedSchema).openapi({ description: "One result per request, in the order sent" }) })
  .openapi("SendBatchAccepted");

const sendBatch = keyedRoute(
  "send",
  {
    method: "post",
    path: "/send/batch",
    tags: ["Sending"],
    summary: "Send up to 100 emails in one request",
    description:
      "Every request is checked, charged and stored as POST /send does, all or none: one invalid request refuses the batch with 422 " +
      "(error keys start with its index, e.g. `3.to.0`), and a balance short of the whole batch's credits gives 402; nothing is stored or " +
      "charged then. One `Idempotency-Key` covers the whole batch. Needs the account features `email_api` and `smtp_relay`.",
    request: {
      body: jsonBody(SendBatchRequestSchema),
      headers: z.object({ "idempotency-key": z.string().min(1).max(255).optional() }),
    },
    responses: {
      202: jsonResponse(SendBatchAcceptedSchema, "Accepted, one result per request in order"),
      402: errorResponse("Not enough sending credits for the whole batch"),
      403: errorResponse("Scope, feature, or a from domain is not verified in this account"),
      409: errorResponse("Idempotency-Key reused with a different body"),
      413: errorResponse("A request's attachments are larger than 10 MB in total"),
      429: errorResponse("Rate limit or daily sending limit reached; see Retry-After"),
      503: errorResponse("The messages could not be queued; nothing was charged. Retry with back-off"),
    },
  },
  { features: ["email_api", "smtp_relay"] },
);

type SendRequest = z.infer<typeof SendRequestSchema>;

function decodedSize(content: string): number {
  const clean = content.replace(/\s+/g, "");
  return Math.floor((clean.length * 3) / 4) - (clean.endsWith("==") ? 2 : clean.endsWith("=") ? 1 : 0);
}

/** The schema has checked every mailbox; this parses them again for their parts. */
function mailboxOf(input: string): Mailbox {
  const parsed = parseMailbox(input);
  if (!parsed.ok) throw validationError({ body: [parsed.error] });
  return parsed.mailbox;
}

/** `item` is the request's index in a batch, named in errors about it. */
function toAcceptInput(body: SendRequest, item?: number): AcceptInput {
  const from = mailboxOf(body.from);
  // `Name <address>` entries keep their name in the To header; acceptMessage makes the recipients of them.
  const to = typeof body.to === "string" ? [body.to] : body.to;
  const attachmentBytes = (body.attachments ?? []).reduce((total, attachment) => total + decodedSize(attachment.content), 0);
  if (attachmentBytes > maxAttachmentBytes) {
    throw new AppError(
      "payload_too_large",
      `${item === undefined ? "" : `Request ${item}: `}Attachments total ${attachmentBytes} bytes; the limit is ${maxAttachmentBytes} bytes (10 MB)`,
    );
  }
  const variables = body.variables ?? {};
  return {
    source: "api",
    from,
    recipients: to,
    replyTo: body.reply_to === undefined ? undefined : mailboxOf(body.reply_to).address,
    tags: body.tags ?? [],
    metadata: body.metadata ?? {},
    templateId: body.template_id,
    tracking: { opens: body.track_opens ?? false, clicks: body.track_clicks ?? false },
    scheduledAt: body.scheduled_at === undefined ? undefined : new Date(body.scheduled_at),
    compose(template) {
      const subject = renderTemplate(body.subject ?? template?.subject ?? "", variables, { html: false });
      if (/[\r\n]/.test(subject)) return { errors: { subject: ["The rendered subject must not contain line breaks"] } };
      return {
        subject,
        content: {
          kind: "compose",
          to,
          html: body.html ?? template?.html ?? undefined,
          text: body.text ?? template?.text ?? undefined,
          variables,
          attachments: (body.attachments ?? []).map((attachment) => ({ ...attachment, content: attachment.content.replace(/\s+/g, "") })),
        },
      };
    },
  };
}

/** The HTTP error for a refused acceptance, for every door a message comes through (API, relay, dashboard). */
export function acceptRefusalError(refusal: AcceptRefusal): AppError {
  switch (refusal.kind) {
    case "invalid":
      return validationError(refusal.errors);
    case "domain_not_verified":
      return new AppError(
        "domain_not_verified",
        `${refusal.index === undefined ? "" : `Request ${refusal.index}: `}The from domain ${refusal.domain} is not a verified sending domain of this account; ` +
          "add it with POST /api/v1/domains and verify it",
      );
    case "insufficient_credits":
      return new AppError("insufficient_credits", `Not enough sending credits: this needs ${refusal.needed}, ${refusal.available} available`);
    case "queue_unavailable":
      return new AppError("upstream_unavailable", "The message could not be queued; nothing was charged. Retry with back-off");
  }
}

export const sendRoutes = createRouter()
  .openapi(send, async (c) => {
    const body = c.req.valid("json");
    const input = toAcceptInput(body);
    const key = c.req.valid("header")["idempotency-key"];
    const { account, apiKey } = c.get("auth");
    const outcome = await acceptMessage(
      c.env,
      c.executionCtx,
      { account, testMode: apiKey.mode === "test" },
      input,
      // Test and live keys never share a stored answer: a test key's send must not replay for a live one.
      key
        ? { key, route: apiKey.mode === "test" ? "POST /send (test)" : "POST /send", requestHash: await sha256Hex(JSON.stringify(body)) }
        : undefined,
    );
    if (outcome.kind !== "accepted") throw acceptRefusalError(outcome);
    if (outcome.replayed) c.header("Idempotent-Replayed", "true");
    return c.json(outcome.body, 202);
  })
  .openapi(sendBatch, async (c) => {
    const body = c.req.valid("json");
    const inputs = body.map((item, index) => toAcceptInput(item, index));
    const key = c.req.valid("header")["idempotency-key"];
    const { account, apiKey } = c.get("auth");
    const outcome = await acceptMessages(
      c.env,
      c.executionCtx,
      { account, testMode: apiKey.mode === "test" },
      inputs,
      key
        ? { key, route: apiKey.mode === "test" ? "POST /send/batch (test)" : "POST /send/batch", requestHash: await sha256Hex(JSON.stringify(body)) }
        : undefined,
    );
    if (outcome.kind !== "accepted") throw acceptRefusalError(outcome);
    if (outcome.replayed) c.header("Idempotent-Replayed", "true");
    return c.json(outcome.body, 202);
  });
