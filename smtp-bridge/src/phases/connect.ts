import type { SMTPServerOptions } from "smtp-server";
import { ENHANCED_CODE_PREFIX, replies, type SmtpReplyError } from "../replies.ts";
import { describeReply, isLoopback, type BridgeContext, type Connection } from "../session.ts";

// connect: the global and per-IP connection caps, and the session's bookkeeping until it closes.

/**
 * Two adjustments to what smtp-server says on one connection:
 *  - it adds a generic enhanced status code to every reply (452 becomes 4.2.2, 550 becomes 5.1.1); the bridge's
 *    own replies carry the precise code in their text, so for those the generic one is left out;
 *  - it lists AUTH in the EHLO reply before STARTTLS too. Like Postfix's smtpd_tls_auth_only, AUTH is only
 *    offered once the connection is encrypted (unless this client may authenticate in clear), so well-behaved
 *    clients never send a password in clear; one that tries anyway gets 538.
 */
function adjustReplies(connection: Connection, authAllowedInClear: boolean): void {
  const send = connection.send.bind(connection);
  connection.send = (code, data, context) => {
    if (code === 250 && Array.isArray(data) && !connection.secure && !authAllowedInClear) {
      return send(
        code,
        data.filter((line) => !/^AUTH\b/i.test(line)),
        context,
      );
    }
    return send(code, data, typeof data === "string" && ENHANCED_CODE_PREFIX.test(data) ? false : context);
  };
}

export function connectHandlers(context: BridgeContext): Required<Pick<SMTPServerOptions, "onConnect" | "onClose">> {
  const { config, logger, sessions } = context;
  return {
    onConnect(session, callback) {
      const ip = session.remoteAddress;
      let refusal: SmtpReplyError | undefined;
      if (context.shuttingDown) refusal = replies.shuttingDown();
      else if (sessions.size >= config.maxClients) refusal = replies.tooManyConnections();
      else if (sessions.countFrom(ip) >= config.maxConnectionsPerIp) refusal = replies.tooManyConnectionsFromIp();

      const connection = context.connectionOf(session);
      if (connection) adjustReplies(connection, config.allowInsecureAuthOnLoopback && isLoopback(ip));
      if (refusal) {
        logger.log("warn", "smtp.connection_refused", { remote_ip: ip, reply: describeReply(refusal) });
        return callback(refusal);
      }
      sessions.add(session.id, { connection, remoteAddress: ip, inData: false, transactionStartedAt: undefined });
      callback();
    },

    onClose(session) {
      sessions.remove(session.id);
    },
  };
}
