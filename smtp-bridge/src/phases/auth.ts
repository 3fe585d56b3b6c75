import { createHash } from "node:crypto";
import type { SMTPServerOptions } from "smtp-server";
import { TtlCache } from "../cache.ts";
import type { LogFields } from "../log.ts";
import { replies } from "../replies.ts";
import { describeReply, isLoopback, type BridgeContext, type RelayUser } from "../session.ts";
import type { RelayIdentity } from "../worker-client.ts";

// AUTH: PLAIN/LOGIN after TLS, checked by the Worker, successes cached for at most AUTH_CACHE_TTL_MS.

export function authHandler(context: BridgeContext): NonNullable<SMTPServerOptions["onAuth"]> {
  const { config, logger, worker } = context;
  // Only successes are cached: a wrong password always costs a Worker round trip, and a revoked credential stops
  // working at the latest AUTH_CACHE_TTL_MS after revocation (the Worker also re-checks it on every message).
  const authCache = new TtlCache<RelayIdentity>(config.authCacheTtlMs, context.now);

  return (auth, session, callback) => {
    const username = auth.username ?? "";
    const password = auth.password ?? "";
    const logAuth = (outcome: string, fields: LogFields = {}) =>
      logger.log(outcome === "accepted" ? "info" : "warn", "smtp.auth", {
        session_id: session.id,
        remote_ip: session.remoteAddress,
        method: auth.method,
        username,
        outcome,
        ...fields,
      });

    // allowInsecureAuth is only switched on for ALLOW_INSECURE_AUTH_ON_LOOPBACK, and then only loopback
    // clients may skip TLS; without the flag smtp-server itself answers 538 before this handler runs.
    if (!session.secure && !(config.allowInsecureAuthOnLoopback && isLoopback(session.remoteAddress))) {
      const reply = replies.encryptionRequired();
      logAuth("rejected", { reply: describeReply(reply) });
      return callback(reply);
    }

    const cacheKey = createHash("sha256").update(`${username}\0${password}`).digest("hex");
    const cached = authCache.get(cacheKey);
    if (cached) {
      logAuth("accepted", { credential_id: cached.credentialId, cached: true });
      return callback(null, { user: { ...cached, username } satisfies RelayUser });
    }
    worker.authenticate(username, password).then(
      (result) => {
        if (result.ok) {
          authCache.set(cacheKey, result.value);
          logAuth("accepted", { credential_id: result.value.credentialId });
          return callback(null, { user: { ...result.value, username } satisfies RelayUser });
        }
        const reply = result.refusal.status === 401 ? replies.authFailed() : replies.authTemporarilyUnavailable();
        logAuth(result.refusal.status === 401 ? "rejected" : "deferred", { reply: describeReply(reply), worker_status: result.refusal.status });
        callback(reply);
      },
      (error: unknown) => {
        const reply = replies.authTemporarilyUnavailable();
        logAuth("deferred", { reply: describeReply(reply), error: (error as Error).message });
        callback(reply);
      },
    );
  };
}
