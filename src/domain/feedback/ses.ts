// Amazon SES feedback through SNS (docs/deliverability.md): an SNS topic of the SES identity (or configuration set)
// posts Bounce, Complaint and Delivery notifications to POST /feedback/ses. Only topics listed in SES_SNS_TOPIC_ARNS
// are accepted, and only with a valid SNS signature; a subscription confirmation is confirmed by fetching its
// SubscribeURL. A notification names our message by its envelope sender (the VERP return path, signed) or, failing
// that, by the Message-ID header we wrote (`<msg_…@domain>`): the topic is the operator's own, so its notifications
// are trusted once their signature is.

import { z } from "zod";
import { config } from "../../config";
import { logWarning } from "../../lib/log";
import { recordFeedback, type Feedback } from "./record";
import { messageOfReturnPath } from "./return-path";
import { snsMessageSchema, trustedSnsUrl, verifySnsSignature, type SnsMessage } from "./sns";

const recipientList = z.array(z.looseObject({ emailAddress: z.string(), status: z.string().optional(), diagnosticCode: z.string().optional() }));

// SES notifications (notificationType) and event publishing (eventType) share these objects.
const sesNotificationSchema = z.looseObject({
  notificationType: z.string().optional(),
  eventType: z.string().optional(),
  mail: z.looseObject({
    messageId: z.string(),
    source: z.string().optional(),
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
export async function handleSesNotification(env: Env, body: unknown): Promise<SesOutcome> {
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
  const messageId = await ourMessageId(env, notification);
  if (!messageId) {
    logWarning("ses: notification for a message that is not ours dropped", { ses_message_id: notification.mail.messageId });
    return { kind: "ignored", reason: "not one of our messages" };
  }
  const result = await recordFeedback(env, feedbackOf(notification, messageId, message));
  return { kind: "recorded", ...result };
}

async function ourMessageId(env: Env, notification: SesNotification): Promise<string | undefined> {
  if (notification.mail.source) {
    const fromReturnPath = await messageOfReturnPath(config(env), notification.mail.source);
    if (fromReturnPath) return fromReturnPath;
  }
  const header = notification.mail.commonHeaders?.messageId ?? notification.mail.headers?.find((h) => h.name.toLowerCase() === "message-id")?.value;
  return header?.match(/^<?(msg_[A-Za-z0-9]+)@/)?.[1];
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
