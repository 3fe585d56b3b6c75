// Cloudflare Email Sending's delivery events, published to the email-events queue by an event subscription of the
// sending domains (docs/deliverability.md). Each names the copy it is about by Cloudflare's message id, which the
// Cloudflare transport stored for the recipient; the events map onto the same outcomes as DSNs and SES notifications.
// An event carries nothing of the account, so a batch's ids are looked for in each account database in turn, once
// per batch (recordProviderFeedback), not once per event.

import { openCtx } from "../db/client";
import { z } from "zod";
import { recordProviderFeedback, type Feedback } from "../domain/feedback/record";
import { logWarning } from "../lib/log";

const emailSendingEvent = z.object({
  type: z.enum([
    "cf.email.sending.message.delivered",
    "cf.email.sending.message.deferred",
    "cf.email.sending.message.bounced",
    "cf.email.sending.message.rejected",
    "cf.email.sending.message.complained",
    "cf.email.sending.message.failed",
  ]),
  payload: z.looseObject({
    eventId: z.string().min(1),
    messageId: z.string().min(1),
    recipient: z.string().min(1),
    delivery: z.looseObject({ status: z.string().optional(), code: z.string().optional() }).optional(),
    bounce: z.looseObject({ type: z.enum(["hard", "soft"]).optional(), category: z.string().optional() }).optional(),
    rejection: z.looseObject({ reason: z.string().optional(), category: z.string().optional() }).optional(),
    complaint: z.looseObject({ type: z.string().optional() }).optional(),
    failure: z.looseObject({ reason: z.string().optional(), category: z.string().optional() }).optional(),
  }),
});
type EmailSendingEvent = z.infer<typeof emailSendingEvent>;

/** What one event reports, in the terms every feedback source shares. */
function feedbackOfEvent(event: EmailSendingEvent): Feedback & { target: { providerMessageId: string } } {
  const { payload } = event;
  const base = {
    target: { providerMessageId: payload.messageId },
    recipient: payload.recipient,
    source: "cloudflare" as const,
    sourceId: payload.eventId,
  };
  switch (event.type) {
    case "cf.email.sending.message.delivered":
      return { ...base, kind: "delivered", diagnostic: payload.delivery?.code ?? payload.delivery?.status };
    case "cf.email.sending.message.deferred":
      return { ...base, kind: "deferred", bounceType: "soft", diagnostic: payload.bounce?.category ?? payload.delivery?.code };
    case "cf.email.sending.message.bounced":
      // A soft bounce here is terminal: Cloudflare emits it once its retries of a temporary failure ran out.
      return { ...base, kind: "bounced", bounceType: payload.bounce?.type ?? "hard", final: true, diagnostic: payload.bounce?.category };
    case "cf.email.sending.message.rejected":
      // Refused before any delivery attempt (e.g. on Cloudflare's own suppression list): failed, not a mailbox verdict.
      return { ...base, kind: "bounced", bounceType: "blocked", final: true, diagnostic: payload.rejection?.reason ?? payload.rejection?.category };
    case "cf.email.sending.message.failed":
      return { ...base, kind: "bounced", bounceType: "soft", final: true, diagnostic: payload.failure?.reason ?? payload.failure?.category };
    case "cf.email.sending.message.complained":
      return { ...base, kind: "complained", feedbackType: payload.complaint?.type ?? "abuse" };
  }
}

/** Records a batch of events in one go; a failure retries the batch, which records nothing twice. */
export async function consumeEmailEvents(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const ctx = openCtx(env);
  const reports: (Feedback & { target: { providerMessageId: string } })[] = [];
  for (const message of batch.messages) {
    const parsed = emailSendingEvent.safeParse(message.body);
    if (parsed.success) reports.push(feedbackOfEvent(parsed.data));
    else logWarning("email events: unreadable event dropped", { body: message.body });
  }
  await recordProviderFeedback(ctx, reports);
  batch.ackAll();
}
