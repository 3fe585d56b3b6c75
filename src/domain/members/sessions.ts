// The rows behind dashboard sessions (docs/dashboard.md): a member's in member_sessions, an API key's in
// dashboard_sessions, each under the hash of the cookie's session id (src/dashboard/session.ts makes the cookie and
// the hash). A session signs someone in only while its row is here and unexpired; signing out deletes the row.

import type { SharedDb } from "../../db/client";
import { and, eq, gt, lte } from "drizzle-orm";
import { dashboardSessions, memberSessions, members } from "../../db/schema";
import { findActiveMember } from "./members";

/** The active member of a member session whose row is still on the server, with their account. */
export async function memberOfSession(db: SharedDb, memberId: string, id: string) {
  const [found, stored] = await Promise.all([
    findActiveMember(db, memberId),
    db
      .select({ id: memberSessions.id })
      .from(memberSessions)
      .where(and(eq(memberSessions.id, id), eq(memberSessions.memberId, memberId), gt(memberSessions.expiresAt, new Date().toISOString())))
      .get(),
  ]);
  return found && stored ? found : undefined;
}

/** The id of the key whose unexpired session row `id` is, if any. */
export async function keyOfSession(db: SharedDb, id: string): Promise<string | undefined> {
  const stored = await db
    .select({ apiKeyId: dashboardSessions.apiKeyId })
    .from(dashboardSessions)
    .where(and(eq(dashboardSessions.id, id), gt(dashboardSessions.expiresAt, new Date().toISOString())))
    .get();
  return stored?.apiKeyId;
}

/** Whether a key may sign into its account's dashboard: while the account has no active member, or its owner allows it. */
export async function keySignInAllowed(db: SharedDb, account: { id: string; keySignIn: boolean }): Promise<boolean> {
  if (account.keySignIn) return true;
  const member = await db
    .select({ id: members.id })
    .from(members)
    .where(and(eq(members.accountId, account.id), eq(members.status, "active")))
    .limit(1)
    .get();
  return !member;
}

/** Keeps a member's new session until `expiresAt` (the cron purges expired ones, with old sign-in links). */
export async function storeMemberSession(db: SharedDb, id: string, memberId: string, expiresAt: string): Promise<void> {
  await db.insert(memberSessions).values({ id, memberId, expiresAt });
}

/** Keeps a key's new session until `expiresAt`; the key's expired ones go with it, so the table holds the live ones and a few. */
export async function storeKeySession(db: SharedDb, id: string, apiKeyId: string, expiresAt: string): Promise<void> {
  await db.batch([
    db.delete(dashboardSessions).where(and(eq(dashboardSessions.apiKeyId, apiKeyId), lte(dashboardSessions.expiresAt, new Date().toISOString()))),
    db.insert(dashboardSessions).values({ id, apiKeyId, expiresAt }),
  ]);
}

/** Signs a session out: its row goes, so no copy of its cookie signs anyone in again. */
export async function deleteSession(db: SharedDb, id: string, kind: "member" | "api_key"): Promise<void> {
  await (kind === "member"
    ? db.delete(memberSessions).where(eq(memberSessions.id, id))
    : db.delete(dashboardSessions).where(eq(dashboardSessions.id, id)));
}
