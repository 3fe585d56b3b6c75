// Mailed sign-in links and invitations (docs/dashboard.md, "Signing in"). A link's secret travels only in the mail:
// the row keeps its SHA-256, the code beside it an HMAC, the asking browser the hash of its cookie. Redeeming marks
// the row used in one conditional UPDATE, so a link or code signs in once however often it is presented.

import { and, eq, gt, isNull, lt } from "drizzle-orm";
import { config } from "../../config";
import { batch, statement, type SharedDb, type Ctx } from "../../db/client";
import { accounts, memberSessions, members, signInTokens } from "../../db/schema";
import { hmacSha256Hex, randomToken, sha256Hex, timingSafeEqualString } from "../../lib/crypto";
import { nowIso } from "../../lib/ids";
import type { Account } from "../accounts/accounts";
import { logError } from "../../lib/log";
import { sendPlatformMail, type PlatformMail } from "../sending/platform-mail";

type Member = typeof members.$inferSelect;

export const SIGN_IN_TTL_MS = 15 * 60 * 1000;
const INVITATION_TTL_MS = 7 * 24 * 60 * 60 * 1000;

export type SignedIn = { member: Member; account: Account };

const tokenId = (secret: string) => sha256Hex(`sign-in link:${secret}`);
export const browserHash = (cookie: string) => sha256Hex(`sign-in browser:${cookie}`);
const codeHash = (env: Env, id: string, code: string) => hmacSha256Hex(config(env).encryptionKey, `sign-in code:${id}:${code}`);

/** Six digits, uniformly drawn. */
function newCode(): string {
  for (;;) {
    const [value] = crypto.getRandomValues(new Uint32Array(1));
    // below the largest multiple of 10^6 that fits, so every code is equally likely
    if (value! < 4_294_000_000) return String(value! % 1_000_000).padStart(6, "0");
  }
}

const linkUrl = (env: Env, path: string, secret: string) => `${config(env).siteUrl}${path}?token=${encodeURIComponent(secret)}`;
const invitationPath = "/dashboard/invitation";
const signInLinkPath = "/dashboard/sign-in/link";

/** A new invitation for the member, replacing their earlier ones: the statements to write, and the link's secret. */
export async function invitationStatements(shared: SharedDb, memberId: string): Promise<{ secret: string; statements: D1PreparedStatement[] }> {
  const secret = randomToken(32);
  return {
    secret,
    statements: [
      statement(shared, shared.delete(signInTokens).where(and(eq(signInTokens.memberId, memberId), eq(signInTokens.kind, "invitation")))),
      statement(
        shared,
        shared.insert(signInTokens).values({
          id: await tokenId(secret),
          memberId,
          kind: "invitation",
          expiresAt: new Date(Date.now() + INVITATION_TTL_MS).toISOString(),
        }),
      ),
    ],
  };
}

export function invitationMail(env: Env, input: { to: string; accountName: string; role: string; invitedBy: string; secret: string }): PlatformMail {
  const expires = new Date(Date.now() + INVITATION_TTL_MS).toISOString().slice(0, 16).replace("T", " ");
  return {
    to: input.to,
    subject: `You are invited to ${input.accountName} on Mailforge`,
    text: [
      `${input.invitedBy} invited you to the Mailforge account "${input.accountName}" as ${input.role}.`,
      "",
      "Accept the invitation and sign in:",
      linkUrl(env, invitationPath, input.secret),
      "",
      `The link works once, until ${expires} UTC. After that, sign in at ${config(env).siteUrl}/dashboard/sign-in with this address.`,
      "If you did not expect this invitation, ignore this email.",
      "",
    ].join("\n"),
  };
}

/**
 * For each account `email` is a member of, a sign-in link and code bound to the browser whose cookie is `browser`
 * (replacing that member's earlier ones), and the mail that carries them; undefined for an address that is no member.
 */
async function requestSignIn(ctx: Ctx, email: string, browser: string): Promise<PlatformMail | undefined> {
  const { env, shared } = ctx;
  const memberships = await shared
    .select({ member: members, accountName: accounts.name })
    .from(members)
    .innerJoin(accounts, eq(accounts.id, members.accountId))
    .where(eq(members.email, email))
    .limit(20)
    .all();
  if (memberships.length === 0) return undefined;
  const expiresAt = new Date(Date.now() + SIGN_IN_TTL_MS).toISOString();
  const bound = await browserHash(browser);
  const links = await Promise.all(
    memberships.map(async ({ member, accountName }) => {
      const secret = randomToken(32);
      const code = newCode();
      const id = await tokenId(secret);
      return {
        member,
        accountName,
        secret,
        code,
        row: { id, memberId: member.id, kind: "sign_in" as const, codeHash: await codeHash(env, id, code), browserHash: bound, expiresAt },
      };
    }),
  );
  await batch(
    shared,
    links.flatMap(({ member, row }) => [
      statement(shared, shared.delete(signInTokens).where(and(eq(signInTokens.memberId, member.id), eq(signInTokens.kind, "sign_in")))),
      statement(shared, shared.insert(signInTokens).values(row)),
    ]),
  );
  const lines = links.flatMap(({ member, accountName, secret, code }) => [
    `${accountName} (${member.role})`,
    `  Link: ${linkUrl(env, signInLinkPath, secret)}`,
    `  Code: ${code}`,
    "",
  ]);
  return {
    to: email,
    subject: links.length === 1 ? `Your Mailforge sign-in code: ${links[0]!.code}` : "Your Mailforge sign-in links",
    text: [
      `Sign in to Mailforge as ${email}:`,
      "",
      ...lines,
      "Open the link, or type the code on the sign-in page, in the browser where you asked for it. Each works once, for 15 minutes.",
      "If you did not ask to sign in, ignore this email: nobody can sign in without it.",
      "",
    ].join("\n"),
  };
}

/** requestSignIn, then the mail, for after the answer: a failure is logged (the person asks again). */
export async function mailSignInLinks(ctx: Ctx, email: string, browser: string): Promise<void> {
  try {
    const mail = await requestSignIn(ctx, email, browser);
    if (mail) await sendPlatformMail(ctx, mail);
  } catch (error) {
    logError("sign-in links not made", { error: String(error) });
  }
}

const live = () => and(isNull(signInTokens.usedAt), gt(signInTokens.expiresAt, nowIso()));

/** Marks the token used (once only) and the member active and signed in now; undefined when the token was already used. */
async function consume(ctx: Ctx, id: string, memberId: string): Promise<SignedIn | undefined> {
  const { shared } = ctx;
  const now = nowIso();
  const used = await shared
    .update(signInTokens)
    .set({ usedAt: now })
    .where(and(eq(signInTokens.id, id), live()))
    .returning({ id: signInTokens.id })
    .get();
  if (!used) return undefined;
  const member = await shared
    .update(members)
    .set({ status: "active", lastSignedInAt: now, updatedAt: now })
    .where(eq(members.id, memberId))
    .returning()
    .get();
  if (!member) return undefined;
  const account = await shared.select().from(accounts).where(eq(accounts.id, member.accountId)).get();
  return account ? { member, account } : undefined;
}

/** The live token of `secret` and its member and account, without using it. */
export async function peekToken(ctx: Ctx, secret: string, kind: "sign_in" | "invitation") {
  const { shared } = ctx;
  if (!/^[A-Za-z0-9_-]{20,100}$/.test(secret)) return undefined;
  return shared
    .select({ token: signInTokens, member: members, accountName: accounts.name })
    .from(signInTokens)
    .innerJoin(members, eq(members.id, signInTokens.memberId))
    .innerJoin(accounts, eq(accounts.id, members.accountId))
    .where(and(eq(signInTokens.id, await tokenId(secret)), eq(signInTokens.kind, kind), live()))
    .get();
}

/**
 * Signs in with a mailed link: only in the browser that asked for it (`browser`, its cookie). Another browser gets
 * `other_browser` and the link stays usable where it belongs.
 */
export async function redeemSignInLink(ctx: Ctx, secret: string, browser: string | undefined): Promise<SignedIn | "other_browser" | "invalid"> {
  const found = await peekToken(ctx, secret, "sign_in");
  if (!found) return "invalid";
  if (!browser || !found.token.browserHash || !(await timingSafeEqualString(found.token.browserHash, await browserHash(browser))))
    return "other_browser";
  return (await consume(ctx, found.token.id, found.member.id)) ?? "invalid";
}

/** Signs in with the code of a mailed link, typed in the browser that asked for it. */
export async function redeemSignInCode(ctx: Ctx, email: string, code: string, browser: string): Promise<SignedIn | undefined> {
  const { env, shared } = ctx;
  if (!/^\d{6}$/.test(code)) return undefined;
  const rows = await shared
    .select({ id: signInTokens.id, codeHash: signInTokens.codeHash, memberId: signInTokens.memberId })
    .from(signInTokens)
    .innerJoin(members, eq(members.id, signInTokens.memberId))
    .where(and(eq(members.email, email), eq(signInTokens.kind, "sign_in"), eq(signInTokens.browserHash, await browserHash(browser)), live()))
    .all();
  for (const row of rows) {
    if (row.codeHash && (await timingSafeEqualString(row.codeHash, await codeHash(env, row.id, code)))) return consume(ctx, row.id, row.memberId);
  }
  return undefined;
}

/** Accepts an invitation: the member becomes active and is signed in. */
export async function acceptInvitation(ctx: Ctx, secret: string): Promise<SignedIn | undefined> {
  const found = await peekToken(ctx, secret, "invitation");
  return found ? consume(ctx, found.token.id, found.member.id) : undefined;
}

/** Links and member sessions past their expiry: they sign nobody in, and nothing else reads them. */
export async function purgeExpiredSignIns(ctx: Ctx): Promise<void> {
  const { shared } = ctx;
  const now = nowIso();
  await shared.batch([
    shared.delete(signInTokens).where(lt(signInTokens.expiresAt, now)),
    shared.delete(memberSessions).where(lt(memberSessions.expiresAt, now)),
  ]);
}
