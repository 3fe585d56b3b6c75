// `{base}/compat/postmark`: what the postmark Node client calls, answered in Postmark's shapes. Point the client here
// with `new ServerClient(key, { useHttps, requestHost: "<host>/compat/postmark" })`; the server token is a Mailforge
// API key. docs/migrating.md.

import { bounceType } from "../../domain/webhooks/formats/postmark";
import type { Context } from "hono";
import { eventsOfTypes } from "../../domain/events/of-type";
import { batchLimit } from "../../domain/sending/accept";
import { loadContent } from "../../domain/sending/content";
import type { SendRequest } from "../../domain/sending/input";
import { findMessage, listMessages, recipientsOfMessages } from "../../domain/sending/messages";
import { findTemplateByIdOrName, listTemplates } from "../../domain/templates/templates";
import { validationError } from "../../errors";
import { createRouter, jsonBody, jsonResponse, z } from "../../lib/openapi";
import { compatBodyLimit } from "../../middleware/request";
import type { AppEnv } from "../../types";
import { acceptSends, checkSendRequests, PeerError, peerErrorHandler, peerKeyAuth, peerRoute } from "../shared";
import {
  mailboxes,
  messageEventType,
  notSupported,
  outboundStatus,
  postmarkCodes,
  postmarkError,
  PostmarkEmailSchema,
  PostmarkErrorSchema,
  postmarkFieldMessage,
  PostmarkTemplatedEmailSchema,
  renderPostmarkError,
  templateNameOf,
  toSendRequest,
  toTemplatedSendRequest,
  type PostmarkTemplatedEmail,
} from "./translate";

const peer = {
  security: { postmarkServerToken: [] },
  errors: jsonResponse(PostmarkErrorSchema, "An error as Postmark gives it: `{ErrorCode, Message}` with HTTP 401, 422, 429 or 5xx"),
  features: ["email_api", "smtp_relay"] as ("email_api" | "smtp_relay")[],
};
const tags = ["Postmark compatibility"];

const SendResultSchema = z
  .object({
    To: z.string().optional(),
    SubmittedAt: z.string().optional(),
    MessageID: z.string().optional(),
    ErrorCode: z.number().int(),
    Message: z.string(),
  })
  .openapi("PostmarkSendResult");

const sendRoute = <T extends z.ZodType>(path: string, summary: string, body: T, description: string, batch = false) =>
  peerRoute(
    "send",
    {
      method: "post",
      path,
      tags,
      summary,
      description,
      request: { body: jsonBody(body) },
      responses: {
        200: batch
          ? jsonResponse(z.array(SendResultSchema), "One result per message, in order (ErrorCode 0: accepted)")
          : jsonResponse(SendResultSchema, "Accepted (ErrorCode 0)"),
      },
    },
    peer,
  );

const pipeline =
  "Sent through the same pipeline as POST /api/v1/send: charged, suppressed, limited and recorded the same way. " +
  "`MessageStream: broadcast` is the broadcast stream, anything else but `outbound` is refused (ErrorCode 1235).";
const perMessage = `At most ${batchLimit} messages. A message that is invalid gets its own ErrorCode in the answer and the others are sent; a refusal of the whole batch (credits, an unverified sender) is a 422.`;

const sendEmail = sendRoute("/email", "Send an email (Postmark's POST /email)", PostmarkEmailSchema, pipeline);
const sendBatch = sendRoute(
  "/email/batch",
  "Send a batch (Postmark's POST /email/batch)",
  z.array(PostmarkEmailSchema).min(1).openapi("PostmarkBatch"),
  `${pipeline} ${perMessage}`,
  true,
);
const sendWithTemplate = sendRoute(
  "/email/withTemplate",
  "Send with a template (Postmark's POST /email/withTemplate)",
  PostmarkTemplatedEmailSchema,
  `${pipeline} TemplateAlias (or TemplateId) names a Mailforge template by id or name; TemplateModel's values fill its {{placeholders}}.`,
);
const sendBatchWithTemplates = sendRoute(
  "/email/batchWithTemplates",
  "Send a batch with templates (Postmark's POST /email/batchWithTemplates)",
  z
    .object({ Messages: z.array(PostmarkTemplatedEmailSchema).min(1) })
    .strict()
    .openapi("PostmarkTemplatedBatch"),
  `${pipeline} ${perMessage}`,
  true,
);

const pageQuery = {
  count: z.coerce.number().int().min(1).max(500),
  offset: z.coerce.number().int().min(0).max(500),
};
// Pages are read up to offset + count: Mailforge's lists are keyset-paginated, so an offset costs its rows.
const pageWindow = 500;

const OutboundMessageSchema = z
  .object({
    MessageID: z.string(),
    MessageStream: z.string(),
    Tag: z.string(),
    To: z.array(z.object({ Email: z.string(), Name: z.string() })),
    Cc: z.array(z.object({ Email: z.string(), Name: z.string() })),
    Bcc: z.array(z.object({ Email: z.string(), Name: z.string() })),
    Recipients: z.array(z.string()),
    ReceivedAt: z.string(),
    From: z.string(),
    Subject: z.string(),
    Attachments: z.array(z.string()),
    Status: z.string(),
    TrackOpens: z.boolean(),
    TrackLinks: z.string(),
    Metadata: z.record(z.string(), z.string()),
    Sandboxed: z.boolean(),
  })
  .openapi("PostmarkOutboundMessage");

const listOutbound = peerRoute(
  "send",
  {
    method: "get",
    path: "/messages/outbound",
    tags,
    summary: "Search sent messages (Postmark's GET /messages/outbound)",
    description:
      "Filters: recipient, tag, status (queued, sent), messagestream. `TotalCount` counts the messages up to this page, plus one when more follow. " +
      `offset + count is at most ${pageWindow}.`,
    request: {
      query: z
        .object({
          ...pageQuery,
          recipient: z.string().max(320).optional(),
          tag: z.string().max(64).optional(),
          status: z.enum(["queued", "sent"]).optional(),
          messagestream: z.enum(["outbound", "broadcast"]).optional(),
        })
        .strict(),
    },
    responses: {
      200: jsonResponse(z.object({ TotalCount: z.number().int(), Messages: z.array(OutboundMessageSchema.omit({ Cc: true, Bcc: true })) }), "A page"),
    },
  },
  peer,
);

const MessageEventSchema = z.object({ Recipient: z.string(), Type: z.string(), ReceivedAt: z.string(), Details: z.record(z.string(), z.unknown()) });

const messageDetails = peerRoute(
  "send",
  {
    method: "get",
    path: "/messages/outbound/{id}/details",
    tags,
    summary: "One sent message with its events (Postmark's GET /messages/outbound/{id}/details)",
    request: { params: z.object({ id: z.string().min(1).max(64) }) },
    responses: {
      200: jsonResponse(
        OutboundMessageSchema.extend({ HtmlBody: z.string(), TextBody: z.string(), MessageEvents: z.array(MessageEventSchema) }).openapi(
          "PostmarkOutboundMessageDetails",
        ),
        "The message",
      ),
    },
  },
  peer,
);

const listBounces = peerRoute(
  "send",
  {
    method: "get",
    path: "/bounces",
    tags,
    summary: "Bounces (Postmark's GET /bounces)",
    description: `Newest first. \`TotalCount\` counts the bounces up to this page, plus one when more follow; offset + count is at most ${pageWindow}.`,
    request: { query: z.object(pageQuery).strict() },
    responses: {
      200: jsonResponse(
        z.object({
          TotalCount: z.number().int(),
          Bounces: z.array(
            z.object({
              ID: z.string(),
              Type: z.string(),
              TypeCode: z.number().int(),
              Name: z.string(),
              Tag: z.string(),
              MessageID: z.string().nullable(),
              MessageStream: z.string(),
              Description: z.string(),
              Details: z.string(),
              Email: z.string(),
              From: z.string(),
              BouncedAt: z.string(),
              DumpAvailable: z.boolean(),
              Inactive: z.boolean(),
              CanActivate: z.boolean(),
              Subject: z.string(),
            }),
          ),
        }),
        "A page",
      ),
    },
  },
  peer,
);

const listTemplatesRoute = peerRoute(
  "send",
  {
    method: "get",
    path: "/templates",
    tags,
    summary: "Templates (Postmark's GET /templates)",
    description: "`Alias` is the template's name, which TemplateAlias accepts as well as its id.",
    request: {
      query: z.object({ ...pageQuery, templateType: z.enum(["Standard", "All"]).optional(), layoutTemplate: z.string().optional() }).strict(),
    },
    responses: {
      200: jsonResponse(
        z.object({
          TotalCount: z.number().int(),
          Templates: z.array(
            z.object({
              Active: z.boolean(),
              TemplateId: z.string(),
              Name: z.string(),
              Alias: z.string(),
              TemplateType: z.string(),
              LayoutTemplate: z.string().nullable(),
            }),
          ),
        }),
        "A page",
      ),
    },
  },
  peer,
);

type SendResult = z.infer<typeof SendResultSchema>;

const errorResult = (error: unknown): SendResult => {
  if (error instanceof PeerError && error.peerName !== undefined) return { ErrorCode: Number(error.peerName), Message: error.message };
  if (error instanceof PeerError) return { ErrorCode: postmarkCodes.invalidEmailRequest, Message: error.message };
  throw error;
};

/**
 * Postmark's batches answer per message: each message is translated and checked on its own, those that pass are sent
 * together (all or none, as POST /send/batch), and the answer keeps the order of the request.
 */
async function sendEach(c: Context<AppEnv>, translate: (index: number) => Promise<Record<string, unknown>>, count: number): Promise<SendResult[]> {
  if (count > batchLimit) throw postmarkError("validation_failed", 410, `At most ${batchLimit} messages in a batch.`);
  const results: (SendResult | undefined)[] = new Array(count).fill(undefined);
  const candidates: { index: number; request: Record<string, unknown> }[] = [];
  for (let index = 0; index < count; index++) {
    try {
      candidates.push({ index, request: await translate(index) });
    } catch (error) {
      results[index] = errorResult(error);
    }
  }
  const { requests, errors } = checkSendRequests(candidates.map((candidate) => candidate.request));
  const valid = candidates.filter((_, position) => !errors.has(position));
  for (const [position, fields] of errors) {
    results[candidates[position]!.index] = { ErrorCode: postmarkCodes.invalidEmailRequest, Message: postmarkFieldMessage(fields) };
  }
  if (requests.length > 0) {
    const { accepted } = await acceptSends(c, requests, { batch: true });
    accepted.forEach((message, position) => {
      results[valid[position]!.index] = submitted(message.id, requests[position]!);
    });
  }
  return results.map((result) => result!);
}

function submitted(id: string, request: SendRequest): SendResult {
  const to = typeof request.to === "string" ? request.to : request.to.join(", ");
  return { To: to, SubmittedAt: new Date().toISOString(), MessageID: id, ErrorCode: 0, Message: "OK" };
}

async function sendOne(c: Context<AppEnv>, request: Record<string, unknown>): Promise<SendResult> {
  const { requests, errors } = checkSendRequests([request]);
  if (errors.size > 0) throw validationError(errors.get(0)!);
  const { accepted } = await acceptSends(c, requests, { batch: false });
  return submitted(accepted[0]!.id, requests[0]!);
}

async function templatedRequest(c: Context<AppEnv>, email: PostmarkTemplatedEmail) {
  const name = templateNameOf(email);
  const template = await findTemplateByIdOrName(c.env.DB, c.get("auth").account.id, name);
  if (!template)
    throw postmarkError("not_found", postmarkCodes.templateNotFound, `The template '${name}' was not found (give a template's id or name).`);
  return toTemplatedSendRequest(email, template.id);
}

function checkWindow(page: { offset: number; count: number }) {
  if (page.offset + page.count > pageWindow) {
    throw postmarkError("validation_failed", postmarkCodes.invalidEmailRequest, `offset + count may be at most ${pageWindow}.`);
  }
}

/** Up to offset + count rows of a keyset list, the page that Postmark's offset names, and its TotalCount. */
function offsetPage<T>(rows: T[], page: { offset: number; count: number }) {
  checkWindow(page);
  const items = rows.slice(page.offset, page.offset + page.count);
  return { items, total: Math.min(rows.length, page.offset + page.count) + (rows.length > page.offset + page.count ? 1 : 0) };
}

const postmarkStream = (stream: string) => (stream === "broadcast" ? "broadcast" : "outbound");

export const postmarkRoutes = createRouter();
postmarkRoutes.openAPIRegistry.registerComponent("securitySchemes", "postmarkServerToken", {
  type: "apiKey",
  in: "header",
  name: "X-Postmark-Server-Token",
  description: "A Mailforge API key, where Postmark's client sends its server token",
});
postmarkRoutes.onError(peerErrorHandler(renderPostmarkError));
postmarkRoutes.use("*", compatBodyLimit);
postmarkRoutes.use(
  "*",
  peerKeyAuth({
    keyOf: (c) => c.req.header("X-Postmark-Server-Token")?.trim() || undefined,
    missing: () => postmarkError("unauthorized", postmarkCodes.invalidToken, "Request does not contain a valid Server token."),
    invalid: () => postmarkError("unauthorized", postmarkCodes.invalidToken, "The Server token is not a valid Mailforge API key."),
    cachedRoute: (method, path) => method === "POST" && /\/email(\/|$)/.test(path),
  }),
);

postmarkRoutes
  .openapi(sendEmail, async (c) => c.json(await sendOne(c, toSendRequest(c.req.valid("json"))), 200))
  .openapi(sendBatch, async (c) => {
    const emails = c.req.valid("json");
    return c.json(await sendEach(c, async (index) => toSendRequest(emails[index]!), emails.length), 200);
  })
  .openapi(sendWithTemplate, async (c) => c.json(await sendOne(c, await templatedRequest(c, c.req.valid("json"))), 200))
  .openapi(sendBatchWithTemplates, async (c) => {
    const { Messages } = c.req.valid("json");
    return c.json(await sendEach(c, (index) => templatedRequest(c, Messages[index]!), Messages.length), 200);
  })
  .openapi(listOutbound, async (c) => {
    const query = c.req.valid("query");
    checkWindow(query);
    const rows = await listMessages(
      c.env.DB,
      c.get("auth").account.id,
      {
        to: query.recipient,
        tag: query.tag,
        status: query.status,
        stream: query.messagestream === undefined ? undefined : query.messagestream === "broadcast" ? "broadcast" : "transactional",
      },
      { limit: Math.min(query.offset + query.count, pageWindow) },
    );
    const { items, total } = offsetPage(rows, query);
    const recipients = await recipientsOfMessages(
      c.env.DB,
      c.get("auth").account.id,
      items.map((message) => message.id),
    );
    return c.json(
      {
        TotalCount: total,
        Messages: items.map((message) => ({
          MessageID: message.id,
          MessageStream: postmarkStream(message.stream),
          Tag: message.tags[0] ?? "",
          // The list reads no content (it can be in R2), so it cannot tell To from Cc and Bcc: the details can.
          To: [],
          Recipients: (recipients.get(message.id) ?? []).map((recipient) => recipient.email),
          ReceivedAt: message.createdAt,
          From: message.fromName ? `${message.fromName} <${message.fromAddress}>` : message.fromAddress,
          Subject: message.subject,
          Attachments: [],
          Status: outboundStatus(message.status),
          TrackOpens: message.trackOpens,
          TrackLinks: message.trackClicks ? "HtmlAndText" : "None",
          Metadata: message.metadata,
          Sandboxed: message.testMode,
        })),
      },
      200,
    );
  })
  .openapi(messageDetails, async (c) => {
    const found = await findMessage(c.env.DB, c.get("auth").account.id, c.req.valid("param").id);
    if (!found) throw postmarkError("not_found", postmarkCodes.messageNotFound, "This message was not found.");
    const { message, recipients, timeline } = found;
    const content = await loadContent(c.env, message);
    const compose = content.kind === "compose" ? content : undefined;
    return c.json(
      {
        MessageID: message.id,
        MessageStream: postmarkStream(message.stream),
        Tag: message.tags[0] ?? "",
        To: mailboxes(compose?.to ?? recipients.map((recipient) => recipient.email)),
        Cc: mailboxes(compose?.cc ?? []),
        Bcc: mailboxes(compose?.bcc ?? []),
        Recipients: recipients.map((recipient) => recipient.email),
        ReceivedAt: message.createdAt,
        From: message.fromName ? `${message.fromName} <${message.fromAddress}>` : message.fromAddress,
        Subject: message.subject,
        HtmlBody: compose?.html ?? "",
        TextBody: compose?.text ?? "",
        Attachments: (compose?.attachments ?? []).map((attachment) => attachment.filename),
        Status: outboundStatus(message.status),
        TrackOpens: message.trackOpens,
        TrackLinks: message.trackClicks ? "HtmlAndText" : "None",
        Metadata: message.metadata,
        Sandboxed: message.testMode,
        MessageEvents: timeline.flatMap((event) => {
          const type = messageEventType[event.type];
          if (!type) return [];
          const { recipient, ...details } = event.data as { recipient?: string } & Record<string, unknown>;
          return [{ Recipient: recipient ?? "", Type: type, ReceivedAt: event.createdAt, Details: details }];
        }),
      },
      200,
    );
  })
  .openapi(listBounces, async (c) => {
    const query = c.req.valid("query");
    checkWindow(query);
    const rows = await eventsOfTypes(c.env.DB, c.get("auth").account.id, ["relay.bounced", "bounced"], { offset: query.offset, limit: query.count });
    const more = rows.length > query.count;
    return c.json(
      {
        TotalCount: query.offset + Math.min(rows.length, query.count) + (more ? 1 : 0),
        Bounces: rows.slice(0, query.count).map((row) => {
          const data = row.data as {
            recipient?: string;
            bounce_type?: keyof typeof bounceType;
            smtp_response?: string | null;
            subject?: string;
            from?: string;
            message_id?: string;
            stream?: string;
            tags?: string[];
          };
          const kind = bounceType[data.bounce_type ?? "hard"];
          return {
            ID: row.id,
            ...kind,
            Name: kind.Type,
            Tag: data.tags?.[0] ?? "",
            MessageID: data.message_id ?? row.subjectId,
            MessageStream: postmarkStream(data.stream ?? "transactional"),
            Description: data.smtp_response ?? "",
            Details: data.smtp_response ?? "",
            Email: data.recipient ?? "",
            From: data.from ?? "",
            BouncedAt: row.createdAt,
            DumpAvailable: false,
            // A hard bounce suppresses the address (docs/suppressions.md), which is what Postmark calls inactive.
            Inactive: data.bounce_type === "hard",
            CanActivate: false,
            Subject: data.subject ?? "",
          };
        }),
      },
      200,
    );
  })
  .openapi(listTemplatesRoute, async (c) => {
    const query = c.req.valid("query");
    if (query.layoutTemplate !== undefined) throw notSupported("Layout templates");
    checkWindow(query);
    const rows = await listTemplates(c.env.DB, c.get("auth").account.id, { limit: Math.min(query.offset + query.count, pageWindow) });
    const { items, total } = offsetPage(rows, query);
    return c.json(
      {
        TotalCount: total,
        Templates: items.map((template) => ({
          Active: true,
          TemplateId: template.id,
          Name: template.name,
          Alias: template.name,
          TemplateType: "Standard",
          LayoutTemplate: null,
        })),
      },
      200,
    );
  });

// Everything else Postmark has (servers, webhooks, stats, inbound, suppressions, …) is answered in its shape.
// Postmark's own unknown paths are a 404, which its client turns into a plain PostmarkError.
postmarkRoutes.all("*", (c) =>
  c.json(
    { ErrorCode: 404, Message: `${c.req.method} ${c.req.path} is not supported by Mailforge's Postmark compatibility (docs/migrating.md).` },
    404,
  ),
);
