// The people of an account: inviting, changing roles, removing, handing ownership over. This module owns the members
// queries; mailed links are in ./sign-in.ts. One owner per account: the operator names the first, and only the owner
// hands ownership to another member (in the dashboard). Removing a member deletes their sessions and links with them.

import { and, eq, ne } from "drizzle-orm";
import { statement, type SharedDb, batch, type Ctx } from "../../db/client";
import { accounts, members, signInTokens } from "../../db/schema";
import { newId, nowIso } from "../../lib/ids";
import { accountPage } from "../pagination";
import type { Role } from "../../access";
import { findOwned, owned } from "../owned";
import { isRefusal, refused, type Refusal } from "../refusal";
import { sendPlatformMail } from "../sending/platform-mail";
import { invitationMail, invitationStatements } from "./sign-in";

export type Member = typeof members.$inferSelect;

export const normalizeEmail = (email: string) => email.trim().toLowerCase();

export function serializeMember(member: Member) {
  return {
    id: member.id,
    email: member.email,
    role: member.role,
    status: member.status,
    invited_by: member.invitedBy,
    last_signed_in_at: member.lastSignedInAt,
    totp: member.totpEnabledAt !== null,
    created_at: member.createdAt,
    updated_at: member.updatedAt,
  };
}

export const listMembers = (db: SharedDb, accountId: string, page: { cursor?: string; limit: number }) => accountPage(db, members, accountId, page);

/** Every member, oldest first (the dashboard's page: an account has a handful). */
export const allMembers = (db: SharedDb, accountId: string) =>
  db.select().from(members).where(eq(members.accountId, accountId)).orderBy(members.createdAt, members.id).limit(500).all();

/** An active member with their account, by id alone (the second sign-in step knows no account yet). */
export const findActiveMember = (db: SharedDb, id: string) =>
  db
    .select({ member: members, account: accounts })
    .from(members)
    .innerJoin(accounts, eq(accounts.id, members.accountId))
    .where(and(eq(members.id, id), eq(members.status, "active")))
    .get();

export const findMember = (db: SharedDb, accountId: string, id: string) => findOwned(db, members, accountId, id);

const ownerTaken = () => refused("conflict", "The account has an owner already; the owner hands ownership over from the dashboard's Members page");

/**
 * Invites `email` with `role`: a new member, invited, and a 7-day invitation link (its secret returned only here, for
 * the mail). An address already invited gets a new link (the old ones stop working); an active member is a conflict.
 */
async function inviteMember(
  db: SharedDb,
  accountId: string,
  input: { email: string; role: Role; invitedBy: string },
): Promise<{ member: Member; secret: string; created: boolean } | Refusal> {
  const email = normalizeEmail(input.email);
  const [existing, owner] = await db.batch([
    db
      .select()
      .from(members)
      .where(and(eq(members.accountId, accountId), eq(members.email, email))),
    db
      .select({ id: members.id })
      .from(members)
      .where(and(eq(members.accountId, accountId), eq(members.role, "owner"))),
  ]);
  const current = existing[0];
  if (current?.status === "active") return refused("conflict", `${email} is a member already (${current.role})`);
  if (input.role === "owner" && owner.some((row) => row.id !== current?.id)) return ownerTaken();
  const member: Member = current
    ? { ...current, role: input.role, invitedBy: input.invitedBy, updatedAt: nowIso() }
    : {
        id: newId("mem"),
        accountId,
        email,
        role: input.role,
        status: "invited",
        invitedBy: input.invitedBy,
        lastSignedInAt: null,
        totpSecret: null,
        totpEnabledAt: null,
        totpLastStep: null,
        recoveryCodes: null,
        createdAt: nowIso(),
        updatedAt: nowIso(),
      };
  const invitation = await invitationStatements(db, member.id);
  await batch(db, [
    current
      ? statement(
          db,
          db.update(members).set({ role: member.role, invitedBy: member.invitedBy, updatedAt: member.updatedAt }).where(eq(members.id, member.id)),
        )
      : statement(db, db.insert(members).values(member)),
    ...invitation.statements,
  ]);
  return { member, secret: invitation.secret, created: !current };
}

/** Invites (inviteMember) and mails the invitation after the answer: a mail that fails is logged and sent again by inviting again. */
export async function inviteAndMail(
  ctx: Ctx,
  account: { id: string; name: string },
  input: { email: string; role: Role; invitedBy: string },
): Promise<{ member: Member; created: boolean } | Refusal> {
  const { env, shared } = ctx;
  const invited = await inviteMember(shared, account.id, input);
  if (isRefusal(invited)) return invited;
  const { member, secret } = invited;
  ctx.waitUntil(
    sendPlatformMail(
      ctx,
      invitationMail(env, { to: member.email, accountName: account.name, role: member.role, invitedBy: input.invitedBy, secret }),
    ),
  );
  return invited;
}

/**
 * A new role for a member. The owner's role is not changed this way, nor is anyone made owner: ownership is handed
 * over (transferOwnership), so an admin can never demote or replace the owner.
 */
export async function changeRole(db: SharedDb, accountId: string, id: string, role: Role): Promise<{ before: Role; member: Member } | Refusal> {
  const member = await findMember(db, accountId, id);
  if (!member) return refused("not_found", "Member not found");
  if (member.role === "owner") return refused("conflict", "The owner's role changes only when the owner hands ownership to another member");
  if (role === "owner") return ownerTaken();
  const updated = await db
    .update(members)
    .set({ role, updatedAt: nowIso() })
    .where(and(eq(members.id, id), ne(members.role, "owner")))
    .returning()
    .get();
  return updated ? { before: member.role, member: updated } : refused("not_found", "Member not found");
}

/** Removes a member: their sessions and links go with the row (foreign keys), so they are signed out at once. */
export async function removeMember(db: SharedDb, accountId: string, id: string): Promise<Member | Refusal> {
  const member = await findMember(db, accountId, id);
  if (!member) return refused("not_found", "Member not found");
  if (member.role === "owner") return refused("conflict", "The owner cannot be removed; the owner hands ownership to another member first");
  await batch(db, [
    statement(db, db.delete(signInTokens).where(eq(signInTokens.memberId, id))),
    statement(db, db.delete(members).where(and(eq(members.id, id), ne(members.role, "owner")))),
  ]);
  return member;
}

/** The owner makes an active member the owner and becomes an admin. */
export async function transferOwnership(db: SharedDb, accountId: string, ownerId: string, toId: string): Promise<Member | Refusal> {
  const [owner, target] = await Promise.all([findMember(db, accountId, ownerId), findMember(db, accountId, toId)]);
  if (owner?.role !== "owner") return refused("forbidden", "Only the owner hands ownership over");
  if (!target || target.id === ownerId) return refused("not_found", "Member not found");
  if (target.status !== "active") return refused("conflict", "Ownership goes to a member who has signed in at least once");
  const now = nowIso();
  await batch(db, [
    statement(
      db,
      db
        .update(members)
        .set({ role: "admin", updatedAt: now })
        .where(owned(members, accountId, ownerId, eq(members.role, "owner"))),
    ),
    statement(db, db.update(members).set({ role: "owner", updatedAt: now }).where(eq(members.id, toId))),
  ]);
  return { ...target, role: "owner", updatedAt: now };
}

/** The owner's choices: API keys may sign into the dashboard while the account has active members; every member needs a second factor. */
export async function setSignInSettings(db: SharedDb, accountId: string, settings: { keySignIn: boolean; requireTotp: boolean }): Promise<void> {
  await db
    .update(accounts)
    .set({ ...settings, updatedAt: nowIso() })
    .where(eq(accounts.id, accountId));
}
