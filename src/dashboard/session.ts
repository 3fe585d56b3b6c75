// Dashboard sessions: a signed cookie that names who signed in (a member, or the API key a person signed in with,
// never the key itself), its expiry and a random session id that CSRF tokens are bound to. Every request loads the
// member or the key again, so removing a member, lowering their role, or revoking or rotating a key takes effect at
// once, and the session id must still be on the server (member_sessions, dashboard_sessions, kept by
// src/domain/members/sessions.ts): signing out deletes that row, so a copy of the cookie stops working with it.

import type { SharedDb } from "../db/client";
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { config } from "../config";
import { findActiveKey } from "../domain/accounts/api-keys";
import { scopesOfRole } from "../domain/accounts/roles";
import { deleteSession, keyOfSession, keySignInAllowed, memberOfSession, storeKeySession, storeMemberSession } from "../domain/members/sessions";
import { bytesToBase64Url, hmacSha256Hex, randomToken, sha256Hex, timingSafeEqualString } from "../lib/crypto";
import type { ApiKeyContext, AppEnv, AuthContext, MemberContext } from "../types";

export type DashboardEnv = { Bindings: Env; Variables: AppEnv["Variables"] & { csrfToken: string } };

export type SessionPayload =
  | {
      /** API key id. */
      k: string;
      /** The first 16 hex digits of the key's hash when signed in: a rotated key (new secret, same id) no longer matches. */
      h: string;
      /** Random session id; CSRF tokens are an HMAC of it. */
      s: string;
      /** Expiry, Unix seconds. */
      e: number;
    }
  | { /** Member id. */ m: string; s: string; e: number };

const encoder = new TextEncoder();

const isLoopback = (hostname: string) => hostname === "localhost" || hostname === "127.0.0.1" || hostname === "[::1]";

/** `Secure` everywhere but plain-HTTP local development; `__Host-` then pins the cookie to this origin and path /. */
function cookieNames(c: Context) {
  const secure = !isLoopback(new URL(c.req.url).hostname);
  return secure
    ? {
        secure,
        session: "__Host-mf_session",
        signIn: "__Host-mf_sign_in",
        browser: "__Host-mf_sign_in_browser",
        secondFactor: "__Host-mf_second_factor",
      }
    : { secure, session: "mf_session", signIn: "mf_sign_in", browser: "mf_sign_in_browser", secondFactor: "mf_second_factor" };
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
    const { k, h, m, s, e } = parsed as Record<string, unknown>;
    if (typeof s !== "string" || typeof e !== "number") return undefined;
    if (typeof m === "string") return { m, s, e };
    if (typeof k !== "string" || typeof h !== "string") return undefined;
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

/** What a member's session acts with where code takes a key: live mode, the scopes of the member's role. */
export const memberCredential = (member: MemberContext): ApiKeyContext => ({
  id: member.id,
  name: member.email,
  prefix: "",
  scopes: scopesOfRole(member.role),
  mode: "live",
});

/** The active member of a member session whose row is still on the server, with their account. */
async function memberAuth(db: SharedDb, memberId: string, id: string): Promise<AuthContext | undefined> {
  const row = await memberOfSession(db, memberId, id);
  if (!row) return undefined;
  const member = { id: row.member.id, email: row.member.email, role: row.member.role, totp: row.member.totpEnabledAt !== null };
  return { account: row.account, apiKey: memberCredential(member), member };
}

/** The key of a key session whose row is still on the server, unless the account has since stopped key sign-in. */
async function keyAuth(db: SharedDb, payload: { k: string; h: string }, id: string): Promise<AuthContext | undefined> {
  const [key, storedKeyId] = await Promise.all([findActiveKey(db, payload.k), keyOfSession(db, id)]);
  if (!key || key.keyHash.slice(0, 16) !== payload.h || storedKeyId !== payload.k) return undefined;
  if (!(await keySignInAllowed(db, key.account))) return undefined;
  return { account: key.account, apiKey: key.apiKey };
}

/**
 * Who is signed in behind the request's cookie, or undefined for no cookie, a bad signature, expiry, a removed member,
 * a revoked key, a session that was signed out, or a key of an account that no longer lets keys sign in.
 */
export async function readSession(c: Context<DashboardEnv>): Promise<Session | undefined> {
  const payload = await signedPayload(c);
  if (!payload) return undefined;
  const id = await storedId(payload.s);
  const auth = "m" in payload ? await memberAuth(c.var.ctx.shared, payload.m, id) : await keyAuth(c.var.ctx.shared, payload, id);
  if (!auth) return undefined;
  return { auth, csrfToken: await sign(c.env, "csrf", payload.s), expiresAt: payload.e };
}

/** The cookie's value: the payload, base64url JSON, and its HMAC. */
export async function sessionCookieValue(env: Env, payload: SessionPayload): Promise<string> {
  const encoded = bytesToBase64Url(encoder.encode(JSON.stringify(payload)));
  return `${encoded}.${await sign(env, "session", encoded)}`;
}

/** Signs the person in as `keyId` (already authenticated with its secret). */
export async function startSession(c: Context<DashboardEnv>, keyId: string, keyHash: string): Promise<void> {
  const ttl = config(c.env).session.ttlSeconds;
  const payload = { k: keyId, h: keyHash.slice(0, 16), s: randomToken(16), e: Math.floor(Date.now() / 1000) + ttl };
  await storeKeySession(c.var.ctx.shared, await storedId(payload.s), keyId, new Date(payload.e * 1000).toISOString());
  await setSessionCookie(c, payload, ttl);
}

/** Signs the person in as member `memberId` (their mailed link or code was just used). */
export async function startMemberSession(c: Context<DashboardEnv>, memberId: string): Promise<void> {
  const ttl = config(c.env).session.ttlSeconds;
  const payload = { m: memberId, s: randomToken(16), e: Math.floor(Date.now() / 1000) + ttl };
  await storeMemberSession(c.var.ctx.shared, await storedId(payload.s), memberId, new Date(payload.e * 1000).toISOString());
  await setSessionCookie(c, payload, ttl);
  const names = cookieNames(c);
  deleteCookie(c, names.browser, { path: "/", secure: names.secure });
  deleteCookie(c, names.secondFactor, { path: "/", secure: names.secure });
}

const SECOND_FACTOR_SECONDS = 300;

/**
 * Between a used link (or code) and the second factor: which member passed the first, for 5 minutes, in a signed
 * cookie. The link is spent by then, so this cookie is the only way on, and only in this browser.
 */
export async function startSecondFactor(c: Context<DashboardEnv>, memberId: string): Promise<void> {
  const value = `${memberId}.${Math.floor(Date.now() / 1000) + SECOND_FACTOR_SECONDS}`;
  const names = cookieNames(c);
  setCookie(c, names.secondFactor, `${value}.${await sign(c.env, "second factor", value)}`, {
    path: "/",
    httpOnly: true,
    secure: names.secure,
    sameSite: "Strict",
    maxAge: SECOND_FACTOR_SECONDS,
  });
}

/** The member waiting for their second factor in this browser, while the cookie is signed and fresh. */
export async function pendingSecondFactor(c: Context<DashboardEnv>): Promise<string | undefined> {
  const [memberId, expiry, signature] = (getCookie(c, cookieNames(c).secondFactor) ?? "").split(".");
  if (!memberId || !expiry || !signature || Number(expiry) * 1000 <= Date.now()) return undefined;
  return (await timingSafeEqualString(signature, await sign(c.env, "second factor", `${memberId}.${expiry}`))) ? memberId : undefined;
}

async function setSessionCookie(c: Context<DashboardEnv>, payload: SessionPayload, ttl: number): Promise<void> {
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
  if (payload) await deleteSession(c.var.ctx.shared, await storedId(payload.s), "m" in payload ? "member" : "api_key");
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

/**
 * The random value that binds mailed sign-in links to this browser (docs/dashboard.md): set when the person asks for a
 * link, for as long as the link lives, and sent along when they open it (SameSite=Lax: a link opened from a mail is a
 * top-level navigation). A new request in the same browser keeps the value, so every link it asked for works there.
 */
export function signInBrowser(c: Context<DashboardEnv>, ttlSeconds: number): string {
  const names = cookieNames(c);
  const existing = getCookie(c, names.browser);
  const value = existing && /^[A-Za-z0-9_-]{20,64}$/.test(existing) ? existing : randomToken(24);
  setCookie(c, names.browser, value, { path: "/", httpOnly: true, secure: names.secure, sameSite: "Lax", maxAge: ttlSeconds });
  return value;
}

/** The browser's sign-in binding, when it asked for a link. */
export function presentedSignInBrowser(c: Context<DashboardEnv>): string | undefined {
  return getCookie(c, cookieNames(c).browser);
}
