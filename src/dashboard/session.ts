// Dashboard sessions: a signed cookie that names the API key a person signed in with (never the key itself), its
// expiry and a random session id that CSRF tokens are bound to. Every request loads the key again, so revoking or
// rotating it ends its sessions at once, and the session id must still be in dashboard_sessions: signing out deletes
// that row, so a copy of the cookie stops working with it.

import type { Context } from "hono";
import { and, eq, gt, lte } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { config } from "../config";
import { dashboardSessions } from "../db/schema";
import { findActiveKey } from "../domain/accounts/api-keys";
import { bytesToBase64Url, hmacSha256Hex, randomToken, sha256Hex, timingSafeEqualString } from "../lib/crypto";
import type { AppEnv, AuthContext } from "../types";

export type DashboardEnv = { Bindings: Env; Variables: AppEnv["Variables"] & { csrfToken: string } };

export type SessionPayload = {
  /** API key id. */
  k: string;
  /** The first 16 hex digits of the key's hash when signed in: a rotated key (new secret, same id) no longer matches. */
  h: string;
  /** Random session id; CSRF tokens are an HMAC of it. */
  s: string;
  /** Expiry, Unix seconds. */
  e: number;
};

const encoder = new TextEncoder();

const isLoopback = (hostname: string) => hostname === "localhost" || hostname === "127.0.0.1" || hostname === "[::1]";

/** `Secure` everywhere but plain-HTTP local development; `__Host-` then pins the cookie to this origin and path /. */
function cookieNames(c: Context) {
  const secure = !isLoopback(new URL(c.req.url).hostname);
  return secure ? { secure, session: "__Host-mf_session", signIn: "__Host-mf_sign_in" } : { secure, session: "mf_session", signIn: "mf_sign_in" };
}

const secrets = new WeakMap<object, Promise<string>>();

/** SESSION_SECRET, or a key derived from DKIM_ENCRYPTION_KEY so a deployment never runs with a guessable default. */
function sessionSecret(env: Env): Promise<string> {
  let secret = secrets.get(env);
  if (!secret) {
    const { session, encryptionKey } = config(env);
    secret = session.secret ? Promise.resolve(session.secret) : hmacSha256Hex(encryptionKey, "mailforge dashboard sessions");
    secrets.set(env, secret);
  }
  return secret;
}

const sign = async (env: Env, purpose: string, value: string) => hmacSha256Hex(await sessionSecret(env), `${purpose}:${value}`);

function decodePayload(encoded: string): SessionPayload | undefined {
  try {
    const padded = encoded.replace(/-/g, "+").replace(/_/g, "/");
    const parsed: unknown = JSON.parse(atob(padded));
    if (typeof parsed !== "object" || parsed === null) return undefined;
    const { k, h, s, e } = parsed as Record<string, unknown>;
    if (typeof k !== "string" || typeof h !== "string" || typeof s !== "string" || typeof e !== "number") return undefined;
    return { k, h, s, e };
  } catch {
    return undefined;
  }
}

export type Session = { auth: AuthContext; csrfToken: string; expiresAt: number };

/** The cookie's payload when its signature holds and it has not expired (whether the server still knows it is not checked). */
async function signedPayload(c: Context<DashboardEnv>): Promise<SessionPayload | undefined> {
  const cookie = getCookie(c, cookieNames(c).session);
  if (!cookie) return undefined;
  const [encoded, signature] = cookie.split(".");
  if (!encoded || !signature) return undefined;
  if (!(await timingSafeEqualString(signature, await sign(c.env, "session", encoded)))) return undefined;
  const payload = decodePayload(encoded);
  if (!payload || payload.e * 1000 <= Date.now()) return undefined;
  return payload;
}

/** The stored row's id: a hash, so the table alone does not give anyone a cookie's session id. */
const storedId = (sessionId: string) => sha256Hex(`dashboard session:${sessionId}`);

/**
 * The signed-in key behind the request's cookie, or undefined for no cookie, a bad signature, expiry, a revoked key
 * or a session that was signed out.
 */
export async function readSession(c: Context<DashboardEnv>): Promise<Session | undefined> {
  const payload = await signedPayload(c);
  if (!payload) return undefined;
  const id = await storedId(payload.s);
  const [key, stored] = await Promise.all([
    findActiveKey(c.env.DB, payload.k),
    drizzle(c.env.DB)
      .select({ apiKeyId: dashboardSessions.apiKeyId })
      .from(dashboardSessions)
      .where(and(eq(dashboardSessions.id, id), gt(dashboardSessions.expiresAt, new Date().toISOString())))
      .get(),
  ]);
  if (!key || key.keyHash.slice(0, 16) !== payload.h || stored?.apiKeyId !== payload.k) return undefined;
  return { auth: { account: key.account, apiKey: key.apiKey }, csrfToken: await sign(c.env, "csrf", payload.s), expiresAt: payload.e };
}

/** The cookie's value: the payload, base64url JSON, and its HMAC. */
export async function sessionCookieValue(env: Env, payload: SessionPayload): Promise<string> {
  const encoded = bytesToBase64Url(encoder.encode(JSON.stringify(payload)));
  return `${encoded}.${await sign(env, "session", encoded)}`;
}

/** Signs the person in as `keyId` (already authenticated with its secret). */
export async function startSession(c: Context<DashboardEnv>, keyId: string, keyHash: string): Promise<void> {
  const ttl = config(c.env).session.ttlSeconds;
  const payload: SessionPayload = { k: keyId, h: keyHash.slice(0, 16), s: randomToken(16), e: Math.floor(Date.now() / 1000) + ttl };
  const now = new Date().toISOString();
  const db = drizzle(c.env.DB);
  // This key's expired sessions go as a new one starts, so the table holds no more than the live ones and a few.
  await db.batch([
    db.delete(dashboardSessions).where(and(eq(dashboardSessions.apiKeyId, keyId), lte(dashboardSessions.expiresAt, now))),
    db.insert(dashboardSessions).values({ id: await storedId(payload.s), apiKeyId: keyId, expiresAt: new Date(payload.e * 1000).toISOString() }),
  ]);
  const names = cookieNames(c);
  setCookie(c, names.session, await sessionCookieValue(c.env, payload), {
    path: "/",
    httpOnly: true,
    secure: names.secure,
    sameSite: "Lax",
    maxAge: ttl,
  });
  deleteCookie(c, names.signIn, { path: "/", secure: names.secure });
}

/** Signs out: the session's row goes, so this cookie (and any copy of it) no longer signs anyone in. */
export async function endSession(c: Context<DashboardEnv>): Promise<void> {
  const payload = await signedPayload(c);
  if (payload)
    await drizzle(c.env.DB)
      .delete(dashboardSessions)
      .where(eq(dashboardSessions.id, await storedId(payload.s)));
  const names = cookieNames(c);
  deleteCookie(c, names.session, { path: "/", secure: names.secure });
}

/** The token of a signed-in form: the header htmx sends, or the `_csrf` field of a form post. */
export async function csrfTokenOf(c: Context<DashboardEnv>): Promise<string | undefined> {
  const header = c.req.header("X-CSRF-Token");
  if (header) return header;
  const type = c.req.header("Content-Type") ?? "";
  if (!type.startsWith("application/x-www-form-urlencoded") && !type.startsWith("multipart/form-data")) return undefined;
  const field = (await c.req.parseBody())._csrf;
  return typeof field === "string" ? field : undefined;
}

export const csrfMatches = (presented: string | undefined, expected: string) =>
  presented ? timingSafeEqualString(presented, expected) : Promise.resolve(false);

/**
 * The sign-in form has no session to bind a token to, so it uses a double-submit token: a random cookie and the same
 * value in the form. A cross-site page can post the form but can neither read nor set the cookie.
 */
export function issueSignInToken(c: Context<DashboardEnv>): string {
  const names = cookieNames(c);
  const existing = getCookie(c, names.signIn);
  if (existing && /^[A-Za-z0-9_-]{20,64}$/.test(existing)) return existing;
  const token = randomToken(24);
  setCookie(c, names.signIn, token, { path: "/", httpOnly: true, secure: names.secure, sameSite: "Lax", maxAge: 3600 });
  return token;
}

export async function signInTokenMatches(c: Context<DashboardEnv>, presented: string | undefined): Promise<boolean> {
  const cookie = getCookie(c, cookieNames(c).signIn);
  return Boolean(cookie && presented && (await timingSafeEqualString(cookie, presented)));
}
