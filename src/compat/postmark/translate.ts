// Postmark's request and response shapes, and the mapping onto POST /send's (docs/migrating.md, "Postmark"). The
// postmark Node client throws its own error classes from the HTTP status and `ErrorCode`, so both are Postmark's.

import type { Context } from "hono";
import type { SendRequest } from "../../domain/sending/input";
import { errorStatus, type ErrorCode, type FieldErrors } from "../../errors";
import { jsonResponse, z } from "../../lib/openapi";
import type { AppEnv } from "../../types";
import { PeerError, stringVariables, type Failure } from "../shared";

export const PostmarkErrorSchema = z
  .object({
    ErrorCode: z.number().int().openapi({ example: 300 }),
    Message: z.string().openapi({ example: "Invalid 'To' address: 'not-an-address'." }),
  })
  .openapi("PostmarkError");

/** What every Postmark route declares (peerRoute): its token header, Postmark's error shape, what POST /send needs. */
export const postmarkPeer = {
  security: { postmarkServerToken: [] },
  errors: jsonResponse(PostmarkErrorSchema, "An error as Postmark gives it: `{ErrorCode, Message}` with HTTP 401, 422, 429 or 5xx"),
  features: ["email_api", "smtp_relay"] as ("email_api" | "smtp_relay")[],
};
export const postmarkTags = ["Postmark compatibility"];

/** Postmark's API error codes (https://postmarkapp.com/developer/api/overview#error-codes) used here. */
export const postmarkCodes = {
  invalidToken: 10,
  invalidEmailRequest: 300,
  senderSignatureNotFound: 400,
  notAllowedToSend: 405,
  messageNotFound: 701,
  templateNotFound: 1101,
  streamNotFound: 1235,
} as const;

type PostmarkStatus = 401 | 422 | 429 | 500 | 503;
const postmarkErrors: Partial<Record<ErrorCode, { status: PostmarkStatus; code: number }>> = {
  unauthorized: { status: 401, code: postmarkCodes.invalidToken },
  // A key without the scope cannot do this at all, which Postmark's client reports as a bad token.
  scope_missing: { status: 401, code: postmarkCodes.invalidToken },
  forbidden: { status: 401, code: postmarkCodes.invalidToken },
  feature_disabled: { status: 422, code: postmarkCodes.notAllowedToSend },
  live_key_required: { status: 401, code: postmarkCodes.invalidToken },
  domain_not_verified: { status: 422, code: postmarkCodes.senderSignatureNotFound },
  domain_reputation_hold: { status: 422, code: postmarkCodes.notAllowedToSend },
  insufficient_credits: { status: 422, code: postmarkCodes.notAllowedToSend },
  daily_limit_reached: { status: 429, code: postmarkCodes.notAllowedToSend },
  // Postmark gives no ErrorCode with a 429 or a 5xx: the status is the answer, and its client classifies by it.
  rate_limited: { status: 429, code: 0 },
  validation_failed: { status: 422, code: postmarkCodes.invalidEmailRequest },
  payload_too_large: { status: 422, code: postmarkCodes.invalidEmailRequest },
  conflict: { status: 422, code: postmarkCodes.invalidEmailRequest },
  not_found: { status: 422, code: postmarkCodes.messageNotFound },
  internal_error: { status: 500, code: 0 },
  upstream_unavailable: { status: 503, code: 0 },
  account_moving: { status: 503, code: 0 },
};

/** Our field names (POST /send's) as a Postmark request names them. */
const postmarkField: Record<string, string> = {
  from: "From",
  to: "To",
  cc: "Cc",
  bcc: "Bcc",
  reply_to: "ReplyTo",
  subject: "Subject",
  html: "HtmlBody",
  text: "TextBody",
  headers: "Headers",
  attachments: "Attachments",
  metadata: "Metadata",
  tags: "Tag",
  template_id: "TemplateAlias",
  variables: "TemplateModel",
  scheduled_at: "ScheduledAt",
};

const renameField = (path: string) =>
  path
    .split(".")
    .map((part) => postmarkField[part] ?? part)
    .join(".");

export const postmarkFieldMessage = (errors: FieldErrors) =>
  Object.entries(errors)
    .map(([field, messages]) => `Invalid '${renameField(field)}': ${messages.join("; ")}.`)
    .join(" ");

export function renderPostmarkError(failure: Failure, c: Context<AppEnv>): Response {
  const mapped =
    postmarkErrors[failure.code] ?? (errorStatus[failure.code] < 500 ? postmarkErrors.validation_failed! : postmarkErrors.internal_error!);
  const code = failure.peerName === undefined ? mapped.code : Number(failure.peerName);
  const message = failure.code === "validation_failed" && failure.errors ? postmarkFieldMessage(failure.errors) : failure.message;
  return c.json({ ErrorCode: code, Message: message }, mapped.status);
}

/** A refusal with Postmark's own ErrorCode (what its client's error classes are chosen by). */
export const postmarkError = (code: ErrorCode, errorCode: number, message: string) => new PeerError(code, message, String(errorCode));

export const notSupported = (what: string) =>
  postmarkError("validation_failed", postmarkCodes.invalidEmailRequest, `${what} is not supported by Mailforge (docs/migrating.md).`);

const HeaderSchema = z.object({ Name: z.string(), Value: z.string() }).strict();
const AttachmentSchema = z
  .object({
    Name: z.string(),
    Content: z.string().openapi({ description: "Base64" }),
    ContentType: z.string().optional(),
    ContentID: z.string().nullable().optional().openapi({ description: "`cid:logo` or `logo`: an inline image of the HTML body" }),
  })
  .strict();

// Every field Postmark's client can send is named, so one we cannot honour is refused by name, never dropped.
const common = {
  From: z.string(),
  To: z.string().openapi({ description: "Comma-separated, as on Postmark" }),
  Cc: z.string().optional(),
  Bcc: z.string().optional(),
  ReplyTo: z.string().optional(),
  Tag: z.string().optional(),
  Headers: z.array(HeaderSchema).optional(),
  Attachments: z.array(AttachmentSchema).optional(),
  Metadata: z.record(z.string(), z.string()).optional(),
  TrackOpens: z.boolean().optional(),
  TrackLinks: z.enum(["None", "HtmlAndText", "HtmlOnly", "TextOnly"]).optional(),
  MessageStream: z.string().optional().openapi({ description: "`outbound` (transactional, the default) or `broadcast`" }),
};

export const PostmarkEmailSchema = z
  .object({ ...common, Subject: z.string().optional(), HtmlBody: z.string().optional(), TextBody: z.string().optional() })
  .strict()
  .openapi("PostmarkEmail");
export type PostmarkEmail = z.infer<typeof PostmarkEmailSchema>;

export const PostmarkTemplatedEmailSchema = z
  .object({
    ...common,
    TemplateId: z.union([z.number(), z.string()]).optional(),
    TemplateAlias: z.string().optional().openapi({ description: "The Mailforge template's id or name" }),
    TemplateModel: z.record(z.string(), z.unknown()).optional(),
    InlineCss: z.boolean().optional(),
  })
  .strict()
  .openapi("PostmarkTemplatedEmail");
export type PostmarkTemplatedEmail = z.infer<typeof PostmarkTemplatedEmailSchema>;

/** Splits Postmark's comma-separated address list; commas inside quotes or angle brackets belong to a name or address. */
export function splitAddresses(list: string): string[] {
  const parts: string[] = [];
  let current = "";
  let quoted = false;
  let angled = false;
  for (const char of list) {
    if (char === '"') quoted = !quoted;
    else if (char === "<" && !quoted) angled = true;
    else if (char === ">" && !quoted) angled = false;
    if (char === "," && !quoted && !angled) {
      parts.push(current);
      current = "";
    } else current += char;
  }
  parts.push(current);
  return parts.map((part) => part.trim()).filter((part) => part.length > 0);
}

/** Postmark's stream ids: its defaults `outbound` and `broadcast`; Mailforge has no other streams. */
export function streamOf(messageStream: string | undefined): "transactional" | "broadcast" {
  if (messageStream === undefined || messageStream === "outbound") return "transactional";
  if (messageStream === "broadcast") return "broadcast";
  throw postmarkError(
    "validation_failed",
    postmarkCodes.streamNotFound,
    `The message stream '${messageStream}' was not found: Mailforge has 'outbound' (transactional) and 'broadcast'.`,
  );
}

/** The fields both kinds of Postmark email share, as POST /send's. */
function commonRequest(email: PostmarkEmail | PostmarkTemplatedEmail): Partial<Record<keyof SendRequest, unknown>> {
  if (email.TrackLinks === "TextOnly") throw notSupported("TrackLinks 'TextOnly' (links are tracked in the HTML body)");
  const headers = Object.fromEntries((email.Headers ?? []).map((header) => [header.Name, header.Value]));
  const cc = email.Cc === undefined ? [] : splitAddresses(email.Cc);
  const bcc = email.Bcc === undefined ? [] : splitAddresses(email.Bcc);
  const replyTo = email.ReplyTo === undefined ? [] : splitAddresses(email.ReplyTo);
  if (replyTo.length > 1) throw notSupported("More than one ReplyTo address");
  return {
    from: email.From,
    to: splitAddresses(email.To),
    ...(cc.length > 0 ? { cc } : {}),
    ...(bcc.length > 0 ? { bcc } : {}),
    ...(replyTo[0] === undefined ? {} : { reply_to: replyTo[0] }),
    ...(email.Tag ? { tags: [email.Tag] } : {}),
    ...(email.Metadata ? { metadata: email.Metadata } : {}),
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    ...(email.Attachments?.length
      ? {
          attachments: email.Attachments.map((attachment) => ({
            filename: attachment.Name,
            content: attachment.Content,
            ...(attachment.ContentType ? { content_type: attachment.ContentType } : {}),
            ...(attachment.ContentID ? { content_id: attachment.ContentID.replace(/^cid:/i, "") } : {}),
          })),
        }
      : {}),
    ...(email.TrackOpens !== undefined ? { track_opens: email.TrackOpens } : {}),
    ...(email.TrackLinks !== undefined ? { track_clicks: email.TrackLinks !== "None" } : {}),
    stream: streamOf(email.MessageStream),
  };
}

export function toSendRequest(email: PostmarkEmail): Record<string, unknown> {
  return {
    ...commonRequest(email),
    ...(email.Subject === undefined ? {} : { subject: email.Subject }),
    ...(email.HtmlBody === undefined ? {} : { html: email.HtmlBody }),
    ...(email.TextBody === undefined ? {} : { text: email.TextBody }),
  };
}

/**
 * A templated Postmark email as POST /send's request with `template_id`, once its template was found; the model's
 * values fill the template's `{{placeholders}}`.
 */
export function toTemplatedSendRequest(email: PostmarkTemplatedEmail, templateId: string): Record<string, unknown> {
  if (email.InlineCss === true) throw notSupported("InlineCss (templates are sent as stored)");
  const { variables, errors } = stringVariables(email.TemplateModel ?? {}, "TemplateModel");
  if (Object.keys(errors).length > 0) {
    throw postmarkError("validation_failed", postmarkCodes.invalidEmailRequest, postmarkFieldMessage(errors));
  }
  return { ...commonRequest(email), template_id: templateId, variables };
}

/** The template a templated email names: TemplateAlias (or TemplateId) is a Mailforge template's id or name. */
export function templateNameOf(email: PostmarkTemplatedEmail): string {
  const name = email.TemplateAlias ?? (email.TemplateId === undefined ? undefined : String(email.TemplateId));
  if (!name) throw postmarkError("validation_failed", postmarkCodes.invalidEmailRequest, "Give a TemplateAlias or a TemplateId.");
  return name;
}

/** Postmark's outbound status for ours: queued until it leaves, then sent; the outcome shows in MessageEvents. */
export function outboundStatus(status: string): string {
  if (["scheduled", "queued", "sending", "deferred"].includes(status)) return "Queued";
  if (status === "cancelled") return "Cancelled";
  if (status === "failed" || status === "suppressed") return "Failed";
  return "Sent";
}

/** Our timeline's event types as Postmark's MessageEvents types (those without a counterpart are left out). */
export const messageEventType: Record<string, string> = {
  "relay.delivered": "Delivered",
  delivered: "Delivered",
  "relay.bounced": "Bounced",
  bounced: "Bounced",
  opened: "Opened",
  clicked: "LinkClicked",
  "relay.complained": "SubscriptionChanged",
  complained: "SubscriptionChanged",
  unsubscribed: "SubscriptionChanged",
};

export const mailboxes = (entries: string[]) =>
  entries.map((entry) => {
    const match = /^\s*"?([^"<]*?)"?\s*<([^>]+)>\s*$/.exec(entry);
    return match ? { Email: match[2]!, Name: match[1]! } : { Email: entry.trim(), Name: "" };
  });
