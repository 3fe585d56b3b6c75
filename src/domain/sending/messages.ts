// Messages as the API shows them: the list with its filters, and one message with its recipients and event
// timeline; and the message a provider's notification names by id. This module owns those reads; acceptance,
// delivery and recovery write messages in their own batches.

import { and, asc, eq, getTableColumns, gte, inArray, lte, sql } from "drizzle-orm";
import { inJsonArray, type AccountDb, type Ctx } from "../../db/client";
import { events, messageRecipients, messages, type messageStreams, messageTags } from "../../db/schema";
import { dateFilterBound } from "../../lib/pagination";
import { keysetPage } from "../pagination";
import { owned } from "../owned";
import PostalMime from "postal-mime";

export type MessageRow = typeof messages.$inferSelect & { creditsRefunded: number };
export type MessageStatus = MessageRow["status"];
/** Every message status, in lifecycle order (the schema's list). */
export const messageStatuses = messages.status.enumValues;

/**
 * Credits refunded for a message, as a column of the message query (one index range seek per row, no query per
 * message): refunds are ledger rows referenced `<message id>:<recipient>`, and the range [id + ":", id + ";") is
 * exactly the references starting with `<id>:` (";" follows ":"), which the (balance, kind, reference_id) index serves.
 * A campaign message is never charged then refunded: its credit is reserved by its campaign, and turned into a charge
 * (`<campaign id>:<message id>`) only once it is sent; a credit released instead was never charged. So its charge is
 * that ledger row, and its refunds are none.
 */
// (Spelled out: drizzle renders a column of the query's own table unqualified, which inside these subqueries would
// name a credit_ledger column.)
const creditsCharged = sql<number>`CASE WHEN messages.source = 'campaign' THEN (SELECT COALESCE(-SUM(amount), 0) FROM credit_ledger
  WHERE balance = 'send' AND kind = 'charge' AND reference_id = messages.campaign_id || ':' || messages.id) ELSE messages.credits_charged END`.mapWith(
  Number,
);
const creditsRefunded = sql<number>`(SELECT COALESCE(SUM(amount), 0) FROM credit_ledger
  WHERE balance = 'send' AND kind = 'refund' AND reference_id >= messages.id || ':' AND reference_id < messages.id || ';')`.mapWith(Number);

const messageColumns = { ...getTableColumns(messages), creditsCharged, creditsRefunded };

export type MessageFilters = {
  status?: MessageStatus;
  stream?: (typeof messageStreams)[number];
  /** A recipient address, compared case-insensitively. */
  to?: string;
  tag?: string;
  /** YYYY-MM-DD (from the start of that day) or an ISO timestamp, inclusive. */
  createdAfter?: string;
  /** YYYY-MM-DD (to the end of that day) or an ISO timestamp, inclusive. */
  createdBefore?: string;
};

/** A page of the account's messages matching the filters, newest first (`limit + 1` rows, for `pageOf`). */
export async function listMessages(
  db: AccountDb,
  accountId: string,
  filters: MessageFilters,
  page: { cursor?: string; limit: number },
): Promise<MessageRow[]> {
  const keyset = keysetPage(messages, page.cursor);
  return db
    .select(messageColumns)
    .from(messages)
    .where(
      and(
        eq(messages.accountId, accountId),
        keyset.where,
        filters.status ? eq(messages.status, filters.status) : undefined,
        filters.stream ? eq(messages.stream, filters.stream) : undefined,
        filters.createdAfter ? gte(messages.createdAt, dateFilterBound(filters.createdAfter, "start")) : undefined,
        filters.createdBefore ? lte(messages.createdAt, dateFilterBound(filters.createdBefore, "end")) : undefined,
        filters.to
          ? inArray(
              messages.id,
              db
                .select({ id: messageRecipients.messageId })
                .from(messageRecipients)
                .where(and(eq(messageRecipients.accountId, accountId), sql`lower(${messageRecipients.email}) = ${filters.to.trim().toLowerCase()}`)),
            )
          : undefined,
        filters.tag
          ? inArray(
              messages.id,
              db
                .select({ id: messageTags.messageId })
                .from(messageTags)
                .where(and(eq(messageTags.accountId, accountId), eq(messageTags.tag, filters.tag))),
            )
          : undefined,
      ),
    )
    .orderBy(...keyset.orderBy)
    .limit(page.limit + 1)
    .all();
}

export type MessageDetail = {
  message: MessageRow;
  recipients: Pick<typeof messageRecipients.$inferSelect, "email" | "status" | "smtpResponse" | "opens" | "clicks" | "openedAt" | "clickedAt">[];
  timeline: Pick<typeof events.$inferSelect, "id" | "type" | "createdAt" | "data">[];
};

/** One message of the account with its recipients and events in the order they happened, in one round trip. */
export async function findMessage(db: AccountDb, accountId: string, messageId: string): Promise<MessageDetail | undefined> {
  const [row, recipients, timeline] = await db.batch([
    db
      .select(messageColumns)
      .from(messages)
      .where(owned(messages, accountId, messageId)),
    db
      .select({
        email: messageRecipients.email,
        status: messageRecipients.status,
        smtpResponse: messageRecipients.smtpResponse,
        opens: messageRecipients.opens,
        clicks: messageRecipients.clicks,
        openedAt: messageRecipients.openedAt,
        clickedAt: messageRecipients.clickedAt,
      })
      .from(messageRecipients)
      .where(and(eq(messageRecipients.messageId, messageId), eq(messageRecipients.accountId, accountId))),
    db
      .select({ id: events.id, type: events.type, createdAt: events.createdAt, data: events.data })
      .from(events)
      .where(and(eq(events.subjectId, messageId), eq(events.accountId, accountId)))
      // Events written in one millisecond (one D1 batch) share created_at; the table's implicit rowid grows in insert
      // order, so it keeps them in the order they happened.
      .orderBy(asc(events.createdAt), sql`${events}.rowid`),
  ]);
  const message = row[0];
  return message ? { message, recipients, timeline } : undefined;
}

export type NamedMessage = {
  message: Pick<typeof messages.$inferSelect, "id" | "accountId" | "source" | "fromAddress" | "content" | "contentKey">;
  recipients: string[];
};

/**
 * A message of any account and its recipients' addresses, in one round trip: what a notification that names the
 * message by its id has to match before it is believed (src/domain/feedback/ses.ts).
 */
export async function findNamedMessage(db: AccountDb, messageId: string): Promise<NamedMessage | undefined> {
  const [rows, recipients] = await db.batch([
    db
      .select({
        id: messages.id,
        accountId: messages.accountId,
        source: messages.source,
        fromAddress: messages.fromAddress,
        content: messages.content,
        contentKey: messages.contentKey,
      })
      .from(messages)
      .where(eq(messages.id, messageId)),
    db.select({ email: messageRecipients.email }).from(messageRecipients).where(eq(messageRecipients.messageId, messageId)),
  ]);
  const message = rows[0];
  return message ? { message, recipients: recipients.map((row) => row.email) } : undefined;
}

/** A message's signed bytes as sent, or why there are none: no such message (or purged), or none built yet. */
export type SentSource =
  | { ok: true; raw: R2ObjectBody }
  | { ok: false; reason: "not_found" }
  | { ok: false; reason: "not_sent"; status: MessageStatus; testMode: boolean };

/** The bytes the last delivery attempt of one of the account's messages handed to the provider. */
export async function findSentSource(ctx: Ctx, accountId: string, messageId: string): Promise<SentSource> {
  const { env, db } = ctx;
  const [row] = await db
    .select({ rawKey: messages.rawKey, status: messages.status, testMode: messages.testMode })
    .from(messages)
    .where(owned(messages, accountId, messageId));
  if (!row) return { ok: false, reason: "not_found" };
  const raw = row.rawKey === null ? null : await env.BLOBS.get(row.rawKey);
  // A key without its object: the store failed after the row was written, which reads as never built.
  return raw ? { ok: true, raw } : { ok: false, reason: "not_sent", status: row.status, testMode: row.testMode };
}

/** What a recipient's mail client shows of sent bytes: the subject and the html and text bodies, decoded. */
export async function sentContent(raw: ArrayBuffer): Promise<{ subject: string | null; html: string | null; text: string | null }> {
  const parsed = await PostalMime.parse(raw);
  return { subject: parsed.subject ?? null, html: parsed.html ?? null, text: parsed.text ?? null };
}

export type RecipientStatus = (typeof messageRecipients.$inferSelect)["status"];

type RecipientOutcome = Pick<MessageDetail["recipients"][number], "email" | "status" | "opens" | "clicks">;

/** Each message's recipients with their outcome and engagement, for a page of messages (one query). */
export async function recipientsOfMessages(db: AccountDb, accountId: string, messageIds: string[]): Promise<Map<string, RecipientOutcome[]>> {
  const byMessage = new Map<string, RecipientOutcome[]>();
  if (messageIds.length === 0) return byMessage;
  const rows = await db
    .select({
      messageId: messageRecipients.messageId,
      email: messageRecipients.email,
      status: messageRecipients.status,
      opens: messageRecipients.opens,
      clicks: messageRecipients.clicks,
    })
    .from(messageRecipients)
    .where(and(eq(messageRecipients.accountId, accountId), inJsonArray(messageRecipients.messageId, messageIds)))
    .all();
  for (const { messageId, ...recipient } of rows) byMessage.set(messageId, [...(byMessage.get(messageId) ?? []), recipient]);
  return byMessage;
}
