import type { WorkerRefusal } from "./worker-client.ts";

// SMTP replies the bridge chooses itself. The text starts with the RFC 3463 enhanced status code; the server
// sends such a text as is instead of adding smtp-server's generic code (see `keepOwnEnhancedCodes`).

export const ENHANCED_CODE_PREFIX = /^[245]\.\d{1,3}\.\d{1,3} /;

export type SmtpReplyError = Error & { responseCode: number };

export function smtpReply(code: number, enhanced: string, text: string): SmtpReplyError {
  // CR/LF would end the reply line early; the Worker's messages are ours, but they may quote client input.
  return Object.assign(new Error(`${enhanced} ${text.replace(/[\r\n]+/g, " ")}`), { responseCode: code });
}

export const replies = {
  authFailed: () => smtpReply(535, "5.7.8", "Authentication credentials invalid"),
  authTemporarilyUnavailable: () => smtpReply(454, "4.7.0", "Temporary authentication failure, try again later"),
  encryptionRequired: () => smtpReply(538, "5.7.11", "Encryption required: issue STARTTLS before AUTH"),
  credentialRevoked: () => smtpReply(530, "5.7.0", "Authentication required: this SMTP credential is no longer valid"),
  nullSender: () => smtpReply(553, "5.1.7", "The null sender <> cannot submit mail; use an address on a verified domain"),
  badSender: () => smtpReply(553, "5.1.7", "Invalid sender address"),
  badRecipient: () => smtpReply(553, "5.1.3", "Invalid recipient address"),
  tooManyRecipients: (limit: number) => smtpReply(452, "4.5.3", `Too many recipients: at most ${limit} per message`),
  tooBig: (limit: number) => smtpReply(552, "5.3.4", `Message too big: the limit is ${limit} bytes`),
  unparseable: (why: string) => smtpReply(554, "5.6.0", `Message could not be parsed: ${why}`),
  noRoom: () => smtpReply(451, "4.3.1", "Insufficient system storage, try again later"),
  workerUnavailable: () => smtpReply(451, "4.3.0", "Temporary failure, the message was not accepted; try again later"),
  shuttingDown: () => smtpReply(421, "4.3.2", "Service shutting down, try again later"),
  tooManyConnections: () => smtpReply(421, "4.7.0", "Too many connections, try again later"),
  tooManyConnectionsFromIp: () => smtpReply(421, "4.7.0", "Too many connections from your address, try again later"),
};

const addressFields = /(^|\.)(to|rcpt_to|from|mail_from|reply_to|cc|bcc)(\.|$)/;

/** What the client hears when the Worker refused a sender check or a message. */
export function replyForRefusal(refusal: WorkerRefusal): SmtpReplyError {
  const detail = refusal.message;
  switch (refusal.status) {
    case 401:
      return replies.credentialRevoked();
    case 402:
      return smtpReply(452, "4.3.1", `Insufficient credits: ${detail}`);
    case 403:
      return smtpReply(550, "5.7.1", detail);
    case 413:
      return smtpReply(552, "5.3.4", detail);
    case 422: {
      const fields = Object.keys(refusal.errors ?? {});
      const first = fields[0] ? `${fields[0]}: ${refusal.errors?.[fields[0]]?.[0] ?? "invalid"}` : undefined;
      const text = first ? `${detail} (${first})` : detail;
      return fields.some((field) => addressFields.test(field)) ? smtpReply(550, "5.1.3", text) : smtpReply(550, "5.6.0", text);
    }
    case 429: {
      const hint = refusal.retryAfterSeconds === undefined ? "" : ` (retry after ${refusal.retryAfterSeconds} s)`;
      return smtpReply(451, "4.7.0", `${detail}${hint}`);
    }
    default:
      // A refusal the bridge does not know (404, 409, …) means the two sides disagree about the protocol; a
      // temporary failure keeps the message with the client until that is fixed.
      return smtpReply(451, "4.3.0", `Temporary failure (${refusal.status} ${refusal.code}); try again later`);
  }
}
