import { acceptMessage, acceptMessages } from "../domain/sending/accept";
import { attachmentBytesOf, SendBatchRequestSchema, SendRequestSchema, toAcceptInput, type SendRequest } from "../domain/sending/input";
import { sendLimits } from "../domain/sending/rules";
import { AppError } from "../errors";
import { acceptRefusalError } from "../http/refusals";
import { sha256Hex } from "../lib/crypto";
import { createRouter, errorResponse, jsonBody, jsonResponse, keyedRoute, z } from "../lib/openapi";

const SendAcceptedSchema = z
  .object({
    id: z.string().openapi({ example: "msg_2Yq8Lm4Nc0Zp7Tx1Bv9Rk3" }),
    recipients: z.array(z.object({ email: z.string(), status: z.enum(["queued", "suppressed"]) })),
    credits_charged: z.number().int().openapi({ description: "1 per deliverable recipient; suppressed recipients are free" }),
    status: z.enum(["queued", "scheduled", "suppressed"]).openapi({ description: "scheduled: it has a scheduled_at and waits for it" }),
    scheduled_at: z.string().optional().openapi({ description: "Only on a scheduled send: when it goes out (UTC)" }),
    test_mode: z.boolean().openapi({ description: "Sent with an sk_test_ key: simulated, never delivered, never charged" }),
  })
  .openapi("SendAccepted");

const send = keyedRoute(
  "send",
  {
    method: "post",
    path: "/send",
    tags: ["Sending"],
    summary: "Send an email",
    description:
      "Accepted messages are charged (1 credit per deliverable recipient), stored and queued. Send `Idempotency-Key` to make retries safe: " +
      "the same key and body within 24 h replays the first response, the same key with another body is a 409. " +
      "Needs the account features `email_api` and `smtp_relay`.",
    request: {
      body: jsonBody(SendRequestSchema),
      headers: z.object({ "idempotency-key": z.string().min(1).max(255).optional() }),
    },
    responses: {
      202: jsonResponse(SendAcceptedSchema, "Accepted"),
      402: errorResponse("Not enough sending credits"),
      403: errorResponse("Scope, feature, or the from domain is not verified in this account"),
      409: errorResponse("Idempotency-Key reused with a different body"),
      413: errorResponse("Attachments larger than 10 MB in total"),
      429: errorResponse(
        "`rate_limited` or `daily_limit_reached`: a limit was reached; `temporarily_rejected`: the message could not be queued just now, nothing was charged. Retry after Retry-After",
      ),
    },
  },
  { features: ["email_api", "smtp_relay"] },
);

const SendBatchAcceptedSchema = z
  .object({ data: z.array(SendAcceptedSchema).openapi({ description: "One result per request, in the order sent" }) })
  .openapi("SendBatchAccepted");

const sendBatch = keyedRoute(
  "send",
  {
    method: "post",
    path: "/send/batch",
    tags: ["Sending"],
    summary: "Send up to 100 emails in one request",
    description:
      "Every request is checked, charged and stored as POST /send does, all or none: one invalid request refuses the batch with 422 " +
      "(error keys start with its index, e.g. `3.to.0`), and a balance short of the whole batch's credits gives 402; nothing is stored or " +
      "charged then. One `Idempotency-Key` covers the whole batch. Needs the account features `email_api` and `smtp_relay`.",
    request: {
      body: jsonBody(SendBatchRequestSchema),
      headers: z.object({ "idempotency-key": z.string().min(1).max(255).optional() }),
    },
    responses: {
      202: jsonResponse(SendBatchAcceptedSchema, "Accepted, one result per request in order"),
      402: errorResponse("Not enough sending credits for the whole batch"),
      403: errorResponse("Scope, feature, or a from domain is not verified in this account"),
      409: errorResponse("Idempotency-Key reused with a different body"),
      413: errorResponse("A request's attachments are larger than 10 MB in total"),
      429: errorResponse(
        "`rate_limited` or `daily_limit_reached`: a limit was reached; `temporarily_rejected`: the messages could not be queued just now, nothing was charged. Retry after Retry-After",
      ),
    },
  },
  { features: ["email_api", "smtp_relay"] },
);

/** The request as acceptMessage takes it; `item` is its index in a batch, named in errors about it. */
export function acceptInputOf(body: SendRequest, item?: number) {
  const attachmentBytes = attachmentBytesOf(body);
  if (attachmentBytes > sendLimits.attachmentBytes) {
    throw new AppError(
      "payload_too_large",
      `${item === undefined ? "" : `Request ${item}: `}Attachments total ${attachmentBytes} bytes; the limit is ${sendLimits.attachmentBytes} bytes (10 MB)`,
    );
  }
  return toAcceptInput(body);
}

export const sendRoutes = createRouter()
  .openapi(send, async (c) => {
    const body = c.req.valid("json");
    const input = acceptInputOf(body);
    const key = c.req.valid("header")["idempotency-key"];
    const { account, apiKey } = c.get("auth");
    const outcome = await acceptMessage(
      c.var.ctx,
      { account, testMode: apiKey.mode === "test" },
      input,
      // Test and live keys never share a stored answer: a test key's send must not replay for a live one.
      key
        ? { key, route: apiKey.mode === "test" ? "POST /send (test)" : "POST /send", requestHash: await sha256Hex(JSON.stringify(body)) }
        : undefined,
    );
    if (outcome.kind !== "accepted") throw acceptRefusalError(outcome);
    if (outcome.replayed) c.header("Idempotent-Replayed", "true");
    return c.json(outcome.body, 202);
  })
  .openapi(sendBatch, async (c) => {
    const body = c.req.valid("json");
    const inputs = body.map((item, index) => acceptInputOf(item, index));
    const key = c.req.valid("header")["idempotency-key"];
    const { account, apiKey } = c.get("auth");
    const outcome = await acceptMessages(
      c.var.ctx,
      { account, testMode: apiKey.mode === "test" },
      inputs,
      key
        ? { key, route: apiKey.mode === "test" ? "POST /send/batch (test)" : "POST /send/batch", requestHash: await sha256Hex(JSON.stringify(body)) }
        : undefined,
    );
    if (outcome.kind !== "accepted") throw acceptRefusalError(outcome);
    if (outcome.replayed) c.header("Idempotent-Replayed", "true");
    return c.json(outcome.body, 202);
  });
