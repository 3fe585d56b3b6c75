import {
  findMessage,
  findSentSource,
  listMessages as findMessages,
  messageStatuses,
  sentContent,
  type MessageRow,
  type SentSource,
} from "../domain/sending/messages";
import { AppError, notFound, validationError } from "../errors";
import { cancelMessage, rescheduleMessage, type ScheduleRefusal } from "../domain/sending/schedule";
import { RescheduleRequestSchema } from "../domain/sending/input";
import { pageOf } from "../lib/pagination";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import type { AuthContext } from "../types";
import { messageStreams } from "../db/schema";
import { keyReadsInbound, replyWordsFor } from "../domain/inbound/reply-words";

const RecipientSchema = z.object({
  email: z.string(),
  status: z.enum([...messageStatuses, "complained"]),
  smtp_response: z.string().nullable(),
  opens: z.int().openapi({ description: "Opens by a person (tracked messages; machine opens are not counted)" }),
  clicks: z.int().openapi({ description: "Counted clicks on tracked links (scanner clicks are not counted)" }),
  opened_at: z.string().nullable().openapi({ description: "First open by a person" }),
  clicked_at: z.string().nullable().openapi({ description: "First counted click" }),
});

const MessageSummarySchema = z
  .object({
    id: z.string().openapi({ example: "msg_2Yq8Lm4Nc0Zp7Tx1Bv9Rk3" }),
    status: z.enum(messageStatuses).openapi({
      description:
        "queued → sending (a delivery attempt is in progress) → sent (handed to the provider) → delivered; deferred while retrying; " +
        "bounced, failed (refunded) or suppressed. unknown: an attempt was interrupted after the message may have been handed to " +
        "the provider; it is not retried (that could deliver it twice) and not refunded. A send with scheduled_at is scheduled until its " +
        "time, and cancelled (refunded) if cancelled before it left. Campaign messages start scheduled (waiting for " +
        "the campaign's fan-out) and end cancelled if their campaign is cancelled before they are sent.",
    }),
    scheduled_at: Timestamp.nullable().openapi({ description: "When a scheduled send goes (or went) out; null for one sent at once" }),
    source: z.enum(["api", "smtp", "campaign"]),
    stream: z.enum(messageStreams).openapi({
      description: "`transactional` (receipts, resets: the default of POST /send and the relay) or `broadcast` (campaigns, newsletters)",
    }),
    topic_id: z.string().nullable().openapi({ description: "Broadcast mail's subscription topic (GET /topics/{id})" }),
    from: z.string(),
    subject: z.string(),
    tags: z.array(z.string()),
    metadata: z.record(z.string(), z.string()),
    credits_charged: z
      .number()
      .int()
      .openapi({
        description:
          "Sending credits charged when the message was accepted (one per recipient). A campaign message is charged from its campaign's " +
          "reservation once it is sent: 0 while pending, and 0 if its reserved credit was released (bounced, failed, skipped, cancelled)",
      }),
    credits_refunded: z
      .number()
      .int()
      .openapi({
        description:
          "Credits given back since: one per recipient that bounced, failed or could not be queued (always 0 for campaign messages, " +
          "which are charged only once sent). The net cost is credits_charged − credits_refunded",
      }),
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
  next_attempt_at: Timestamp.nullable().openapi({
    description: "Held back by its domain's warm-up cap: not sent before this time (the next UTC day)",
  }),
  events: z.array(z.object({ id: z.string(), type: z.string(), created_at: Timestamp, data: z.record(z.string(), z.unknown()) })),
}).openapi("Message");

const ListQuery = PaginationQuery.extend({
  status: z
    .enum(messageStatuses)
    .optional()
    .openapi({ param: { name: "status", in: "query" } }),
  stream: z
    .enum(messageStreams)
    .optional()
    .openapi({ param: { name: "stream", in: "query" } }),
  to: z
    .string()
    .max(320)
    .optional()
    .openapi({ param: { name: "to", in: "query" }, description: "A recipient address" }),
  tag: z
    .string()
    .max(64)
    .optional()
    .openapi({ param: { name: "tag", in: "query" } }),
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
  responses: {
    200: jsonResponse(MessageSchema, "The message"),
    404: errorResponse("No such message, or one deleted once past the retention window (RETENTION_DAYS, 30 days by default)"),
  },
});

const MessageContentSchema = z
  .object({
    id: z.string(),
    subject: z.string().nullable().openapi({ description: "As the recipient saw it (placeholders filled in)" }),
    html: z.string().nullable().openapi({ description: "The html part as sent: tracking links and open pixel included" }),
    text: z.string().nullable().openapi({ description: "The text part as sent (generated from the html when none was given)" }),
  })
  .openapi("MessageContent");

const notSentYet = "The message has no content yet: it is kept from its first delivery attempt (test-mode messages are never built)";
const retention = "No such message, or one deleted once past the retention window (RETENTION_DAYS, 30 days by default)";

const getMessageContent = keyedRoute("send", {
  method: "get",
  path: "/messages/{id}/content",
  tags: ["Sending"],
  summary: "What was sent: the rendered subject, html and text",
  description: "Decoded from the signed bytes the last delivery attempt handed to the provider (`/raw`).",
  request: { params: IdParam("msg") },
  responses: {
    200: jsonResponse(MessageContentSchema, "The content as sent"),
    404: errorResponse(retention),
    409: errorResponse(notSentYet),
  },
});

const getMessageRaw = keyedRoute("send", {
  method: "get",
  path: "/messages/{id}/raw",
  tags: ["Sending"],
  summary: "What was sent: the signed MIME source",
  description: "The bytes the last delivery attempt handed to the provider, DKIM signatures included (the envelope is not part of them).",
  request: { params: IdParam("msg") },
  responses: {
    200: { description: "The message source", content: { "message/rfc822": { schema: z.string() } } },
    404: errorResponse(retention),
    409: errorResponse(notSentYet),
  },
});

function sentOrThrow(source: SentSource): R2ObjectBody {
  if (source.ok) return source.raw;
  if (source.reason === "not_found") throw notFound("Message");
  throw new AppError(
    "conflict",
    source.testMode
      ? "Test-mode messages are simulated and never built: there is no content to show"
      : `The message has not been sent yet (status ${source.status}): its content is kept from its first delivery attempt`,
  );
}

const rescheduleMessageRoute = keyedRoute("send", {
  method: "patch",
  path: "/messages/{id}",
  tags: ["Sending"],
  summary: "Move a scheduled send to another time",
  description: "Only while the message is scheduled; once it has left (or was cancelled) the answer is 409.",
  request: { params: IdParam("msg"), body: jsonBody(RescheduleRequestSchema) },
  responses: {
    200: jsonResponse(
      z.object({ id: z.string(), status: z.enum(["scheduled"]), scheduled_at: Timestamp }).openapi("MessageRescheduled"),
      "Moved; it goes out at the new time",
    ),
    403: errorResponse("`live_key_required`: a test key tried to move a live message"),
    404: errorResponse("No such message"),
    409: errorResponse("The message is not scheduled (any more): it has left, was cancelled, or is a campaign message"),
  },
});

const cancelMessageRoute = keyedRoute("send", {
  method: "post",
  path: "/messages/{id}/cancel",
  tags: ["Sending"],
  summary: "Cancel a scheduled or queued message",
  description:
    "A message that has not left yet (status scheduled or queued) becomes cancelled: it is never sent, each charged recipient's credit " +
    "is given back, and a relay.cancelled event is emitted. Once it has left (sending or later) the answer is 409. Campaign messages are " +
    "cancelled with their campaign.",
  request: { params: IdParam("msg") },
  responses: {
    200: jsonResponse(
      z.object({ id: z.string(), status: z.enum(["cancelled"]), credits_refunded: z.int() }).openapi("MessageCancelled"),
      "Cancelled and refunded",
    ),
    403: errorResponse("`live_key_required`: a test key tried to cancel a live message"),
    404: errorResponse("No such message"),
    409: errorResponse("The message has left, was already cancelled, or is a campaign message"),
  },
});

function scheduleRefusalError(refusal: ScheduleRefusal): AppError {
  if (refusal.kind === "not_found") return notFound("Message");
  if (refusal.kind === "live_key_required") return new AppError(refusal.kind, refusal.message);
  return new AppError("conflict", refusal.reason);
}

const callerOf = (auth: AuthContext) => ({ accountId: auth.account.id, mode: auth.apiKey.mode });

const summary = (row: MessageRow) => ({
  id: row.id,
  status: row.status,
  source: row.source,
  stream: row.stream,
  topic_id: row.topicId,
  from: row.fromName ? `${row.fromName} <${row.fromAddress}>` : row.fromAddress,
  subject: row.subject,
  tags: row.tags,
  metadata: row.metadata,
  credits_charged: row.creditsCharged,
  credits_refunded: row.creditsRefunded,
  test_mode: row.testMode,
  scheduled_at: row.scheduledAt,
  created_at: row.createdAt,
  sent_at: row.sentAt,
});

export const messageRoutes = createRouter()
  .openapi(listMessages, async (c) => {
    const { cursor, limit, status, stream, to, tag, created_after, created_before } = c.req.valid("query");
    const filters = { status, stream, to, tag, createdAfter: created_after, createdBefore: created_before };
    const rows = await findMessages(c.var.ctx.db, c.get("auth").account.id, filters, { cursor, limit });
    return c.json(pageOf(rows, limit, summary), 200);
  })
  .openapi(getMessage, async (c) => {
    const found = await findMessage(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!found) throw notFound("Message");
    const { message, recipients, timeline } = found;
    const readsInbound = keyReadsInbound(c.get("auth").apiKey);
    return c.json(
      {
        ...summary(message),
        reply_to: message.replyTo,
        recipients: recipients.map((recipient) => ({
          email: recipient.email,
          status: recipient.status,
          smtp_response: recipient.smtpResponse,
          opens: recipient.opens,
          clicks: recipient.clicks,
          opened_at: recipient.openedAt,
          clicked_at: recipient.clickedAt,
        })),
        attempts: message.attempts,
        smtp_response: message.smtpResponse,
        next_attempt_at: message.status === "deferred" ? message.nextAttemptAt : null,
        events: timeline.map((event) => ({
          id: event.id,
          type: event.type,
          created_at: event.createdAt,
          data: replyWordsFor(readsInbound, event.type, event.data),
        })),
      },
      200,
    );
  })
  .openapi(getMessageContent, async (c) => {
    const id = c.req.valid("param").id;
    const raw = sentOrThrow(await findSentSource(c.var.ctx, c.get("auth").account.id, id));
    return c.json({ id, ...(await sentContent(await raw.arrayBuffer())) }, 200);
  })
  .openapi(getMessageRaw, async (c) => {
    const raw = sentOrThrow(await findSentSource(c.var.ctx, c.get("auth").account.id, c.req.valid("param").id));
    return c.body(raw.body, 200, { "Content-Type": "message/rfc822" });
  })
  .openapi(rescheduleMessageRoute, async (c) => {
    const outcome = await rescheduleMessage(c.var.ctx, callerOf(c.get("auth")), c.req.valid("param").id, new Date(c.req.valid("json").scheduled_at));
    if (outcome.kind === "invalid") throw validationError(outcome.errors);
    if (outcome.kind !== "rescheduled") throw scheduleRefusalError(outcome);
    return c.json(outcome.message, 200);
  })
  .openapi(cancelMessageRoute, async (c) => {
    const outcome = await cancelMessage(c.var.ctx, callerOf(c.get("auth")), c.req.valid("param").id);
    if (outcome.kind !== "cancelled") throw scheduleRefusalError(outcome);
    return c.json(outcome.message, 200);
  });
