// The POST /send request: one schema, which validates the request and becomes its OpenAPI description, and the
// mapping of a valid request onto acceptMessage's input. A batch of sends reuses both per item.

import { evenWithFieldErrors, z } from "../../lib/schema";
import { messageStreams } from "../../db/schema";
import { batchLimit, type AcceptInput } from "./accept";
import { mailboxText, parseMailbox, soleAddress, type Mailbox } from "./addresses";
import { HEADER_NAME, isReservedHeader } from "./mime";
import { renderTemplate } from "./render";
import { sendLimits, tagPattern, tagRule } from "./rules";
import { scheduleLimitDays } from "./schedule";

const { recipients: maxRecipients } = sendLimits;

export const headerLimits = { count: 50, nameLength: 76, valueLength: 2000 } as const;

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

const RecipientsSchema = (description: string) =>
  z.union([MailboxSchema, z.array(MailboxSchema).min(1).max(maxRecipients)]).openapi({
    example: ["ann@example.org", "Bob Lee <bob@example.org>"],
    description,
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
  content_id: z
    .string()
    .max(255)
    .regex(/^<?[^\s<>]+>?$/, "A Content-ID without spaces, such as logo")
    .optional()
    .openapi({
      example: "logo",
      description: 'Makes the attachment an inline image of the html part: `<img src="cid:logo">` (sent as multipart/related)',
    }),
});

const listOf = (value: unknown): unknown[] => (Array.isArray(value) ? value : typeof value === "string" ? [value] : []);

/**
 * Custom header fields. Their names are RFC 5322 field names; the values are unstructured text (folded when long),
 * so one word must fit on a header line. Headers the platform writes are refused by name, List-Unsubscribe* only
 * where the platform sets them (messages with a single recipient, which get one-click unsubscribe).
 */
function checkHeaders(headers: Record<string, unknown>, platformUnsubscribe: boolean, ctx: z.RefinementCtx) {
  const names = Object.keys(headers);
  if (names.length > headerLimits.count) ctx.addIssue({ code: "custom", path: ["headers"], message: `At most ${headerLimits.count} headers` });
  const seen = new Set<string>();
  for (const name of names) {
    const value = headers[name];
    const problem = (message: string) => ctx.addIssue({ code: "custom", path: ["headers", name], message });
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(name) || name.length > headerLimits.nameLength)
      problem(`${name} is not a header field name (1-${headerLimits.nameLength} printable ASCII characters, no colon or space)`);
    else if (isReservedHeader(name)) problem(`${name} is set by the platform and cannot be given in headers`);
    else if (platformUnsubscribe && lower.startsWith("list-unsubscribe"))
      problem(`${name} is set by the platform on messages to a single recipient (one-click unsubscribe)`);
    else if (seen.has(lower)) problem(`${name} is given twice (header names are case-insensitive)`);
    // A value of another type already has the record schema's error.
    else if (typeof value !== "string") continue;
    else if (!noLineBreaks(value)) problem("Must not contain line breaks");
    else if (value.length > headerLimits.valueLength) problem(`At most ${headerLimits.valueLength} characters`);
    else if (value.split(" ").some((word) => word.length > 998 - name.length - 2)) problem("A word in the value is longer than a header line may be");
    seen.add(lower);
  }
}

/** When a scheduled send goes out; accept.ts checks it is in the future and within the limit. */
const ScheduledAtSchema = z.iso.datetime({ offset: true }).openapi({
  example: "2026-12-01T09:00:00+01:00",
  description:
    `Send at this time instead of now (ISO 8601 with an offset or Z, in the future, at most ${scheduleLimitDays} days ahead). ` +
    "The message is charged now and has status scheduled until then; move it with PATCH /messages/{id}, cancel it with POST /messages/{id}/cancel",
});

export const SendRequestSchema = z
  .object({
    from: MailboxSchema.openapi({ example: "Acme <hello@example.com>" }),
    to: RecipientsSchema(
      `1 to ${maxRecipients} recipients (with cc and bcc, ${maxRecipients} in all), each an address or \`Name <address>\`; one message, all recipients see the To list`,
    ),
    cc: RecipientsSchema("Copies, named in the Cc header. Each is a recipient, charged like one").optional(),
    bcc: RecipientsSchema("Blind copies: recipients no header names. Each is a recipient, charged like one").optional(),
    reply_to: MailboxSchema.optional(),
    subject: z.string().max(998).refine(noLineBreaks, "The subject must not contain line breaks").optional(),
    html: z.string().max(5_000_000).optional(),
    text: z
      .string()
      .max(5_000_000)
      .optional()
      .openapi({ description: "Plain-text part. Without it, an html message gets one generated from the html" }),
    template_id: z.string().max(64).optional(),
    variables: z
      .record(z.string().max(100), z.string().max(10_000))
      .optional()
      .openapi({ example: { first_name: "Ann" } }),
    metadata: z
      .record(z.string().min(1).max(sendLimits.metadataKeyLength), z.string().max(sendLimits.metadataValueLength))
      .optional()
      .openapi({ example: { order_id: "1042" } }),
    headers: z
      .record(z.string(), z.string())
      .optional()
      .openapi({
        example: { "X-Entity-Ref-ID": "1042" },
        description:
          `Custom header fields (at most ${headerLimits.count}), values without line breaks. Refused: From, Sender, To, Cc, Bcc, Reply-To, ` +
          "Subject, Date, Message-ID, MIME-Version, Content-*, DKIM-Signature, Return-Path, Received, the headers receivers add " +
          "(Authentication-Results, ARC-*, Received-SPF, Delivered-To, X-Original-To), X-Mailforge-*, and List-Unsubscribe* on " +
          "single-recipient messages that get the platform's one-click unsubscribe (broadcast, or `unsubscribe: true`)",
      }),
    tags: z.array(z.string().regex(tagPattern, tagRule)).max(sendLimits.tags).optional(),
    attachments: z.array(AttachmentSchema).max(20).optional(),
    track_opens: z
      .boolean()
      .optional()
      .openapi({ description: "Add an open pixel to the html part (default false). See docs/tracking.md for what counts as an open" }),
    track_clicks: z.boolean().optional().openapi({
      description:
        "Send the html part's http(s) links through a click redirect (default false); a given text part keeps its links, a generated one shows the redirects",
    }),
    scheduled_at: ScheduledAtSchema.optional(),
    stream: z
      .enum(messageStreams)
      .optional()
      .openapi({
        description:
          "`transactional` (default: receipts, password resets, notifications) or `broadcast` (newsletters, marketing). Each has its own " +
          "suppressions: an unsubscribe stops broadcast mail only. Broadcast mail always carries one-click List-Unsubscribe",
      }),
    unsubscribe: z.boolean().optional().openapi({
      description: "Give transactional mail one-click List-Unsubscribe too (default false; broadcast mail always has it)",
    }),
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
    if (typeof body.headers === "object" && body.headers !== null && !Array.isArray(body.headers)) {
      const everyone = [...listOf(body.to), ...listOf(body.cc), ...listOf(body.bcc)].filter((entry) => typeof entry === "string");
      const platformUnsubscribe = body.stream === "broadcast" || body.unsubscribe === true;
      checkHeaders(body.headers, platformUnsubscribe && soleAddress(everyone) !== null, ctx);
    }
  }, evenWithFieldErrors)
  .openapi("SendRequest");

export type SendRequest = z.infer<typeof SendRequestSchema>;

/** The body of POST /send/batch. */
export const SendBatchRequestSchema = z
  .array(SendRequestSchema)
  .min(1)
  .max(batchLimit)
  .openapi("SendBatchRequest", { description: `1 to ${batchLimit} send requests, each as POST /send takes it` });

/** The body of PATCH /messages/{id}: a scheduled message's new time. */
export const RescheduleRequestSchema = z.object({ scheduled_at: ScheduledAtSchema }).strict().openapi("RescheduleRequest");

/** The decoded size of a request's attachments, which may be at most `sendLimits.attachmentBytes` (the edge answers 413). */
export function attachmentBytesOf(body: SendRequest): number {
  return (body.attachments ?? []).reduce((total, attachment) => total + decodedSize(attachment.content), 0);
}

function decodedSize(content: string): number {
  const clean = content.replace(/\s+/g, "");
  return Math.floor((clean.length * 3) / 4) - (clean.endsWith("==") ? 2 : clean.endsWith("=") ? 1 : 0);
}

/** The schema has checked every mailbox; this parses them again for their parts. */
function mailboxOf(input: string): Mailbox {
  const parsed = parseMailbox(input);
  // Unreachable for a request the schema accepted.
  if (!parsed.ok) throw new Error(`a mailbox the schema accepted does not parse: ${parsed.error}`);
  return parsed.mailbox;
}

const asList = (value: string | string[] | undefined): string[] => (value === undefined ? [] : typeof value === "string" ? [value] : value);

export function toAcceptInput(body: SendRequest): AcceptInput {
  const from = mailboxOf(body.from);
  // `Name <address>` entries keep their name in the To and Cc headers; acceptMessage makes the recipients of them.
  const to = asList(body.to);
  const cc = asList(body.cc);
  const bcc = asList(body.bcc);
  const variables = body.variables ?? {};
  return {
    source: "api",
    stream: body.stream ?? "transactional",
    listUnsubscribe: body.unsubscribe ?? false,
    from,
    // Every copy is a recipient: charged, capped, recorded and delivered like a `to` (the field errors name `to`).
    recipients: [...to, ...cc, ...bcc],
    replyTo: body.reply_to === undefined ? undefined : mailboxText(mailboxOf(body.reply_to)),
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
          ...(cc.length > 0 ? { cc } : {}),
          ...(bcc.length > 0 ? { bcc } : {}),
          ...(body.headers && Object.keys(body.headers).length > 0 ? { headers: body.headers } : {}),
          html: body.html ?? template?.html ?? undefined,
          text: body.text ?? template?.text ?? undefined,
          variables,
          attachments: (body.attachments ?? []).map(({ content, content_id, ...attachment }) => ({
            ...attachment,
            content: content.replace(/\s+/g, ""),
            ...(content_id === undefined ? {} : { content_id: content_id.replace(/^<|>$/g, "") }),
          })),
        },
      };
    },
  };
}
