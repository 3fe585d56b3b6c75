// What the postmark client reads back: sent messages (a page of them, one with its events), bounces and templates,
// in Postmark's shapes and its offset paging over Mailforge's keyset lists. Mounted by ./routes.ts, behind its key check.

import { eventsOfTypes } from "../../domain/events/of-type";
import { loadContent } from "../../domain/sending/content";
import { findMessage, listMessages, recipientsOfMessages } from "../../domain/sending/messages";
import { listTemplates } from "../../domain/templates/templates";
import { bounceType } from "../../domain/webhooks/formats/postmark";
import { createRouter, jsonResponse, z } from "../../lib/openapi";
import { peerRoute } from "../shared";
import {
  mailboxes,
  messageEventType,
  notSupported,
  outboundStatus,
  postmarkCodes,
  postmarkError,
  postmarkPeer as peer,
  postmarkTags as tags,
} from "./translate";

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

export const postmarkReads = createRouter()
  .openapi(listOutbound, async (c) => {
    const query = c.req.valid("query");
    checkWindow(query);
    const rows = await listMessages(
      c.var.ctx.db,
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
      c.var.ctx.db,
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
    const found = await findMessage(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
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
    const rows = await eventsOfTypes(c.var.ctx.db, c.get("auth").account.id, ["relay.bounced", "bounced"], {
      offset: query.offset,
      limit: query.count,
    });
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
    const rows = await listTemplates(c.var.ctx.db, c.get("auth").account.id, { limit: Math.min(query.offset + query.count, pageWindow) });
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
