import type { SMTPServerOptions } from "smtp-server";
import { replies } from "../replies.ts";
import { isValidMailbox, relayUserOf } from "../session.ts";

// RCPT TO: the address's syntax and the pipeline's recipient cap, which the Worker states in its AUTH answer.

export function rcptToHandler(): NonNullable<SMTPServerOptions["onRcptTo"]> {
  return (address, session, callback) => {
    const user = relayUserOf(session);
    if (!user) return callback(replies.credentialRevoked()); // authOptional is off, so this is a safety net
    // a repeated address replaces its earlier entry (smtp-server), so it never counts twice against the cap
    const rcptTo = session.envelope.rcptTo;
    const key = address.address.toLowerCase();
    if (rcptTo.length >= user.maxRecipients && !rcptTo.some((rcpt) => rcpt.address.toLowerCase() === key)) {
      return callback(replies.tooManyRecipients(user.maxRecipients));
    }
    callback(isValidMailbox(address.address) ? undefined : replies.badRecipient());
  };
}
