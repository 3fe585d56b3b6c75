// Mail the platform sends for itself (sign-in links, invitations): plain text from SYSTEM_FROM, straight to the
// configured transport. It is no customer's message: no message row, no credits, no webhooks. When SYSTEM_FROM's
// domain is verified in some account, that domain's DKIM key signs it, as it would that account's own mail.

import type { Ctx } from "../../db/client";
import { and, eq } from "drizzle-orm";
import { config } from "../../config";
import { domains } from "../../db/schema";
import { logError } from "../../lib/log";
import { randomBase62 } from "../../lib/ids";
import type { Transport } from "../transport/types";
import { buildMessageId, buildMimeMessage, domainOf, splitMailbox } from "./mime";
import { loadSigningKeys, signMessage } from "./signed-message";

export type PlatformMail = { to: string; subject: string; text: string };

const encoder = new TextEncoder();

/** The signed (where it can be) bytes of a platform mail, and its envelope sender. */
async function buildPlatformMail(ctx: Ctx, mail: PlatformMail): Promise<{ from: string; raw: Uint8Array }> {
  const { env, shared } = ctx;
  const from = splitMailbox(config(env).systemFrom);
  if (!from) throw new Error(`SYSTEM_FROM is not an address: ${config(env).systemFrom}`);
  const unsigned = encoder.encode(
    buildMimeMessage({
      from,
      to: [mail.to],
      subject: mail.subject,
      text: mail.text,
      // Platform mail is never a newsletter: no one-click unsubscribe, and auto-responders should stay quiet.
      headers: { "Auto-Submitted": "auto-generated" },
      messageId: buildMessageId(`sys_${randomBase62(22)}`, from.address),
      date: new Date(),
    }),
  );
  const domain = await shared
    .select()
    .from(domains)
    .where(and(eq(domains.name, domainOf(from.address)), eq(domains.status, "verified")))
    .limit(1)
    .get();
  const raw = domain ? await signMessage(unsigned, domain, await loadSigningKeys(env, domain)) : unsigned;
  return { from: from.address, raw };
}

/**
 * Sends one platform mail through the transport customers' mail leaves by. Never throws: a failure is logged (the
 * person asks again: a new link, or the invitation sent again from the Members page). True when the provider took it.
 */
export async function sendPlatformMail(ctx: Ctx, mail: PlatformMail): Promise<boolean> {
  const { env } = ctx;
  let transport: Transport | undefined;
  try {
    // Imported when a mail goes out: the transports need cloudflare: modules, and the routes that lead here are also
    // loaded in Node (the OpenAPI document, the SDK's generator).
    const { transportFromConfig } = await import("./deliver");
    transport = transportFromConfig(env);
    const { from, raw } = await buildPlatformMail(ctx, mail);
    const outcome = await transport.send({ mailFrom: from, rcptTo: [mail.to] }, raw);
    if (!outcome.ok) logError("platform mail refused", { subject: mail.subject, response: outcome.response });
    return outcome.ok;
  } catch (error) {
    logError("platform mail not sent", { subject: mail.subject, error: String(error) });
    return false;
  } finally {
    await transport?.close();
  }
}
