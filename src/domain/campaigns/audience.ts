// A campaign's audience: (members of its lists ∪ contacts matching any of its segments) − members of its excluded
// lists − contacts that are not `subscribed` − addresses suppressed for broadcast mail − with a topic, contacts who
// are not subscribed to it. Contacts are unique per address in an account,
// so one contact is one recipient. The audience is counted at POST /send (for the reservation) and materialised as
// one message per contact when sending starts, in chunks, so a large audience never needs one large statement.

import { and, asc, count, eq, gt, or, sql, type SQL } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import { contacts, type campaigns } from "../../db/schema";
import { inJsonArray, type AccountDb } from "../../db/client";
import { blocksBroadcastSql } from "../suppressions/suppressions";
import { subscribedToTopicSql } from "../topics/topics";

type CampaignRow = typeof campaigns.$inferSelect;
export type Audience = Pick<CampaignRow, "accountId" | "lists" | "excludeLists" | "topicId">;

/**
 * The SQL condition over `contacts` selecting the audience; `segmentConditions` are the compiled conditions of the
 * campaign's segments (each a condition over `contacts`).
 */
export function audienceWhere(audience: Audience, segmentConditions: SQL[]): SQL {
  const included: SQL[] = [...segmentConditions];
  if (audience.lists.length > 0) {
    included.push(
      sql`EXISTS (SELECT 1 FROM list_members AS m WHERE m.contact_id = ${contacts.id} AND ${inJsonArray(sql`m.list_id`, audience.lists)})`,
    );
  }
  const where = and(
    eq(contacts.accountId, audience.accountId),
    eq(contacts.status, "subscribed"),
    included.length > 0 ? or(...included) : sql`0`,
    audience.excludeLists.length > 0
      ? sql`NOT EXISTS (SELECT 1 FROM list_members AS x WHERE x.contact_id = ${contacts.id} AND ${inJsonArray(sql`x.list_id`, audience.excludeLists)})`
      : undefined,
    // Suppressions are keyed by the fully lower-cased address, as lower(email_key) is (see normalizeSuppressionEmail).
    // Campaigns are broadcast mail: entries for transactional mail alone do not keep a contact out.
    sql`NOT EXISTS (SELECT 1 FROM suppressions AS s WHERE s.account_id = ${audience.accountId} AND s.email = lower(${contacts.emailKey}) AND ${blocksBroadcastSql})`,
    audience.topicId ? subscribedToTopicSql(audience.topicId) : undefined,
  );
  return where ?? sql`0`;
}

const dialect = new SQLiteAsyncDialect();
/**
 * D1 binds at most 100 parameters per statement; the fan-out's page query adds a few to the audience's own. Every
 * segment condition binds its values, so many segments with many conditions can go past it.
 */
export const MAX_AUDIENCE_PARAMETERS = 90;

/** How many parameters the audience condition binds (see MAX_AUDIENCE_PARAMETERS). */
export function audienceParameters(where: SQL): number {
  return dialect.sqlToQuery(where).params.length;
}

export async function countAudience(db: AccountDb, where: SQL): Promise<number> {
  const row = await db.select({ total: count() }).from(contacts).where(where).get();
  return row?.total ?? 0;
}

/** The next `limit` audience contacts after `afterContactId`, in id order (the materialisation's keyset). */
export async function audiencePage(db: AccountDb, where: SQL, afterContactId: string, limit: number) {
  return db
    .select({
      id: contacts.id,
      email: contacts.emailKey,
      verificationResult: contacts.verificationResult,
      verificationStatus: contacts.verificationStatus,
      verifiedAt: contacts.verifiedAt,
    })
    .from(contacts)
    .where(and(where, gt(contacts.id, afterContactId)))
    .orderBy(asc(contacts.id))
    .limit(limit)
    .all();
}
