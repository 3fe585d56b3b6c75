// Cloudflare Email Sending through the `send_email` binding (TRANSPORT = "cloudflare"). The signed message is handed
// over as raw MIME (`EmailMessage`), so attachments, Reply-To, tags/metadata headers, List-Unsubscribe and the SMTP
// relay's original bytes go out as they were built. The binding takes one recipient per raw message: a message with
// several recipients is handed over once per recipient, and each copy's id (what Cloudflare's delivery events name)
// is kept for its recipient. Cloudflare signs with its own DKIM key for onboarded domains and sets its own
// Return-Path, so bounces and complaints come back as events on the email-events queue, not as DSNs.

import { EmailMessage } from "cloudflare:email";
import type { Envelope, RecipientOutcome, SendOutcome, Transport } from "./types";

// Errors the binding throws for the message itself (its fields, its size, a sender or recipient it will never take):
// sending it again cannot help. Anything else (rate limits, internal errors, time-outs) is retried.
const permanentError = /E_(VALIDATION|FIELD|HEADER|SENDER|RECIPIENT|CONTENT|TOO_MANY|INVALID|ATTACHMENT)|not (verified|allowed)|invalid|too large/i;

export class CloudflareEmailTransport implements Transport {
  constructor(private readonly binding: SendEmail) {}

  async send(envelope: Envelope, raw: string | Uint8Array): Promise<SendOutcome> {
    const perRecipient: RecipientOutcome[] = [];
    for (const recipient of envelope.rcptTo) {
      try {
        const result = await this.binding.send(new EmailMessage(envelope.mailFrom, recipient, typeof raw === "string" ? raw : bytesStream(raw)));
        perRecipient.push({
          recipient,
          ok: true,
          code: 250,
          response: `250 2.0.0 accepted by Cloudflare Email Sending (${result.messageId})`,
          providerMessageId: result.messageId,
        });
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        const permanent = permanentError.test(message);
        perRecipient.push({
          recipient,
          ok: false,
          kind: permanent ? "permanent" : "temporary",
          stage: "message",
          code: permanent ? 554 : 451,
          response: `${permanent ? "554 5.6.0" : "451 4.3.0"} Cloudflare Email Sending refused the message: ${message}`,
        });
      }
    }
    const accepted = perRecipient.find((outcome) => outcome.ok);
    if (accepted) return { ok: true, code: 250, response: accepted.response, perRecipient };
    const first = perRecipient[0]!;
    const failure = first.ok ? undefined : first;
    return {
      ok: false,
      kind: perRecipient.every((outcome) => !outcome.ok && outcome.kind === "permanent") ? "permanent" : "temporary",
      stage: "message",
      connectionError: false,
      code: failure?.code ?? 451,
      response: failure?.response ?? "451 4.3.0 not sent",
      perRecipient,
    };
  }

  /** A binding has no connection to set up. */
  warm(): void {}

  async close(): Promise<void> {}
}

/** The bytes as they are (8-bit content stays 8-bit); a stream is read once, so each copy gets its own. */
function bytesStream(bytes: Uint8Array): ReadableStream {
  return new Response(bytes).body!;
}
