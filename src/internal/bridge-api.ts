import type { SharedDb } from "../db/client";
import { requestCtx } from "../middleware/request";
import { Hono, type Context } from "hono";
import { createMiddleware } from "hono/factory";
import {
  AuthRequest,
  BRIDGE_SIGNATURE_HEADER,
  BRIDGE_SIGNATURE_REFUSED,
  freshSignatureHeader,
  MessageRequest,
  relayEndpoints,
  SenderRequest,
  verifyBridgeSignature,
  type AuthResponse,
  type MessageResponse,
  type SenderResponse,
} from "@mailforge/bridge-contract";
import type { z } from "zod";
import { findVerifiedDomain, unverifiedDomainMessage } from "../domain/domains/domains";
import { acceptRelayMessage, relayFeatureRefusal } from "../domain/sending/accept-relayed";
import { domainOf } from "../domain/sending/mime";
import { authenticateSmtpCredential, findActiveCredential } from "../domain/smtp/credentials";
import { accountMoving, AppError, fieldErrors, validationError } from "../errors";
import { isPausedForMove } from "../domain/accounts/move";
import { acceptRefusalError, refusalError } from "../http/refusals";
import { base64ToBytes } from "../lib/crypto";
import type { AppEnv } from "../types";
import { sendLimits } from "../domain/sending/rules";
import { config } from "../config";

// The internal relay API: what the SMTP bridge (smtp-bridge/) calls for each SMTP phase. It is not part of the
// public API (plain hono routes, so it never appears in the OpenAPI document) and sits outside the API-key
// middleware; every request must instead carry the bridge's signature over its method, path and exact body.
// Paths, bodies and the signature are the contract the bridge imports too (packages/bridge-contract).

const refuseSignature = () => new AppError(BRIDGE_SIGNATURE_REFUSED, `Missing, invalid or expired ${BRIDGE_SIGNATURE_HEADER}`);
const relayDisabled = () => new AppError(BRIDGE_SIGNATURE_REFUSED, "The relay API is disabled: BRIDGE_SECRET is not set");

/**
 * Mounted before the body-size limit (which buffers a body sent without Content-Length): a request without a
 * well-formed, fresh signature header is refused before any of its (up to 40 MB) body is read.
 */
export const relayGate = createMiddleware<AppEnv>(async (c, next) => {
  if (!config(c.env).bridgeSecret) throw relayDisabled();
  if (!freshSignatureHeader(c.req.header(BRIDGE_SIGNATURE_HEADER))) throw refuseSignature();
  await next();
});

const verifyBridge = createMiddleware<AppEnv>(async (c, next) => {
  const secret = config(c.env).bridgeSecret;
  if (!secret) throw relayDisabled();
  // hono keeps the body it read, so the handler's own c.req.text() gets these same bytes
  const body = await c.req.text();
  // the path as it arrived (query excluded): the one the bridge signed, so a signature is good for this route only
  const request = { method: c.req.method, path: new URL(c.req.url).pathname, body };
  if (!(await verifyBridgeSignature(secret, c.req.header(BRIDGE_SIGNATURE_HEADER), request))) throw refuseSignature();
  await next();
});

async function signedBody<T extends z.ZodType>(c: Context<AppEnv>, schema: T): Promise<z.infer<T>> {
  let json: unknown;
  try {
    json = JSON.parse(await c.req.text());
  } catch {
    throw validationError({ body: ["The request body is not valid JSON"] });
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw validationError(fieldErrors(parsed.error));
  return parsed.data;
}

async function activeCredential(db: SharedDb, credentialId: string, options: { cached?: boolean } = {}) {
  const found = await findActiveCredential(db, credentialId, options);
  // the bridge answers this with 530: the session's credential was revoked after it logged in
  if (!found) throw new AppError("unauthorized", "The SMTP credential does not exist or was revoked");
  return found;
}

export const relayRoutes = new Hono<AppEnv>()
  .use("*", verifyBridge)
  .post(relayEndpoints.auth.path, async (c) => {
    const body = await signedBody(c, AuthRequest);
    const identity = await authenticateSmtpCredential(c.var.ctx.shared, body.username, body.password, (promise) => c.executionCtx.waitUntil(promise));
    if (!identity) throw new AppError("unauthorized", "Invalid SMTP username or password");
    const answer: z.input<typeof AuthResponse> = {
      credential_id: identity.credentialId,
      account_id: identity.accountId,
      mode: identity.mode,
      max_recipients: sendLimits.recipients,
    };
    return c.json(answer, relayEndpoints.auth.status);
  })
  .post(relayEndpoints.sender.path, async (c) => {
    const body = await signedBody(c, SenderRequest);
    const { credential, account } = await activeCredential(c.var.ctx.shared, body.credential_id);
    // While the operator moves the account's rows: 503, which the bridge answers 451 (the client keeps the message).
    if (isPausedForMove(account)) throw accountMoving();
    const disabled = relayFeatureRefusal(account);
    if (disabled) throw refusalError(disabled);
    const domainName = domainOf(body.mail_from);
    const domain = await findVerifiedDomain(c.var.ctx.shared, account.id, domainName);
    if (!domain) {
      throw new AppError("domain_not_verified", `The domain ${unverifiedDomainMessage(domainName)}`);
    }
    const answer: z.input<typeof SenderResponse> = { credential_id: credential.id, account_id: account.id, domain };
    return c.json(answer, relayEndpoints.sender.status);
  })
  .post(relayEndpoints.messages.path, async (c) => {
    const body = await signedBody(c, MessageRequest);
    // From the isolate's cache when seen in the last few seconds (credentialCacheTtlMs): the message's only
    // D1 reads are then acceptMessage's.
    const { credential, account } = await activeCredential(c.var.ctx.shared, body.credential_id, { cached: true });
    // A cached row read before a move's pause may not show it: the move waits the cache out before copying.
    if (isPausedForMove(account)) throw accountMoving();
    // An SMTP credential is held to the account's per-minute limit as an API key is (one message, one request), so
    // the relay is no way around it; the bridge turns the 429 into 451 4.7.0 with the Retry-After in the text.
    const decision = await c.env.RATE_LIMITER.getByName(`smtp:${credential.id}`).consume(account.rateLimitPerMinute, 60);
    if (!decision.allowed) {
      throw new AppError("rate_limited", `Rate limit of ${decision.limit} messages per minute reached; retry after ${decision.retryAfterSeconds} s`, {
        headers: { "Retry-After": String(decision.retryAfterSeconds) },
      });
    }
    // the credential's mode is read here, per message, so it holds however long the bridge keeps a session open
    const outcome = await acceptRelayMessage(
      requestCtx(c, account),
      { account, testMode: credential.mode === "test" },
      { credentialId: credential.id, mailFrom: body.mail_from, rcptTo: body.rcpt_to, raw: base64ToBytes(body.raw) },
    );
    if (outcome.kind !== "accepted") throw acceptRefusalError(outcome);
    const { body: accepted, replayed } = outcome;
    const answer: z.input<typeof MessageResponse> = {
      id: accepted.id,
      recipients: accepted.recipients,
      credits_charged: accepted.credits_charged,
      // SMTP has no scheduled sends: a relayed message is queued or suppressed.
      status: accepted.status === "suppressed" ? "suppressed" : "queued",
      test_mode: accepted.test_mode,
      replayed,
    };
    return c.json(answer, relayEndpoints.messages.status);
  });
