import { and, asc, eq, getTableColumns, gte, inArray, lte, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { events, messageRecipients, messages, messageTags } from "../db/schema";
import { notFound } from "../errors";
import { keysetPage, pageOf } from "../lib/pagination";
import { createRouter, errorResponse, IdParam, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";

const messageStatuses = ["scheduled", "queued", "sending", "sent", "delivered", "deferred", "bounced", "failed", "suppressed", "unknown", "cancelled"] as const;

const RecipientSchema = z.object({
  email: z.string(),
  status: z.enum([...messageStatuses, "complained"]),
  smtp_response: z.string().nullable(),
});

const MessageSummarySchema = z
  .object({
    id: z.string().openapi({ example: "msg_2Yq8Lm4Nc0Zp7Tx1Bv9Rk3" }),
    status: z.enum(messageStatuses).openapi({
      description:
        "queued → sending (a delivery attempt is in progress) → sent (handed to the provider) → delivered; deferred while retrying; " +
        "bounced, failed (refunded) or suppressed. unknown: an attempt was interrupted after the message may have been handed to " +
        "the provider; it is not retried (that could deliver it twice) and not refunded. Campaign messages start scheduled (waiting for " +
        "the campaign's fan-out) and end cancelled if their campaign is cancelled before they are sent.",
    }),
    source: z.enum(["api", "smtp", "campaign"]),
    from: z.string(),
    subject: z.string(),
    tags: z.array(z.string()),
    metadata: z.record(z.string(), z.string()),
    credits_charged: z.number().int().openapi({ description: "Sending credits charged when the message was accepted (one per recipient)" }),
    credits_refunded: z
      .number()
      .int()
      .openapi({ description: "Credits given back since: one per recipient that bounced, failed or could not be queued. The net cost is credits_charged − credits_refunded" }),
    test_mode: z.boolean(),
    created_at: Timestamp,
    sent_at: Timestamp.nullable(),
  })
  .openapi("MessageSummary");

const MessageSchema = MessageSummarySchema.extend({
  reply_to: z.string().nullable(),
  recipients: z.array(RecipientSchema),
  attempts: z.number().int(),
  smtp_response: z.string().nullable().openapi({ description: "The provider's last reply" }),
  events: z.array(z.object({ id: z.string(), type: z.string(), created_at: Timestamp, data: z.record(z.string(), z.unknown()) })),
}).openapi("Message");

const ListQuery = PaginationQuery.extend({
  status: z.enum(messageStatuses).optional().openapi({ param: { name: "status", in: "query" } }),
  to: z.string().max(320).optional().openapi({ param: { name: "to", in: "query" }, description: "A recipient address" }),
  tag: z.string().max(64).optional().openapi({ param: { name: "tag", in: "query" } }),
  created_after: z.iso
    .date()
    .or(z.iso.datetime({ offset: true }))
    .optional()
    .openapi({ param: { name: "created_after", in: "query" }, description: "YYYY-MM-DD or an ISO timestamp (inclusive)" }),
  created_before: z.iso
    .date()
    .or(z.iso.datetime({ offset: true }))
    .optional()
    .openapi({ param: { name: "created_before", in: "query" }, description: "YYYY-MM-DD (the whole day) or an ISO timestamp (inclusive)" }),
});

const listMessages = keyedRoute("send", {
  method: "get",
  path: "/messages",
  tags: ["Sending"],
  summary: "List messages",
  request: { query: ListQuery },
  responses: { 200: jsonResponse(paginated(MessageSummarySchema, "MessageList"), "Messages, newest first") },
});

const getMessage = keyedRoute("send", {
  method: "get",
  path: "/messages/{id}",
  tags: ["Sending"],
  summary: "One message: status, recipients and its event timeline",
  request: { params: IdParam("msg") },
  responses: { 200: jsonResponse(MessageSchema, "The message"), 404: errorResponse("No such message") },
});

type MessageRow = typeof messages.$inferSelect & { creditsRefunded: number };

/**
 * Credits refunded for a message, as a column of the message query (one index range seek per row, no query per
 * message): refunds are ledger rows referenced `<message id>:<recipient>`, and the range [id + ":", id + ";") is
 * exactly the references starting with `<id>:` (";" follows ":"), which the (balance, kind, reference_id) index serves.
 */
// (Spelled out: drizzle renders a column of the query's own table unqualified, which inside this subquery would name
// credit_ledger.id.)
const creditsRefunded = sql<number>`(SELECT COALESCE(SUM(amount), 0) FROM credit_ledger
  WHERE balance = 'send' AND kind = 'refund' AND reference_id >= messages.id || ':' AND reference_id < messages.id || ';')`.mapWith(Number);

const messageColumns = { ...getTableColumns(messages), creditsRefunded };

const summary = (row: MessageRow) => ({
  id: row.id,
  status: row.status,
  source: row.source,
  from: row.fromName ? `${row.fromName} <${row.fromAddress}>` : row.fromAddress,
  subject: row.subject,
  tags: row.tags,
  metadata: row.metadata,
  credits_charged: row.creditsCharged,
  credits_refunded: row.creditsRefunded,
  test_mode: row.testMode,
  created_at: row.createdAt,
  sent_at: row.sentAt,
});

const toIso = (value: string, endOfDay: boolean) => (value.length === 10 ? `${value}T${endOfDay ? "23:59:59.999" : "00:00:00.000"}Z` : new Date(value).toISOString());

export const messageRoutes = createRouter()
  .openapi(listMessages, async (c) => {
    const query = c.req.valid("query");
    const accountId = c.get("auth").account.id;
    const page = keysetPage(messages, query.cursor);
    const rows = await drizzle(c.env.DB)
      .select(messageColumns)
      .from(messages)
      .where(
        and(
          eq(messages.accountId, accountId),
          page.where,
          query.status ? eq(messages.status, query.status) : undefined,
          query.created_after ? gte(messages.createdAt, toIso(query.created_after, false)) : undefined,
          query.created_before ? lte(messages.createdAt, toIso(query.created_before, true)) : undefined,
          query.to
            ? inArray(
                messages.id,
                drizzle(c.env.DB)
                  .select({ id: messageRecipients.messageId })
                  .from(messageRecipients)
                  .where(and(eq(messageRecipients.accountId, accountId), sql`lower(${messageRecipients.email}) = ${query.to.trim().toLowerCase()}`)),
              )
            : undefined,
          query.tag
            ? inArray(
                messages.id,
                drizzle(c.env.DB)
                  .select({ id: messageTags.messageId })
                  .from(messageTags)
                  .where(and(eq(messageTags.accountId, accountId), eq(messageTags.tag, query.tag))),
              )
            : undefined,
        ),
      )
      .orderBy(...page.orderBy)
      .limit(query.limit + 1)
      .all();
    return c.json(pageOf(rows, query.limit, summary), 200);
  })
  .openapi(getMessage, async (c) => {
    const db = drizzle(c.env.DB);
    const { id } = c.req.valid("param");
    const accountId = c.get("auth").account.id;
    const [row, recipients, timeline] = await db.batch([
      db.select(messageColumns).from(messages).where(and(eq(messages.id, id), eq(messages.accountId, accountId))),
      db
        .select({ email: messageRecipients.email, status: messageRecipients.status, smtp_response: messageRecipients.smtpResponse })
        .from(messageRecipients)
        .where(and(eq(messageRecipients.messageId, id), eq(messageRecipients.accountId, accountId))),
      db
        .select({ id: events.id, type: events.type, created_at: events.createdAt, data: events.data })
        .from(events)
        .where(and(eq(events.subjectId, id), eq(events.accountId, accountId)))
        // Events written in one millisecond (one D1 batch) share created_at; the table's implicit rowid grows in insert
        // order, so it keeps them in the order they happened.
        .orderBy(asc(events.createdAt), sql`${events}.rowid`),
    ]);
    const message = row[0];
    if (!message) throw notFound("Message");
    return c.json(
      { ...summary(message), reply_to: message.replyTo, recipients, attempts: message.attempts, smtp_response: message.smtpResponse, events: timeline },
      200,
    );
  });
