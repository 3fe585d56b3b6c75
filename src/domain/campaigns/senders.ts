// Campaign senders: the name and address a campaign is sent from. The address must be on a verified sending domain
// of the account when the sender is saved; the domain's id is kept so the send can re-check it is still verified.
// This module owns the senders' queries.

import type { AccountDb, Ctx, SharedDb } from "../../db/client";
import { senders } from "../../db/schema";
import { newId, nowIso } from "../../lib/ids";
import { accountPage } from "../pagination";
import { findVerifiedDomain, unverifiedDomainMessage } from "../domains/domains";
import { deleteOwned, findOwned, updateOwned } from "../owned";
import { refused, type Refusal } from "../refusal";
import { checkSyntax } from "../verification/syntax";

export type SenderRow = typeof senders.$inferSelect;

/** The address as a sender stores it (local part in NFC, domain lower-cased ASCII), or why it cannot be one. */
export function senderAddress(input: string): { address: string; domain: string } | { error: string } {
  const check = checkSyntax(input);
  if (!check.valid) return { error: `Not a valid email address (${check.reason.replace(/_/g, " ")})` };
  return { address: check.normalized, domain: check.domain };
}

/** A 422 keyed `email`, as the field the user must change. */
const addressRefused = (problem: string) => refused("validation_failed", "The request is invalid", { errors: { email: [problem] } });

/** The address as stored and the id of the account's verified domain it is on, or why it cannot be a sender's. */
async function checkAddress(shared: SharedDb, accountId: string, input: string): Promise<{ kind: "ok"; email: string; domainId: string } | Refusal> {
  const address = senderAddress(input);
  if ("error" in address) return addressRefused(address.error);
  const domain = await findVerifiedDomain(shared, accountId, address.domain);
  if (domain) return { kind: "ok", email: address.address, domainId: domain.id };
  return addressRefused(unverifiedDomainMessage(address.domain));
}

/** A page of the account's senders, newest first (`limit + 1` rows, for `pageOf`). */
export function listSenders(db: AccountDb, accountId: string, page: { cursor?: string; limit: number }): Promise<SenderRow[]> {
  return accountPage(db, senders, accountId, page);
}

export async function findSender(db: AccountDb, accountId: string, senderId: string): Promise<SenderRow | undefined> {
  return findOwned(db, senders, accountId, senderId);
}

export type SenderInput = { name: string; email: string; replyTo: string | null };
/** A saved sender, or why its address cannot be a sender's (not an address, or not on a verified domain). */
export type SaveSenderOutcome<Kind extends string> = Refusal | { kind: Kind; sender: SenderRow };

/** Creates a sender; refused unless its address is on a verified domain of the account. */
export async function createSender(ctx: Ctx, accountId: string, input: SenderInput): Promise<SaveSenderOutcome<"created">> {
  const { db, shared } = ctx;
  const address = await checkAddress(shared, accountId, input.email);
  if (address.kind !== "ok") return address;
  const sender = await db
    .insert(senders)
    .values({ id: newId("snd"), accountId, name: input.name, email: address.email, replyTo: input.replyTo, domainId: address.domainId })
    .returning()
    .get();
  return { kind: "created", sender };
}

export type SenderChange = { name?: string; email?: string; replyTo?: string | null };

/**
 * Changes a sender; `undefined` keeps a field, `null` clears reply_to. The address's domain (the new address, or the
 * current one) is checked again and its id stored afresh, so a domain deleted and added back is followed.
 */
export async function updateSender(
  ctx: Ctx,
  accountId: string,
  senderId: string,
  change: SenderChange,
): Promise<{ kind: "not_found" } | SaveSenderOutcome<"updated">> {
  const { db, shared } = ctx;
  const current = await findSender(db, accountId, senderId);
  if (!current) return { kind: "not_found" };
  const address = await checkAddress(shared, accountId, change.email ?? current.email);
  if (address.kind !== "ok") return address;
  const sender = await updateOwned(db, senders, accountId, senderId, {
    name: change.name ?? current.name,
    email: address.email,
    replyTo: change.replyTo === undefined ? current.replyTo : change.replyTo,
    domainId: address.domainId,
    updatedAt: nowIso(),
  });
  return sender ? { kind: "updated", sender } : { kind: "not_found" };
}

/** Deletes a sender; false if the account has no such sender. Campaigns check their sender exists when sent. */
export async function deleteSender(db: AccountDb, accountId: string, senderId: string): Promise<boolean> {
  return deleteOwned(db, senders, accountId, senderId);
}
