// Resend's request and response shapes, and the mapping onto POST /send's (docs/migrating.md, "Resend"): the resend
// Node client reads `{data, error}` from these, so its fields, names and statuses are Resend's, not /api/v1's.

import type { Context } from "hono";
import { config } from "../../config";
import { createResolver } from "../../domain/dns/doh";
import type { SendRequest } from "../../domain/sending/input";
import { sendLimits } from "../../domain/sending/rules";
import { checkWebhookUrl, allowPrivateWebhookUrls } from "../../domain/webhooks/url-policy";
import { errorStatus, type ErrorCode, type FieldErrors } from "../../errors";
import { bytesToBase64 } from "../../lib/crypto";
import { z } from "../../lib/openapi";
import type { AppEnv } from "../../types";
import { PeerError, type Failure } from "../shared";

export const ResendErrorSchema = z
  .object({
    statusCode: z.number().int().openapi({ example: 422 }),
    name: z.string().openapi({ example: "validation_error" }),
    message: z.string().openapi({ example: "Invalid `to` field: Invalid email address" }),
  })
  .openapi("ResendError");

/** Resend's status and name for each of our refusals (https://resend.com/docs/api-reference/errors). */
type ResendStatus = 401 | 403 | 404 | 409 | 422 | 429 | 500;
const resendErrors: Partial<Record<ErrorCode, { status: ResendStatus; name: string }>> = {
  unauthorized: { status: 403, name: "invalid_api_key" },
  bridge_signature_refused: { status: 403, name: "invalid_api_key" },
  insufficient_credits: { status: 429, name: "monthly_quota_exceeded" },
  forbidden: { status: 401, name: "restricted_api_key" },
  scope_missing: { status: 401, name: "restricted_api_key" },
  live_key_required: { status: 401, name: "restricted_api_key" },
  feature_disabled: { status: 401, name: "restricted_api_key" },
  domain_not_verified: { status: 403, name: "validation_error" },
  ai_quota_exceeded: { status: 429, name: "monthly_quota_exceeded" },
  domain_reputation_hold: { status: 403, name: "validation_error" },
  not_found: { status: 404, name: "not_found" },
  conflict: { status: 409, name: "conflict" },
  idempotency_conflict: { status: 409, name: "invalid_idempotent_request" },
  campaign_not_draft: { status: 409, name: "conflict" },
  automation_paused: { status: 409, name: "conflict" },
  payload_too_large: { status: 422, name: "invalid_attachment" },
  validation_failed: { status: 422, name: "validation_error" },
  rate_limited: { status: 429, name: "rate_limit_exceeded" },
  daily_limit_reached: { status: 429, name: "daily_quota_exceeded" },
  internal_error: { status: 500, name: "application_error" },
  upstream_unavailable: { status: 500, name: "application_error" },
  ai_not_configured: { status: 500, name: "application_error" },
  account_moving: { status: 500, name: "application_error" },
};

/** Resend's one-line messages name the first field at fault; every field is listed after it. */
function fieldMessage(errors: FieldErrors): { name?: string; message: string } {
  const entries = Object.entries(errors);
  const missing = entries.find(([, messages]) => messages.some((message) => /^Required$|received undefined/.test(message)));
  if (missing) return { name: "missing_required_field", message: `Missing \`${missing[0]}\` field.` };
  return { message: entries.map(([field, messages]) => `Invalid \`${field}\` field: ${messages.join("; ")}`).join(" ") };
}

/** Names a refusal can be given explicitly (PeerError), where the name and not our code decides the status. */
const namedStatus: Record<string, ResendStatus> = { missing_api_key: 401, invalid_api_key: 403, invalid_attachment: 422 };

export function renderResendError(failure: Failure, c: Context<AppEnv>): Response {
  // A code added later without a line here still gets a client error or a server error, as its own status says.
  const byCode = resendErrors[failure.code] ?? (errorStatus[failure.code] < 500 ? resendErrors.validation_failed! : resendErrors.internal_error!);
  const detail = failure.code === "validation_failed" && failure.errors ? fieldMessage(failure.errors) : undefined;
  const name = failure.peerName ?? detail?.name ?? byCode.name;
  const status = namedStatus[name] ?? byCode.status;
  return c.json({ statusCode: status, name, message: detail?.message ?? failure.message }, status);
}

export const notSupported = (what: string) => new PeerError("validation_failed", `${what} is not supported by Mailforge (docs/migrating.md)`);

const OneOrMany = z.union([z.string(), z.array(z.string())]);

const ResendAttachmentSchema = z
  .object({
    content: z.string().optional().openapi({ description: "Base64" }),
    filename: z.string().optional(),
    path: z.string().optional().openapi({ description: "An http(s) URL the file is fetched from when the email is accepted" }),
    content_type: z.string().optional(),
    content_id: z.string().optional(),
  })
  .strict();

const tagPart = /^[A-Za-z0-9_-]+$/;

export const ResendEmailSchema = z
  .object({
    from: z.string(),
    to: OneOrMany,
    // Required unless a template is given (which is refused): POST /send's own check says so, by name.
    subject: z.string().optional(),
    cc: OneOrMany.optional(),
    bcc: OneOrMany.optional(),
    reply_to: OneOrMany.optional(),
    html: z.string().optional(),
    text: z.string().optional(),
    headers: z.record(z.string(), z.string()).optional(),
    attachments: z.array(ResendAttachmentSchema).optional(),
    tags: z
      .array(
        z
          .object({
            name: z.string().regex(tagPart, "Only ASCII letters, numbers, underscores and dashes"),
            value: z.string().regex(tagPart, "Only ASCII letters, numbers, underscores and dashes"),
          })
          .strict(),
      )
      .optional()
      .openapi({ description: "Kept as the Mailforge tag `name:value` (at most 64 characters together)" }),
    scheduled_at: z.string().optional().openapi({ description: "ISO 8601 with an offset; natural language (`in 1 hour`) is not supported" }),
    // Accepted by the schema so that using them gets a clear "not supported" rather than an unknown-field error.
    template: z.unknown().optional().openapi({ description: "Not supported: use `html`/`text` (Mailforge templates are reached through /api/v1)" }),
    topic_id: z.unknown().optional().openapi({ description: "Not supported on this surface" }),
  })
  .strict()
  .openapi("ResendSendEmail");

export type ResendEmail = z.infer<typeof ResendEmailSchema>;

const listOf = (value: string | string[] | undefined) => (value === undefined ? undefined : typeof value === "string" ? [value] : value);

/** Fetches an attachment given by URL, with the webhook URL policy: the Worker must not be pointed at private hosts. */
async function fetchAttachment(env: Env, path: string, field: string): Promise<string> {
  const policy = { allowPrivate: allowPrivateWebhookUrls(env), resolver: createResolver({ url: config(env).dohUrl, maxAgeSeconds: 30 }) };
  const check = await checkWebhookUrl(path, policy);
  if (!check.ok) throw new PeerError("validation_failed", `Invalid \`${field}\` field: ${check.reason}`, "invalid_attachment");
  let response: Response;
  try {
    response = await fetch(check.url, { redirect: "manual", signal: AbortSignal.timeout(10_000) });
  } catch (error) {
    throw new PeerError(
      "validation_failed",
      `Could not fetch \`${field}\`: ${error instanceof Error ? error.message : String(error)}`,
      "invalid_attachment",
    );
  }
  if (!response.ok || !response.body) {
    throw new PeerError("validation_failed", `Could not fetch \`${field}\`: HTTP ${response.status}`, "invalid_attachment");
  }
  const tooLarge = () => new PeerError("payload_too_large", `\`${field}\` is larger than 10 MB`);
  if (Number(response.headers.get("Content-Length") ?? "0") > sendLimits.attachmentBytes) throw tooLarge();
  // Read with a cap rather than trusting Content-Length: a server can stream far more than it announced.
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += chunk.length;
    // Leaving the loop by a throw cancels the rest of the body.
    if (size > sendLimits.attachmentBytes) throw tooLarge();
    chunks.push(chunk);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return bytesToBase64(bytes);
}

/**
 * A Resend email as a POST /send request (still to be checked by its schema). Everything Resend would do with a field
 * we cannot do the same way is refused by name; nothing is dropped.
 */
export async function toSendRequest(env: Env, email: ResendEmail, field = ""): Promise<Record<string, unknown>> {
  if (email.template !== undefined) throw notSupported(`\`${field}template\` (Resend-hosted templates)`);
  if (email.topic_id !== undefined) throw notSupported(`\`${field}topic_id\``);
  const replyTo = listOf(email.reply_to);
  if (replyTo && replyTo.length > 1) throw notSupported(`More than one \`${field}reply_to\` address`);
  const attachments = await Promise.all(
    (email.attachments ?? []).map(async (attachment, index) => {
      const at = `${field}attachments.${index}`;
      if ((attachment.content === undefined) === (attachment.path === undefined)) {
        throw new PeerError("validation_failed", `Invalid \`${at}\` field: give either content or path`, "invalid_attachment");
      }
      const filename = attachment.filename ?? (attachment.path ? new URL(attachment.path, "http://x").pathname.split("/").pop() : undefined);
      return {
        filename: filename || "attachment",
        content: attachment.content ?? (await fetchAttachment(env, attachment.path!, `${at}.path`)),
        ...(attachment.content_type ? { content_type: attachment.content_type } : {}),
        ...(attachment.content_id ? { content_id: attachment.content_id } : {}),
      };
    }),
  );
  const request: Partial<Record<keyof SendRequest, unknown>> = {
    from: email.from,
    to: email.to,
    ...(email.subject === undefined ? {} : { subject: email.subject }),
    ...(email.cc === undefined ? {} : { cc: email.cc }),
    ...(email.bcc === undefined ? {} : { bcc: email.bcc }),
    ...(replyTo?.[0] === undefined ? {} : { reply_to: replyTo[0] }),
    ...(email.html === undefined ? {} : { html: email.html }),
    ...(email.text === undefined ? {} : { text: email.text }),
    ...(email.headers ? { headers: email.headers } : {}),
    ...(attachments.length > 0 ? { attachments } : {}),
    ...(email.tags ? { tags: email.tags.map((tag) => `${tag.name}:${tag.value}`) } : {}),
    ...(email.scheduled_at === undefined ? {} : { scheduled_at: email.scheduled_at }),
    stream: "transactional",
  };
  return request;
}

/** Resend's `last_event` for a message: engagement first, then its delivery status. */
export function lastEvent(status: string, recipients: { opens: number; clicks: number }[]): string {
  if (recipients.some((recipient) => recipient.clicks > 0)) return "clicked";
  if (recipients.some((recipient) => recipient.opens > 0)) return "opened";
  const byStatus: Record<string, string> = {
    scheduled: "scheduled",
    queued: "queued",
    sending: "queued",
    deferred: "delivery_delayed",
    sent: "sent",
    unknown: "sent",
    delivered: "delivered",
    bounced: "bounced",
    failed: "failed",
    suppressed: "suppressed",
    cancelled: "canceled",
  };
  return byStatus[status] ?? status;
}

/** Resend's domain status names for ours. */
export const resendDomainStatus = (status: string) => (status === "pending" ? "pending" : status === "verified" ? "verified" : "failed");

export const resendRecordKind = { dkim: "DKIM", dkim_ed25519: "DKIM", spf: "SPF", dmarc: "DMARC", return_path: "SPF", inbound: "Receiving" } as const;
