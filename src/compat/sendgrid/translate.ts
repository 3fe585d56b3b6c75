// SendGrid's v3 mail send request and error shapes, and the mapping onto POST /send's (docs/migrating.md,
// "SendGrid"): each personalization is one message, as SendGrid sends one per personalization.

import type { Context } from "hono";
import { errorStatus, type ErrorCode } from "../../errors";
import { z } from "../../lib/openapi";
import type { AppEnv } from "../../types";
import { PeerError, stringVariables, type Failure } from "../shared";

export const SendGridErrorSchema = z
  .object({
    errors: z.array(
      z.object({
        message: z.string(),
        field: z.string().nullable(),
        help: z.string().nullable(),
      }),
    ),
  })
  .openapi("SendGridError");

type SendGridStatus = 400 | 401 | 403 | 404 | 413 | 429 | 500 | 503;
// SendGrid answers every invalid request with 400, a key that may not do this with 403, and credits run out with 403 too.
const sendGridStatus: Partial<Record<ErrorCode, SendGridStatus>> = {
  unauthorized: 401,
  scope_missing: 403,
  forbidden: 403,
  feature_disabled: 403,
  live_key_required: 403,
  domain_not_verified: 403,
  domain_reputation_hold: 403,
  insufficient_credits: 403,
  not_found: 404,
  payload_too_large: 413,
  validation_failed: 400,
  conflict: 400,
  rate_limited: 429,
  daily_limit_reached: 429,
  internal_error: 500,
  upstream_unavailable: 503,
  account_moving: 503,
};

/** Our field path (`<personalization>.<field>` in a request of several) as SendGrid names the field. */
export function sendGridField(path: string): string {
  const [first, ...rest] = path.split(".");
  const indexed = /^\d+$/.test(first ?? "");
  const [field, ...tail] = indexed ? rest : [first!, ...rest];
  const at = indexed ? `personalizations.${first}.` : "personalizations.0.";
  switch (field) {
    case "to":
    case "cc":
    case "bcc":
      return `${at}${field}${tail.length > 0 ? `.${tail[0]}.email` : ""}`;
    case "from":
      return "from.email";
    case "reply_to":
      return "reply_to.email";
    case "html":
    case "text":
      return "content";
    case "tags":
      return ["categories", ...tail].join(".");
    case "metadata":
      return ["custom_args", ...tail].join(".");
    case "variables":
      return [`${at}dynamic_template_data`, ...tail].join(".");
    case "scheduled_at":
      return "send_at";
    default:
      return [field, ...tail].join(".");
  }
}

export function renderSendGridError(failure: Failure, c: Context<AppEnv>): Response {
  const status = sendGridStatus[failure.code] ?? (errorStatus[failure.code] < 500 ? 400 : 500);
  const fields = failure.code === "validation_failed" && failure.errors ? Object.entries(failure.errors) : [];
  const errors =
    fields.length > 0
      ? fields.map(([field, messages]) => ({ message: messages.join("; "), field: failure.peerName ?? sendGridField(field), help: null }))
      : [{ message: failure.message, field: failure.peerName ?? null, help: null }];
  return c.json({ errors }, status);
}

export const notSupported = (field: string, what: string) =>
  new PeerError("validation_failed", "Not supported", field, { errors: { [field]: [`${what} is not supported by Mailforge (docs/migrating.md)`] } });

const EmailObject = z.object({ email: z.string(), name: z.string().optional() }).strict();

const Personalization = z
  .object({
    to: z.array(EmailObject).min(1),
    cc: z.array(EmailObject).optional(),
    bcc: z.array(EmailObject).optional(),
    subject: z.string().optional(),
    headers: z.record(z.string(), z.string()).optional(),
    substitutions: z.record(z.string(), z.unknown()).optional(),
    dynamic_template_data: z.record(z.string(), z.unknown()).optional(),
    custom_args: z.record(z.string(), z.string()).optional(),
    send_at: z.number().int().optional(),
    from: EmailObject.optional(),
  })
  .strict();

const Enable = z.object({ enable: z.boolean() }).loose();

// Every field of v3 mail send is named, so one we cannot honour is refused by name rather than dropped.
export const SendGridMailSchema = z
  .object({
    personalizations: z.array(Personalization).min(1).max(100),
    from: EmailObject,
    reply_to: EmailObject.optional(),
    reply_to_list: z.array(EmailObject).optional(),
    subject: z.string().optional(),
    content: z.array(z.object({ type: z.string(), value: z.string() }).strict()).optional(),
    attachments: z
      .array(
        z
          .object({
            content: z.string(),
            type: z.string().optional(),
            filename: z.string(),
            disposition: z.enum(["attachment", "inline"]).optional(),
            content_id: z.string().optional(),
          })
          .strict(),
      )
      .optional(),
    template_id: z.string().optional().openapi({ description: "A Mailforge template's id or name" }),
    headers: z.record(z.string(), z.string()).optional(),
    categories: z.array(z.string()).optional(),
    custom_args: z.record(z.string(), z.string()).optional(),
    send_at: z.number().int().optional(),
    tracking_settings: z
      .object({
        click_tracking: Enable.optional(),
        open_tracking: Enable.optional(),
        subscription_tracking: Enable.optional(),
        ganalytics: Enable.optional(),
      })
      .strict()
      .optional(),
    mail_settings: z.record(z.string(), Enable).optional(),
    asm: z.unknown().optional(),
    batch_id: z.unknown().optional(),
    ip_pool_name: z.unknown().optional(),
    sections: z.unknown().optional(),
  })
  .strict()
  .openapi("SendGridMail");
export type SendGridMail = z.infer<typeof SendGridMailSchema>;

const mailbox = (entry: { email: string; name?: string }) => (entry.name ? `${JSON.stringify(entry.name)} <${entry.email}>` : entry.email);

/** What SendGrid would do that we cannot, refused before anything is sent. */
function refuseUnsupported(mail: SendGridMail) {
  for (const field of ["asm", "batch_id", "ip_pool_name", "sections"] as const) {
    if (mail[field] !== undefined) throw notSupported(field, `\`${field}\``);
  }
  if ((mail.reply_to_list?.length ?? 0) > 1) throw notSupported("reply_to_list", "More than one reply-to address");
  for (const [name, setting] of Object.entries(mail.mail_settings ?? {})) {
    if (setting.enable) throw notSupported(`mail_settings.${name}`, `The mail setting \`${name}\``);
  }
  for (const name of ["subscription_tracking", "ganalytics"] as const) {
    if (mail.tracking_settings?.[name]?.enable) throw notSupported(`tracking_settings.${name}`, `\`${name}\``);
  }
  (mail.content ?? []).forEach((part, index) => {
    if (part.type !== "text/plain" && part.type !== "text/html") throw notSupported(`content.${index}.type`, `Content of type ${part.type}`);
  });
  mail.personalizations.forEach((personalization, index) => {
    if (personalization.substitutions !== undefined) {
      throw notSupported(`personalizations.${index}.substitutions`, "Legacy substitutions (use a template_id with dynamic_template_data)");
    }
    if (personalization.from !== undefined) throw notSupported(`personalizations.${index}.from`, "A from address per personalization");
  });
}

/**
 * A v3 mail send as POST /send requests, one per personalization (still to be checked by POST /send's schema).
 * `templateId` is the Mailforge template that `template_id` named, found by the caller.
 */
export function toSendRequests(mail: SendGridMail, templateId: string | undefined): Record<string, unknown>[] {
  refuseUnsupported(mail);
  const text = mail.content?.find((part) => part.type === "text/plain")?.value;
  const html = mail.content?.find((part) => part.type === "text/html")?.value;
  const replyTo = mail.reply_to ?? mail.reply_to_list?.[0];
  const clicks = mail.tracking_settings?.click_tracking?.enable;
  const opens = mail.tracking_settings?.open_tracking?.enable;
  return mail.personalizations.map((personalization, index) => {
    const { variables, errors } = stringVariables(personalization.dynamic_template_data ?? {}, `personalizations.${index}.dynamic_template_data`);
    const [field] = Object.keys(errors);
    if (field) throw new PeerError("validation_failed", "Not supported", field, { errors });
    const headers = { ...mail.headers, ...personalization.headers };
    const sendAt = personalization.send_at ?? mail.send_at;
    const subject = personalization.subject ?? mail.subject;
    return {
      from: mailbox(mail.from),
      to: personalization.to.map(mailbox),
      ...(personalization.cc?.length ? { cc: personalization.cc.map(mailbox) } : {}),
      ...(personalization.bcc?.length ? { bcc: personalization.bcc.map(mailbox) } : {}),
      ...(replyTo ? { reply_to: mailbox(replyTo) } : {}),
      ...(subject === undefined ? {} : { subject }),
      ...(templateId ? { template_id: templateId, variables } : {}),
      ...(text === undefined ? {} : { text }),
      ...(html === undefined ? {} : { html }),
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
      ...(mail.categories?.length ? { tags: mail.categories } : {}),
      ...(mail.custom_args || personalization.custom_args ? { metadata: { ...mail.custom_args, ...personalization.custom_args } } : {}),
      ...(mail.attachments?.length
        ? {
            attachments: mail.attachments.map((attachment) => ({
              filename: attachment.filename,
              content: attachment.content,
              ...(attachment.type ? { content_type: attachment.type } : {}),
              ...(attachment.disposition === "inline" && attachment.content_id ? { content_id: attachment.content_id } : {}),
            })),
          }
        : {}),
      ...(sendAt === undefined ? {} : { scheduled_at: new Date(sendAt * 1000).toISOString() }),
      ...(clicks === undefined ? {} : { track_clicks: clicks }),
      ...(opens === undefined ? {} : { track_opens: opens }),
      stream: "transactional",
    };
  });
}
