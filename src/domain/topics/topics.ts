// Subscription topics (docs/streams.md): what an account's broadcast mail is about. A contact's choice per topic is a
// contact_topics row; without one the topic's default applies. A campaign or automation step that names a topic
// reaches only contacts subscribed to it, and its unsubscribe link leaves that topic only. This module owns the
// topics' and the choices' queries.

import { and, eq, sql, type SQL } from "drizzle-orm";
import { inJsonArray, statement, type AccountDb, batch } from "../../db/client";
import { contacts, contactTopics, topics } from "../../db/schema";
import { newId, nowIso } from "../../lib/ids";
import { accountPage } from "../pagination";
import { findOwned, owned, updateOwned } from "../owned";
import { refused, type Refusal } from "../refusal";

export type TopicRow = typeof topics.$inferSelect;

/** At most this many topics per account: the preference page lists them all. */
export const MAX_TOPICS_PER_ACCOUNT = 50;

export function serializeTopic(row: TopicRow) {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    default_subscribed: row.defaultSubscribed,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

const duplicateName = (name: string) =>
  refused("validation_failed", "A topic of that name exists", { errors: { name: [`The account already has a topic named ${name}`] } });

export async function createTopic(
  db: AccountDb,
  accountId: string,
  input: { name: string; description?: string | null; defaultSubscribed: boolean },
): Promise<{ kind: "created"; topic: TopicRow } | Refusal> {
  const id = newId("top");
  // The cap and the unique name are checked by the insert itself: no count-then-insert race.
  const inserted = await statement(
    db,
    sql`INSERT INTO topics (id, account_id, name, description, default_subscribed)
      SELECT ${id}, ${accountId}, ${input.name}, ${input.description ?? null}, ${input.defaultSubscribed ? 1 : 0}
      WHERE (SELECT count(*) FROM topics WHERE account_id = ${accountId}) < ${MAX_TOPICS_PER_ACCOUNT}
        AND NOT EXISTS (SELECT 1 FROM topics WHERE account_id = ${accountId} AND name = ${input.name})`,
  ).run();
  const topic = inserted.meta.changes > 0 ? await db.select().from(topics).where(eq(topics.id, id)).get() : undefined;
  if (topic) return { kind: "created", topic };
  const named = await db
    .select({ id: topics.id })
    .from(topics)
    .where(and(eq(topics.accountId, accountId), eq(topics.name, input.name)))
    .get();
  if (named) return duplicateName(input.name);
  return refused("validation_failed", "Too many topics", {
    errors: { name: [`An account can have at most ${MAX_TOPICS_PER_ACCOUNT} topics; delete one first`] },
  });
}

export async function listTopics(db: AccountDb, accountId: string, page: { cursor?: string; limit: number }): Promise<TopicRow[]> {
  return accountPage(db, topics, accountId, page);
}

/** Every topic of the account, oldest first (the preference page's order). */
export async function allTopics(db: AccountDb, accountId: string): Promise<TopicRow[]> {
  return db.select().from(topics).where(eq(topics.accountId, accountId)).orderBy(topics.createdAt, topics.id).limit(MAX_TOPICS_PER_ACCOUNT).all();
}

export async function findTopic(db: AccountDb, accountId: string, id: string): Promise<TopicRow | undefined> {
  return findOwned(db, topics, accountId, id);
}

export async function updateTopic(
  db: AccountDb,
  accountId: string,
  id: string,
  change: { name?: string; description?: string | null; defaultSubscribed?: boolean },
): Promise<{ kind: "updated"; topic: TopicRow } | { kind: "not_found" } | Refusal> {
  if (change.name !== undefined) {
    const named = await db
      .select({ id: topics.id })
      .from(topics)
      .where(and(eq(topics.accountId, accountId), eq(topics.name, change.name)))
      .get();
    if (named && named.id !== id) return duplicateName(change.name);
  }
  const topic = await updateOwned(db, topics, accountId, id, {
    name: change.name,
    description: change.description,
    defaultSubscribed: change.defaultSubscribed,
    updatedAt: nowIso(),
  });
  return topic ? { kind: "updated", topic } : { kind: "not_found" };
}

/**
 * Deletes a topic and every contact's choice for it. Campaigns and automations that name it keep the id and send to
 * their audience as if no topic were named (their unsubscribe links then leave all marketing).
 */
export async function deleteTopic(db: AccountDb, accountId: string, id: string): Promise<boolean> {
  const [, deleted] = await db.batch([
    db.delete(contactTopics).where(and(eq(contactTopics.topicId, id), eq(contactTopics.accountId, accountId))),
    db
      .delete(topics)
      .where(owned(topics, accountId, id))
      .returning({ id: topics.id }),
  ]);
  return deleted.length > 0;
}

/** Which of `ids` are not topics of the account (for validating references before they are saved). */
export async function unknownTopics(db: AccountDb, accountId: string, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const found = await db
    .select({ id: topics.id })
    .from(topics)
    .where(and(eq(topics.accountId, accountId), inJsonArray(topics.id, [...ids])))
    .all();
  const known = new Set(found.map((row) => row.id));
  return [...new Set(ids)].filter((id) => !known.has(id));
}

/**
 * SQL over `contacts`: the contact is subscribed to the topic, by its own choice or, having made none, by the topic's
 * default. A topic that no longer exists subscribes nobody by default, so a deleted topic's choices are gone with it.
 */
export function subscribedToTopicSql(topicId: string, contactId: SQL = sql`${contacts.id}`): SQL {
  return sql`COALESCE(
    (SELECT ct.subscribed FROM contact_topics AS ct WHERE ct.contact_id = ${contactId} AND ct.topic_id = ${topicId}),
    (SELECT t.default_subscribed FROM topics AS t WHERE t.id = ${topicId}),
    0) = 1`;
}

/** Whether one contact is subscribed to the topic (an automation step's check). */
export async function contactSubscribedToTopic(db: AccountDb, contactId: string, topicId: string): Promise<boolean> {
  const row = await db
    .select({ subscribed: sql<number>`${subscribedToTopicSql(topicId, sql`${contactId}`)}` })
    .from(sql`(SELECT 1)`)
    .get();
  return row?.subscribed === 1;
}

/** Statements recording a contact's choices (`{topic id: subscribed}`), for the caller's batch. Unknown ids are the caller's to refuse. */
export function topicChoiceStatements(
  db: AccountDb,
  accountId: string,
  contactId: SQL | string,
  choices: Record<string, boolean>,
): D1PreparedStatement[] {
  const entries = Object.entries(choices);
  if (entries.length === 0) return [];
  return [
    statement(
      db,
      sql`INSERT INTO contact_topics (contact_id, topic_id, account_id, subscribed, updated_at)
        SELECT ${typeof contactId === "string" ? sql`${contactId}` : contactId}, value ->> '$[0]', ${accountId}, value ->> '$[1]', ${nowIso()}
        FROM json_each(${JSON.stringify(entries.map(([topicId, subscribed]) => [topicId, subscribed ? 1 : 0]))})
        WHERE EXISTS (SELECT 1 FROM topics WHERE id = value ->> '$[0]' AND account_id = ${accountId})
        ON CONFLICT (contact_id, topic_id) DO UPDATE SET subscribed = excluded.subscribed, updated_at = excluded.updated_at`,
    ),
  ];
}

/** Each listed contact's subscription to every topic of the account (`{contact id: {topic id: subscribed}}`). */
export async function topicSubscriptionsOf(
  db: AccountDb,
  accountId: string,
  contactIds: readonly string[],
): Promise<Map<string, Record<string, boolean>>> {
  const result = new Map<string, Record<string, boolean>>();
  if (contactIds.length === 0) return result;
  const [accountTopics, choices] = await db.batch([
    db.select({ id: topics.id, defaultSubscribed: topics.defaultSubscribed }).from(topics).where(eq(topics.accountId, accountId)),
    db
      .select({ contactId: contactTopics.contactId, topicId: contactTopics.topicId, subscribed: contactTopics.subscribed })
      .from(contactTopics)
      .where(and(eq(contactTopics.accountId, accountId), inJsonArray(contactTopics.contactId, [...contactIds]))),
  ]);
  for (const contactId of contactIds) {
    const own = new Map(choices.filter((choice) => choice.contactId === contactId).map((choice) => [choice.topicId, choice.subscribed]));
    result.set(contactId, Object.fromEntries(accountTopics.map((topic) => [topic.id, own.get(topic.id) ?? topic.defaultSubscribed])));
  }
  return result;
}

/**
 * Records a contact's choices (`{topic id: subscribed}`, the API's and the import's `topics`), or refuses the ids that
 * are not topics of the account, keyed `topics.<id>`.
 */
export async function setTopicChoices(
  db: AccountDb,
  accountId: string,
  contactId: string,
  choices: Record<string, boolean>,
): Promise<{ kind: "saved" } | Refusal> {
  const unknown = await unknownTopics(db, accountId, Object.keys(choices));
  if (unknown.length > 0) {
    return refused("validation_failed", "Unknown topics", {
      errors: Object.fromEntries(unknown.map((id) => [`topics.${id}`, [`No topic ${id} in this account`]])),
    });
  }
  const statements = topicChoiceStatements(db, accountId, contactId, choices);
  if (statements.length > 0) await batch(db, statements);
  return { kind: "saved" };
}
