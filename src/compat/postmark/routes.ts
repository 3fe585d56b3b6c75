// `{base}/compat/postmark`: what the postmark Node client calls, answered in Postmark's shapes. Point the client here
// with `new ServerClient(key, { useHttps, requestHost: "<host>/compat/postmark" })`; the server token is a Mailforge
// API key. docs/migrating.md.

import type { Context } from "hono";
import { batchLimit } from "../../domain/sending/accept";
import type { SendRequest } from "../../domain/sending/input";
import { findTemplateByIdOrName } from "../../domain/templates/templates";
import { validationError } from "../../errors";
import { createRouter, jsonBody, jsonResponse, z } from "../../lib/openapi";
import { compatBodyLimit } from "../../middleware/request";
import type { AppEnv } from "../../types";
import { acceptSends, checkSendRequests, PeerError, peerErrorHandler, peerKeyAuth, peerRoute } from "../shared";
import { postmarkReads } from "./reads";
import {
  postmarkCodes,
  postmarkError,
  PostmarkEmailSchema,
  postmarkFieldMessage,
  postmarkPeer as peer,
  postmarkTags as tags,
  PostmarkTemplatedEmailSchema,
  renderPostmarkError,
  templateNameOf,
  toSendRequest,
  toTemplatedSendRequest,
  type PostmarkTemplatedEmail,
} from "./translate";

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
  const template = await findTemplateByIdOrName(c.var.ctx.db, c.get("auth").account.id, name);
  if (!template)
    throw postmarkError("not_found", postmarkCodes.templateNotFound, `The template '${name}' was not found (give a template's id or name).`);
  return toTemplatedSendRequest(email, template.id);
}

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
  });

// Reading back what was sent, and the templates.
postmarkRoutes.route("/", postmarkReads);

// Everything else Postmark has (servers, webhooks, stats, inbound, suppressions, …) is answered in its shape.
// Postmark's own unknown paths are a 404, which its client turns into a plain PostmarkError.
postmarkRoutes.all("*", (c) =>
  c.json(
    { ErrorCode: 404, Message: `${c.req.method} ${c.req.path} is not supported by Mailforge's Postmark compatibility (docs/migrating.md).` },
    404,
  ),
);
