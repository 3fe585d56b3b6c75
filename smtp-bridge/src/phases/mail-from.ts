import type { SMTPServerOptions } from "smtp-server";
import { TtlCache } from "../cache.ts";
import type { LogFields } from "../log.ts";
import { replies, replyForRefusal, type SmtpReplyError } from "../replies.ts";
import { describeReply, isValidMailbox, logTransaction, relayUserOf, type BridgeContext } from "../session.ts";

// MAIL FROM: the Worker confirms the account may send from that domain, so a bad sender fails before DATA.
// Confirmations are cached per credential and domain for AUTH_CACHE_TTL_MS.

export function mailFromHandler(context: BridgeContext): NonNullable<SMTPServerOptions["onMailFrom"]> {
  const { config, worker, sessions } = context;
  const senderCache = new TtlCache<true>(config.authCacheTtlMs, context.now);

  return (address, session, callback) => {
    const state = sessions.get(session.id);
    if (state) state.transactionStartedAt = context.now();
    const user = relayUserOf(session);
    const reject = (reply: SmtpReplyError, fields: LogFields = {}) => {
      logTransaction(context, session, state, {
        outcome: reply.responseCode >= 500 ? "rejected" : "deferred",
        phase: "mail_from",
        reply: describeReply(reply),
        mail_from: address.address,
        ...fields,
      });
      callback(reply);
    };
    if (context.shuttingDown) return reject(replies.shuttingDown());
    if (!user) return reject(replies.credentialRevoked()); // authOptional is off, so this is a safety net
    if (address.address === "") return reject(replies.nullSender());
    if (!isValidMailbox(address.address)) return reject(replies.badSender());

    const domain = address.address.slice(address.address.lastIndexOf("@") + 1).toLowerCase();
    const cacheKey = `${user.credentialId}\0${domain}`;
    if (senderCache.get(cacheKey)) return callback();
    worker.checkSender(user.credentialId, address.address).then(
      (result) => {
        if (!result.ok) return reject(replyForRefusal(result.refusal), { worker_status: result.refusal.status, error_code: result.refusal.code });
        senderCache.set(cacheKey, true);
        callback();
      },
      (error: unknown) => reject(replies.workerUnavailable(), { error: (error as Error).message }),
    );
  };
}
