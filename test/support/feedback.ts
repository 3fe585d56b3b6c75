import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { signBridgeRequest } from "@mailforge/bridge-contract";
import worker from "../../src/index";
import { bytesToBase64 } from "../../src/lib/crypto";
import { call, createAccount, json } from "./helpers";
import { eventually, messageOf, sinkMessagesTo, verifiedDomain, type SinkMessage } from "./sending";
import fixtures from "../fixtures/feedback";

export const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.org`;

export async function sender(overrides: Record<string, unknown> = {}) {
  const account = await createAccount({ send_credits: 100, ...overrides });
  const domain = await verifiedDomain(account.api_key);
  return { account, domain, key: account.api_key, from: `Acme <hello@${domain.name}>` };
}

/** Sends one message through the real pipeline and waits for the sink to have it; its id and envelope sender. */
export async function sentMessage(
  key: string,
  from: string,
  to: string,
  extra: Record<string, unknown> = {},
): Promise<{ id: string; returnPath: string; messageIdHeader: string }> {
  const accepted = await json<{ id: string }>(
    await call("/api/v1/send", { key, body: { from, to: [to], subject: "Your receipt", text: "Thanks.", ...extra } }),
  );
  const [delivered] = await eventually(async () => ((await sinkMessagesTo(to)).length > 0 ? sinkMessagesTo(to) : undefined));
  await eventually(async () => ((await messageOf(key, accepted.id)).status === "sent" ? true : undefined));
  return { id: accepted.id, returnPath: delivered!.mail_from, messageIdHeader: delivered!.message_id ?? "<unknown@example>" };
}

/**
 * Submits `raw` through the SMTP relay as the bridge does (a new SMTP credential of the account, a signed request) and
 * waits for the sink to have it; its id and the Message-ID it left with.
 */
export async function relayedMessage(key: string, mailFrom: string, to: string, raw: string): Promise<{ id: string; messageIdHeader: string }> {
  const created = await call("/api/v1/smtp-credentials", { key, body: { name: "relay" } });
  expect(created.status).toBe(201);
  const credential = await json<{ id: string }>(created);
  const body = JSON.stringify({
    credential_id: credential.id,
    mail_from: mailFrom,
    rcpt_to: [to],
    raw: bytesToBase64(new TextEncoder().encode(raw)),
  });
  const signature = await signBridgeRequest("test-bridge-secret", { method: "POST", path: "/internal/relay/messages", body });
  const response = await call("/internal/relay/messages", { body, headers: { "X-Bridge-Signature": signature } });
  expect(response.status).toBe(202);
  const { id } = await json<{ id: string }>(response);
  // The address may have mail from other messages: this one's is the copy whose VERP envelope sender names it.
  const delivered = await eventually(async () => (await sinkMessagesTo(to)).find((message) => message.mail_from.includes(id)));
  await eventually(async () => ((await messageOf(key, id)).status === "sent" ? true : undefined));
  return { id, messageIdHeader: delivered.message_id ?? "<unknown@example>" };
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
  await worker.email(message, env, createExecutionContext());
  return rejected;
}

/**
 * Sends one message to several recipients through the real pipeline and waits until each copy is in the sink and the
 * message is `sent`; its id, and each recipient's copy as the sink received it (envelope, connection, Message-ID).
 */
export async function sentToMany(key: string, from: string, to: string[]): Promise<{ id: string; copies: Map<string, SinkMessage> }> {
  const accepted = await json<{ id: string }>(await call("/api/v1/send", { key, body: { from, to, subject: "Your receipt", text: "Thanks." } }));
  const copies = new Map<string, SinkMessage>();
  for (const address of to) {
    const [copy] = await eventually(async () => ((await sinkMessagesTo(address)).length > 0 ? sinkMessagesTo(address) : undefined));
    copies.set(address, copy!);
  }
  await eventually(async () => ((await messageOf(key, accepted.id)).status === "sent" ? true : undefined));
  return { id: accepted.id, copies };
}

/**
 * A DSN as an MTA writes it (Postfix's layout), with one recipient block per entry: what a recipient who wants to
 * bounce others would forge. `reportId` is its Message-Id.
 */
export function deliveryStatusReport(values: {
  returnPath: string;
  messageId: string;
  reportId: string;
  blocks: { recipient: string; action: "failed" | "delayed" | "delivered"; status: string }[];
}): string {
  const boundary = "dsn-boundary-1764065702";
  const blocks = values.blocks.map(({ recipient, action, status }) =>
    [
      `Final-Recipient: rfc822; ${recipient}`,
      `Original-Recipient: rfc822;${recipient}`,
      `Action: ${action}`,
      `Status: ${status}`,
      "Remote-MTA: dns; mail.example.org",
      `Diagnostic-Code: smtp; ${{ 5: 550, 4: 452, 2: 250 }[status[0] as "5" | "4" | "2"]} ${status} <${recipient}>`,
    ].join("\r\n"),
  );
  return [
    "Return-Path: <>",
    "From: MAILER-DAEMON@mx1.example.net (Mail Delivery System)",
    "Subject: Undelivered Mail Returned to Sender",
    `To: ${values.returnPath}`,
    "Auto-Submitted: auto-replied",
    "MIME-Version: 1.0",
    `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`,
    `Message-Id: ${values.reportId}`,
    "",
    `--${boundary}`,
    "Content-Type: text/plain; charset=utf-8",
    "",
    "Your message could not be delivered to one or more recipients.",
    "",
    `--${boundary}`,
    "Content-Type: message/delivery-status",
    "",
    "Reporting-MTA: dns; mx1.example.net",
    "",
    blocks.join("\r\n\r\n"),
    "",
    `--${boundary}`,
    "Content-Type: text/rfc822-headers",
    "",
    `Return-Path: <${values.returnPath}>`,
    "From: Acme <hello@acme.example.com>",
    `To: ${values.blocks.map((block) => block.recipient).join(", ")}`,
    "Subject: Your receipt",
    `Message-ID: ${values.messageId}`,
    "",
    `--${boundary}--`,
    "",
  ].join("\r\n");
}
