// Segments: saved audiences, contacts matching all (or any) of up to 20 conditions on contact fields, custom fields,
// list membership and topic subscriptions. A segment is never materialised: `segmentWhere` compiles it to ONE SQL condition over
// `contacts`, which the count, the preview and a campaign's fan-out (`INSERT … SELECT`, `COUNT(*)`) all use, so
// what a marketer previews is what a send targets. This module owns the segments' queries; the conditions' language
// and its compilation rules are in conditions.ts.

import { inJsonArray, type AccountDb } from "../../db/client";
import { and, count, eq, or, sql, type SQL } from "drizzle-orm";
import { contacts, lists, segments, topics, type SegmentCondition } from "../../db/schema";
import { audienceWhere } from "../campaigns/audience";
import type { FieldErrors } from "../../errors";
import { newId, nowIso } from "../../lib/ids";
import { accountPage } from "../pagination";
import { contactsMatchingQuery, type ContactWithLists } from "../contacts/contacts";
import { deleteOwned, findOwned, updateOwned } from "../owned";
import { compileAll, compileCondition, problemsOf } from "./conditions";

export type SegmentRow = typeof segments.$inferSelect;
export type { SegmentCondition };

export const SEGMENT_PREVIEW_SIZE = 20;

type SegmentShape = Pick<SegmentRow, "match" | "conditions">;

/**
 * The SQL condition over `contacts` (the table by its own name, not aliased) selecting the account's contacts that
 * match the segment, whatever their status: for `COUNT(*)`, a preview, or a campaign's `INSERT … SELECT`.
 * `now` anchors `within_days`. Throws on a condition that was not validated (saved segments always are).
 */
export function segmentWhere(accountId: string, segment: SegmentShape, now = new Date()): SQL {
  const compiled = segment.conditions.map((condition) => {
    const result = compileCondition(condition, now);
    if ("problem" in result) throw new Error(`Segment condition ${JSON.stringify(condition)} is invalid: ${result.message}`);
    return sql`(${result.sql})`;
  });
  const matches = segment.match === "all" ? and(...compiled) : or(...compiled);
  return and(eq(contacts.accountId, accountId), matches ?? sql`0`) ?? sql`0`;
}

/** The contacts a send to the segment targets: the campaign audience rule (see audience.ts) applied to its matches. */
export function segmentAudienceWhere(accountId: string, segment: SegmentShape, now = new Date()): SQL {
  return audienceWhere({ accountId, lists: [], excludeLists: [], topicId: null }, [segmentWhere(accountId, segment, now)]);
}

/** All problems with the conditions, list ids of other accounts (or none) included. */
export async function checkConditions(db: AccountDb, accountId: string, conditions: SegmentCondition[]): Promise<FieldErrors> {
  const compiled = compileAll(conditions);
  const errors = problemsOf(compiled);
  const listIdsByIndex = compiled.map((result) => (result && "listIds" in result ? result.listIds : []));
  const topicIdsByIndex = compiled.map((result) => (result && "topicIds" in result ? result.topicIds : []));
  const wantedLists = [...new Set(listIdsByIndex.flat())];
  const wantedTopics = [...new Set(topicIdsByIndex.flat())];
  if (wantedLists.length === 0 && wantedTopics.length === 0) return errors;
  const [ownedLists, ownedTopics] = await db.batch([
    db
      .select({ id: lists.id })
      .from(lists)
      .where(and(eq(lists.accountId, accountId), inJsonArray(lists.id, wantedLists))),
    db
      .select({ id: topics.id })
      .from(topics)
      .where(and(eq(topics.accountId, accountId), inJsonArray(topics.id, wantedTopics))),
  ]);
  const report = (idsByIndex: string[][], owned: { id: string }[], what: string) => {
    const ownedIds = new Set(owned.map((row) => row.id));
    idsByIndex.forEach((ids, index) => {
      const unknown = ids.filter((id) => !ownedIds.has(id));
      if (unknown.length > 0) errors[`conditions.${index}.value`] = [`No ${what} ${unknown.join(", ")} in this account`];
    });
  };
  report(listIdsByIndex, ownedLists, "list");
  report(topicIdsByIndex, ownedTopics, "topic");
  return errors;
}

const stored = (conditions: SegmentCondition[]): SegmentCondition[] =>
  conditions.map(({ field, op, value }) => (value === undefined ? { field, op } : { field, op, value }));

/** A page of the account's segments, newest first (`limit + 1` rows, for `pageOf`). */
export function listSegments(db: AccountDb, accountId: string, page: { cursor?: string; limit: number }): Promise<SegmentRow[]> {
  return accountPage(db, segments, accountId, page);
}

export async function findSegment(db: AccountDb, accountId: string, segmentId: string): Promise<SegmentRow | undefined> {
  return findOwned(db, segments, accountId, segmentId);
}

export type SegmentInput = { name: string; match: SegmentRow["match"]; conditions: SegmentCondition[] };

export async function createSegment(
  db: AccountDb,
  accountId: string,
  input: SegmentInput,
): Promise<{ kind: "invalid"; errors: FieldErrors } | { kind: "created"; segment: SegmentRow }> {
  const errors = await checkConditions(db, accountId, input.conditions);
  if (Object.keys(errors).length > 0) return { kind: "invalid", errors };
  const segment = await db
    .insert(segments)
    .values({ id: newId("seg"), accountId, name: input.name, match: input.match, conditions: stored(input.conditions) })
    .returning()
    .get();
  return { kind: "created", segment };
}

/** Changes a segment; `undefined` keeps a field, and given conditions replace the old ones whole. */
export async function updateSegment(
  db: AccountDb,
  accountId: string,
  segmentId: string,
  change: Partial<SegmentInput>,
): Promise<{ kind: "not_found" } | { kind: "invalid"; errors: FieldErrors } | { kind: "updated"; segment: SegmentRow }> {
  if (change.conditions) {
    const errors = await checkConditions(db, accountId, change.conditions);
    if (Object.keys(errors).length > 0) return { kind: "invalid", errors };
  }
  const segment = await updateOwned(db, segments, accountId, segmentId, {
    ...(change.name !== undefined ? { name: change.name } : {}),
    ...(change.match !== undefined ? { match: change.match } : {}),
    ...(change.conditions !== undefined ? { conditions: stored(change.conditions) } : {}),
    updatedAt: nowIso(),
  });
  return segment ? { kind: "updated", segment } : { kind: "not_found" };
}

/** Deletes a segment; false if the account has no such segment. */
export async function deleteSegment(db: AccountDb, accountId: string, segmentId: string): Promise<boolean> {
  return deleteOwned(db, segments, accountId, segmentId);
}

/**
 * How many contacts a send to the segment targets (`segmentAudienceWhere`), and with `preview` the first
 * `SEGMENT_PREVIEW_SIZE` of them, newest first, counted and read in one round trip.
 */
export async function countSegment(
  db: AccountDb,
  accountId: string,
  segmentId: string,
  options: { preview: boolean },
): Promise<{ kind: "not_found" } | ({ kind: "counted" } & SegmentCount)> {
  const segment = await findSegment(db, accountId, segmentId);
  return segment ? { kind: "counted", ...(await countSegmentRow(db, segment, options)) } : { kind: "not_found" };
}

type SegmentCount = { count: number; contacts?: ContactWithLists[] };

/** `countSegment` for a segment already read (the dashboard's segment page has it), without reading it again. */
export async function countSegmentRow(
  db: AccountDb,
  segment: Pick<SegmentRow, "accountId" | "match" | "conditions">,
  options: { preview: boolean },
): Promise<SegmentCount> {
  const where = segmentAudienceWhere(segment.accountId, segment);
  const total = db.select({ total: count() }).from(contacts).where(where);
  if (!options.preview) return { count: (await total.get())?.total ?? 0 };
  const [counted, preview] = await db.batch([total, contactsMatchingQuery(db, where, SEGMENT_PREVIEW_SIZE)]);
  return { count: counted[0]?.total ?? 0, contacts: preview };
}
