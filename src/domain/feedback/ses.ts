// Amazon SES feedback through SNS (docs/deliverability.md): an SNS topic of the SES identity (or configuration set)
// posts Bounce, Complaint and Delivery notifications to POST /feedback/ses. Only topics listed in SES_SNS_TOPIC_ARNS
// are accepted, and only with a valid SNS signature; a subscription confirmation is confirmed by fetching its
// SubscribeURL. The topic is the operator's own, so a notification is trusted once its signature is; the mail it is
// about is not: a relay customer writes their own headers. It names our message by its envelope sender (the VERP
// return path, signed) or, failing that, by the Message-ID we wrote (`<msg_…@domain>`), believed only when the rest
// of the notification is that message's too (`messageOfHeader`).

import { findInAccountDatabases, inDatabase, type Ctx, type DatabaseName } from "../../db/client";
import { z } from "zod";
import { config } from "../../config";
import { base64ToBytes } from "../../lib/crypto";
import { logWarning } from "../../lib/log";
import { loadContent } from "../sending/content";
import { findNamedMessage, type NamedMessage } from "../sending/messages";
import { buildMessageId } from "../sending/mime";
import { hasOwnMessageId } from "../sending/signed-message";
import { recordFeedback, type Feedback } from "./record";
import { ownerOfReturnPath } from "./return-path";
import { snsMessageSchema, trustedSnsUrl, verifySnsSignature, type SnsMessage } from "./sns";

const recipientList = z.array(z.looseObject({ emailAddress: z.string(), status: z.string().optional(), diagnosticCode: z.string().optional() }));

// SES notifications (notificationType) and event publishing (eventType) share these objects.
const sesNotificationSchema = z.looseObject({
  notificationType: z.string().optional(),
  eventType: z.string().optional(),
  mail: z.looseObject({
    messageId: z.string(),
    source: z.string().optional(),
    destination: z.array(z.string()).optional(),
    commonHeaders: z.looseObject({ messageId: z.string().optional() }).optional(),
    headers: z.array(z.object({ name: z.string(), value: z.string() })).optional(),
  }),
  bounce: z
    .looseObject({
      bounceType: z.string(),
      bounceSubType: z.string().optional(),
      bouncedRecipients: recipientList,
      feedbackId: z.string().optional(),
    })
    .optional(),
  complaint: z
    .looseObject({
      complainedRecipients: z.array(z.looseObject({ emailAddress: z.string() })),
      complaintFeedbackType: z.string().optional(),
      feedbackId: z.string().optional(),
    })
    .optional(),
  delivery: z.looseObject({ recipients: z.array(z.string()), smtpResponse: z.string().optional() }).optional(),
});
type SesNotification = z.infer<typeof sesNotificationSchema>;

type SesOutcome =
  | { kind: "invalid"; reason: string }
  | { kind: "forbidden"; reason: string }
  | { kind: "confirmed" }
  | { kind: "recorded"; recorded: number; ignored: number }
  | { kind: "ignored"; reason: string };

async function certificate(url: string): Promise<string> {
  const cache = await caches.open("sns-certificates");
  const cached = await cache.match(url);
  if (cached) return cached.text();
  const response = await fetch(url);
  if (!response.ok) throw new Error(`the signing certificate could not be fetched (${response.status})`);
  const pem = await response.text();
  await cache.put(url, new Response(pem, { headers: { "Cache-Control": "max-age=86400" } }));
  return pem;
}

/** Checks and applies one SNS request body. */
export async function handleSesNotification(ctx: Ctx, body: unknown): Promise<SesOutcome> {
  const { env } = ctx;
  const settings = config(env);
  const parsed = snsMessageSchema.safeParse(body);
  if (!parsed.success) return { kind: "invalid", reason: "Not an SNS message" };
  const message = parsed.data;
  if (!settings.ses.topicArns.includes(message.TopicArn))
    return { kind: "forbidden", reason: `Topic ${message.TopicArn} is not in SES_SNS_TOPIC_ARNS` };
  if (!trustedSnsUrl(message.SigningCertURL, settings.ses.trustedCertOrigin))
    return { kind: "forbidden", reason: "SigningCertURL is not an SNS address" };
  let valid = false;
  try {
    valid = await verifySnsSignature(message, await certificate(message.SigningCertURL));
  } catch (error) {
    logWarning("ses: signature check failed", { error: String(error) });
  }
  if (!valid) return { kind: "forbidden", reason: "Invalid SNS signature" };

  if (message.Type === "SubscriptionConfirmation") {
    if (!message.SubscribeURL || !trustedSnsUrl(message.SubscribeURL, settings.ses.trustedCertOrigin)) {
      return { kind: "invalid", reason: "SubscribeURL is not an SNS address" };
    }
    const confirmed = await fetch(message.SubscribeURL);
    return confirmed.ok ? { kind: "confirmed" } : { kind: "invalid", reason: `Confirming the subscription failed (${confirmed.status})` };
  }
  if (message.Type === "UnsubscribeConfirmation") return { kind: "ignored", reason: "unsubscribed" };

  let notification: SesNotification;
  try {
    notification = sesNotificationSchema.parse(JSON.parse(message.Message));
  } catch {
    return { kind: "invalid", reason: "The notification's Message is not an SES notification" };
  }
  const ours = await ourMessage(ctx, notification);
  if (!ours) {
    logWarning("ses: notification for a message that is not ours dropped", { ses_message_id: notification.mail.messageId });
    return { kind: "ignored", reason: "not one of our messages" };
  }
  const reports = feedbackOf(notification, ours.messageId, message);
  // A VERP envelope sender belongs to one recipient's copy: SES has nothing to say about the others.
  const copyOf = ours.recipient?.toLowerCase();
  const about = copyOf ? reports.filter((report) => report.recipient.toLowerCase() === copyOf) : reports;
  if (about.length < reports.length) {
    logWarning("ses: recipients the envelope sender does not belong to ignored", { message_id: ours.messageId, recipient: ours.recipient });
  }
  const result = await recordFeedback(inDatabase(ctx, ours.database), about);
  return { kind: "recorded", ...result };
}

/**
 * Our message the notification is about, the account database it is in, and the recipient whose copy it was when its
 * envelope sender says so. A VERP envelope sender names the database; a Message-ID header does not, so without
 * BOUNCE_DOMAIN the message is looked for in each account database in turn.
 */
async function ourMessage(
  ctx: Ctx,
  notification: SesNotification,
): Promise<{ messageId: string; database: DatabaseName; recipient?: string } | undefined> {
  const { env } = ctx;
  const { source } = notification.mail;
  // SES always names the envelope sender; without it nothing ties the mail to one of our senders.
  if (!source) return undefined;
  const owner = await ownerOfReturnPath(ctx, config(env), source);
  if ("recipient" in owner) return owner;
  return messageOfHeader(ctx, notification, source);
}

/**
 * The message a `<msg_…@domain>` Message-ID names, when the notification is about that message's mail. The header
 * alone proves nothing: anyone who received one of our messages can copy its Message-ID into mail of their own,
 * relayed through another account. So the header must be the Message-ID that message left with, written by us (a
 * relayed message that had a Message-ID of its own left with that one instead); the envelope sender must be its
 * From address (what we send as MAIL FROM without BOUNCE_DOMAIN), which only an account that verified its domain
 * sends from; and every recipient the notification names must be one of its recipients.
 */
async function messageOfHeader(
  ctx: Ctx,
  notification: SesNotification,
  source: string,
): Promise<{ messageId: string; database: DatabaseName } | undefined> {
  const { env } = ctx;
  const { mail } = notification;
  const header = (mail.commonHeaders?.messageId ?? mail.headers?.find((h) => h.name.toLowerCase() === "message-id")?.value)?.trim();
  const id = header?.match(/^<(msg_[A-Za-z0-9]+)@[^\s<>@]+>$/)?.[1];
  if (!header || !id) return undefined;
  const found = await findInAccountDatabases(
    env,
    undefined,
    (db) => findNamedMessage(db, id),
    (named) => named.message.accountId,
  );
  if (!found) return undefined;
  const { message, recipients } = found.found;
  const lower = (address: string) => address.trim().replace(/^<|>$/g, "").toLowerCase();
  if (header.toLowerCase() !== buildMessageId(message.id, message.fromAddress).toLowerCase()) return undefined;
  if (lower(source) !== lower(message.fromAddress)) return undefined;
  const own = new Set(recipients.map(lower));
  if (!notifiedRecipients(notification).every((address) => own.has(lower(address)))) return undefined;
  if (message.source === "smtp" && !(await leftWithOurMessageId(env, message))) return undefined;
  return { messageId: message.id, database: found.database };
}

/** Whether a relayed message left with the Message-ID we add, i.e. it arrived without one of its own. */
async function leftWithOurMessageId(env: Env, message: NamedMessage["message"]): Promise<boolean> {
  // Content that cannot be read proves nothing either way: the header is not believed.
  const content = await loadContent(env, message).catch(() => undefined);
  return content?.kind === "raw" && !hasOwnMessageId(base64ToBytes(content.raw));
}

/** Every address the notification says the mail went to or was reported by. */
function notifiedRecipients(notification: SesNotification): string[] {
  return [
    ...(notification.mail.destination ?? []),
    ...(notification.bounce?.bouncedRecipients.map((recipient) => recipient.emailAddress) ?? []),
    ...(notification.complaint?.complainedRecipients.map((recipient) => recipient.emailAddress) ?? []),
    ...(notification.delivery?.recipients ?? []),
  ];
}

function feedbackOf(notification: SesNotification, messageId: string, sns: SnsMessage): Feedback[] {
  const type = notification.notificationType ?? notification.eventType;
  const base = { target: { messageId }, source: "ses" as const };
  if (type === "Bounce" && notification.bounce) {
    const { bounce } = notification;
    // Permanent: the address is gone (or on SES's suppression list: blocked). Transient/Undetermined: SES gave up.
    const bounceType = bounce.bounceType === "Permanent" ? (bounce.bounceSubType?.includes("Suppress") ? "blocked" : "hard") : "soft";
    return bounce.bouncedRecipients.map((recipient) => ({
      ...base,
      recipient: recipient.emailAddress,
      kind: "bounced" as const,
      bounceType,
      final: true,
      status: recipient.status,
      diagnostic: recipient.diagnosticCode ?? bounce.bounceSubType,
      sourceId: bounce.feedbackId ?? sns.MessageId,
    }));
  }
  if (type === "Complaint" && notification.complaint) {
    const { complaint } = notification;
    return complaint.complainedRecipients.map((recipient) => ({
      ...base,
      recipient: recipient.emailAddress,
      kind: "complained" as const,
      feedbackType: complaint.complaintFeedbackType ?? "abuse",
      sourceId: complaint.feedbackId ?? sns.MessageId,
    }));
  }
  if (type === "Delivery" && notification.delivery) {
    const { delivery } = notification;
    return delivery.recipients.map((recipient) => ({
      ...base,
      recipient,
      kind: "delivered" as const,
      diagnostic: delivery.smtpResponse,
      sourceId: sns.MessageId,
    }));
  }
  return [];
}
