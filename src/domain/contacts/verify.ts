// Checking contacts' addresses in bulk (POST /contacts/verify, a campaign's pre-send checks): one verification job
// over the chosen contacts whose address has no result younger than VERIFY_FRESH_DAYS. Fresh results are reused for
// free; each result goes back onto its contact (verification/contact-results.ts).

import type { AccountDb, Ctx } from "../../db/client";
import { and, asc, count, eq, sql, type SQL } from "drizzle-orm";
import { config } from "../../config";
import { contacts } from "../../db/schema";
import type { Account } from "../accounts/accounts";
import { findSegment, segmentWhere } from "../segments/segments";
import { freshSince, needsCheckSql } from "../verification/contact-results";
import { createVerificationJob, MAX_JOB_ADDRESSES, type InsufficientCredits, type JobPlan } from "../verification/jobs";
import type { VerificationJob } from "../verification/job-rows";
import { findList } from "./lists";

export type ContactChecks =
  | { kind: "none" }
  | { kind: "created"; job: VerificationJob; plan: JobPlan }
  | InsufficientCredits
  /** More than MAX_JOB_ADDRESSES addresses to check: more than one job. */
  | { kind: "too_many" };

/** Over `contacts` (a condition selecting some of them): how many would be checked now, and how many reuse a fresh result. */
export async function contactChecksNeeded(ctx: Ctx, where: SQL, now = new Date()): Promise<{ toCheck: number; fresh: number }> {
  const { env, db } = ctx;
  const since = freshSince(config(env).verifyFreshDays, now);
  const row = await db
    .select({ total: count(), toCheck: sql<number>`coalesce(sum(CASE WHEN ${needsCheckSql(since)} THEN 1 ELSE 0 END), 0)` })
    .from(contacts)
    .where(where)
    .get();
  const toCheck = Number(row?.toCheck ?? 0);
  return { toCheck, fresh: (row?.total ?? 0) - toCheck };
}

/**
 * Creates (and charges: 1 credit per address) the job that checks the contacts selected by `where` without a fresh
 * result; the caller enqueues its chunks. Addresses are unique per account, so nothing in it is a duplicate.
 */
export async function createContactChecks(
  ctx: Ctx,
  account: Account,
  where: SQL,
  job: { source: "contacts" | "campaign"; name: string; campaignId?: string },
  now = new Date(),
): Promise<ContactChecks> {
  const { env, db } = ctx;
  const since = freshSince(config(env).verifyFreshDays, now);
  const rows = await db
    .select({ email: contacts.emailKey })
    .from(contacts)
    .where(and(where, needsCheckSql(since)))
    .orderBy(asc(contacts.id))
    .limit(MAX_JOB_ADDRESSES + 1)
    .all();
  if (rows.length === 0) return { kind: "none" };
  if (rows.length > MAX_JOB_ADDRESSES) return { kind: "too_many" };
  return createVerificationJob(ctx, { account, emails: rows.map((row) => row.email), ...job });
}

export type ContactSelection = { list_id: string } | { segment_id: string } | { all: true };

/**
 * The subscribed contacts POST /contacts/verify names: a list's, a segment's or all of them. Undefined when the list
 * or segment is not the account's.
 */
export async function selectContacts(db: AccountDb, accountId: string, selection: ContactSelection): Promise<SQL | undefined> {
  const subscribed = and(eq(contacts.accountId, accountId), eq(contacts.status, "subscribed"));
  if ("list_id" in selection) {
    if (!(await findList(db, accountId, selection.list_id))) return undefined;
    return and(subscribed, sql`EXISTS (SELECT 1 FROM list_members AS m WHERE m.contact_id = ${contacts.id} AND m.list_id = ${selection.list_id})`);
  }
  if ("segment_id" in selection) {
    const segment = await findSegment(db, accountId, selection.segment_id);
    return segment ? and(subscribed, segmentWhere(accountId, segment)) : undefined;
  }
  return subscribed;
}
