import { env } from "cloudflare:workers";
import worker from "../../src/index";
import { call, createAccount, json } from "../helpers";
import { eventually, messageOf, sinkMessagesTo, verifiedDomain } from "../send/helpers";
import fixtures from "../fixtures/feedback";

export const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.org`;

export async function sender(overrides: Record<string, unknown> = {}) {
  const account = await createAccount({ send_credits: 100, ...overrides });
  const domain = await verifiedDomain(account.api_key);
  return { account, domain, key: account.api_key, from: `Acme <hello@${domain.name}>` };
}

/** Sends one message through the real pipeline and waits for the sink to have it; its id and envelope sender. */
export async function sentMessage(key: string, from: string, to: string): Promise<{ id: string; returnPath: string; messageIdHeader: string }> {
  const accepted = await json<{ id: string }>(
    await call("/api/v1/send", { key, body: { from, to: [to], subject: "Your receipt", text: "Thanks." } }),
  );
  const [delivered] = await eventually(async () => ((await sinkMessagesTo(to)).length > 0 ? sinkMessagesTo(to) : undefined));
  await eventually(async () => ((await messageOf(key, accepted.id)).status === "sent" ? true : undefined));
  return { id: accepted.id, returnPath: delivered!.mail_from, messageIdHeader: delivered!.message_id ?? "<unknown@example>" };
}

/** A fixture report (test/fixtures/feedback) filled in for one sent message. */
export function report(
  name: keyof typeof fixtures,
  values: { returnPath: string; recipient: string; messageId: string; fblAddress?: string },
): string {
  return fixtures[name]
    .replaceAll("{{RETURN_PATH}}", values.returnPath)
    .replaceAll("{{RECIPIENT}}", values.recipient)
    .replaceAll("{{MESSAGE_ID}}", values.messageId)
    .replaceAll("{{FBL_ADDRESS}}", values.fblAddress ?? "fbl@bounces.mailforge.test")
    .replace(/\r?\n/g, "\r\n");
}

/**
 * Hands a mail to the Worker's email() handler as Cloudflare Email Routing does: the envelope, the raw bytes as a
 * stream, and setReject. Returns the rejection reason, if the handler rejected it.
 */
export async function deliverToEmailHandler(to: string, raw: string, from = "MAILER-DAEMON@mx.example.net"): Promise<string | undefined> {
  const bytes = new TextEncoder().encode(raw);
  let rejected: string | undefined;
  const message = {
    from,
    to,
    raw: new Response(bytes).body!,
    rawSize: bytes.byteLength,
    headers: new Headers(),
    setReject: (reason: string) => {
      rejected = reason;
    },
    forward: () => Promise.reject(new Error("not used")),
    reply: () => Promise.reject(new Error("not used")),
  } as unknown as ForwardableEmailMessage;
  await worker.email(message, env);
  return rejected;
}
