import { acceptMessage } from "../domain/sending/accept";
import { SendRequestSchema, toAcceptInput } from "../domain/sending/input";
import { sha256Hex } from "../lib/crypto";
import { createRouter, errorResponse, jsonBody, jsonResponse, keyedRoute, z } from "../lib/openapi";

const SendAcceptedSchema = z
  .object({
    id: z.string().openapi({ example: "msg_2Yq8Lm4Nc0Zp7Tx1Bv9Rk3" }),
    recipients: z.array(z.object({ email: z.string(), status: z.enum(["queued", "suppressed"]) })),
    credits_charged: z.number().int().openapi({ description: "1 per deliverable recipient; suppressed recipients are free" }),
    status: z.enum(["queued", "suppressed"]),
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
      429: errorResponse("Rate limit or daily sending limit reached; see Retry-After"),
      503: errorResponse("The message could not be queued; nothing was charged. Retry with back-off"),
    },
  },
  { features: ["email_api", "smtp_relay"] },
);

export const sendRoutes = createRouter().openapi(send, async (c) => {
  const body = c.req.valid("json");
  const input = toAcceptInput(body);
  const key = c.req.valid("header")["idempotency-key"];
  const { account, apiKey } = c.get("auth");
  const result = await acceptMessage(
    c.env,
    c.executionCtx,
    { account, testMode: apiKey.mode === "test" },
    input,
    // Test and live keys never share a stored answer: a test key's send must not replay for a live one.
    key ? { key, route: apiKey.mode === "test" ? "POST /send (test)" : "POST /send", requestHash: await sha256Hex(JSON.stringify(body)) } : undefined,
  );
  if (result.replayed) c.header("Idempotent-Replayed", "true");
  return c.json(result.body, 202);
});
