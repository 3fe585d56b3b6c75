import { aiRequestInputSchema } from "../domain/ai/draft";
import { acceptedAnswer, findAiRequest, listAiRequests, serializeAiRequest, submitAiRequest, type AiRequestStatus } from "../domain/ai/requests";
import { aiRequestStatuses } from "../db/schema";
import { AppError, notFound } from "../errors";
import { refusalError } from "../http/refusals";
import { sha256Hex } from "../lib/crypto";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { pageOf } from "../lib/pagination";

const AiCampaignRequestSchema = aiRequestInputSchema.openapi("AiCampaignRequest");

const DraftEmailSchema = z.object({
  subject: z.string(),
  preheader: z.string().nullable(),
  html: z.string().openapi({ description: "Sanitised: no script/style/iframe/object/form, no on* attributes, no javascript:/data: URLs" }),
  text: z.string().openapi({ description: "The model's, or made from the html when it gave none" }),
});

const AiRequestSchema = z
  .object({
    id: z.string().openapi({ example: "air_5Rk2mQ8zX0cV4bN7pL1tY3" }),
    status: z.enum(aiRequestStatuses),
    input: z.record(z.string(), z.unknown()).openapi({ description: "The request as accepted (defaults filled in)" }),
    result: z
      .object({
        variations: z.array(DraftEmailSchema),
        followups: z.array(DraftEmailSchema.extend({ delay_days: z.number().int() })),
      })
      .nullable()
      .openapi({ description: "When completed" }),
    campaign_ids: z.array(z.string()).openapi({ description: "The draft campaigns: the variations in order, then the follow-ups" }),
    error: z.string().nullable().openapi({ description: "Why it failed" }),
    usage: z.object({ input_tokens: z.number().int(), output_tokens: z.number().int() }).nullable(),
    attempts: z.number().int().openapi({ description: "Times the generation was started (provider time-outs, 429 and 5xx are retried)" }),
    created_at: Timestamp,
    updated_at: Timestamp,
    completed_at: Timestamp.nullable().openapi({ description: "When it completed or failed" }),
  })
  .openapi("AiRequest");

const AcceptedSchema = z.object({ id: z.string(), status: z.literal("queued") }).openapi("AiRequestAccepted");

const ListQuery = PaginationQuery.extend({
  status: z
    .enum(aiRequestStatuses)
    .optional()
    .openapi({ param: { name: "status", in: "query" } }),
});

// The drafts are campaigns: an account that cannot use campaigns would get drafts it cannot open.
const features = { features: ["ai" as const, "campaigns" as const] };

const createRoute = keyedRoute(
  "ai",
  {
    method: "post",
    path: "/ai/campaign",
    tags: ["AI drafts"],
    summary: "Queue AI-generated campaign drafts",
    description:
      "Stores the request and queues its generation; poll GET /ai/requests/{id}. When it completes, each variation and each follow-up is a " +
      "campaign in `draft` (no sender, no audience): nothing is scheduled or sent, and no sending credit is touched. Each request counts 1 " +
      "against the account's monthly AI generations (`ai_usage` in GET /me) while it is queued or running and once completed; a failed one " +
      "does not count. Needs a live key. Send `Idempotency-Key` to make retries safe: the same key and body within 24 h replays the first " +
      "response (header `Idempotent-Replayed: true`) without queueing or counting another generation, the same key with another body is a 409.",
    request: {
      body: jsonBody(AiCampaignRequestSchema),
      headers: z.object({ "idempotency-key": z.string().min(1).max(255).optional() }),
    },
    responses: {
      202: jsonResponse(AcceptedSchema, "Queued"),
      403: errorResponse(
        "`ai_quota_exceeded`: this month's AI generations are used up (the message gives the reset date); nothing was queued. " +
          "Also `scope_missing`, `feature_disabled` (the `ai` and `campaigns` features), `live_key_required`",
      ),
      409: errorResponse("Idempotency-Key reused with a different body"),
      503: errorResponse("`ai_not_configured`: this deployment has no AI provider; `upstream_unavailable`: the request could not be queued"),
    },
  },
  // AI drafts are campaigns, which are live-only.
  { ...features, liveKeyOnly: "Requesting AI drafts" },
);

const getRoute = keyedRoute(
  "ai",
  {
    method: "get",
    path: "/ai/requests/{id}",
    tags: ["AI drafts"],
    summary: "One AI request: its status and, once completed, the drafts",
    request: { params: IdParam("air") },
    responses: { 200: jsonResponse(AiRequestSchema, "The request"), 404: errorResponse("No such request in this account") },
  },
  features,
);

const listRoute = keyedRoute(
  "ai",
  {
    method: "get",
    path: "/ai/requests",
    tags: ["AI drafts"],
    summary: "AI requests, newest first",
    request: { query: ListQuery },
    responses: { 200: jsonResponse(paginated(AiRequestSchema, "AiRequestPage"), "A page of requests") },
  },
  features,
);

const dateOf = (iso: string) => iso.slice(0, 10);

export const aiRoutes = createRouter()
  .openapi(createRoute, async (c) => {
    const { account } = c.get("auth");
    const body = c.req.valid("json");
    const key = c.req.valid("header")["idempotency-key"];
    const outcome = await submitAiRequest(
      c.var.ctx,
      account.id,
      body,
      key ? { key, route: "POST /ai/campaign", requestHash: await sha256Hex(JSON.stringify(body)) } : undefined,
    );
    if (outcome.kind === "not_configured")
      throw new AppError("ai_not_configured", `AI drafts are not available on this deployment: ${outcome.reason}`);
    if (outcome.kind === "quota_exceeded") {
      throw new AppError(
        "ai_quota_exceeded",
        `This month's AI generations (${outcome.limit}, counting requests still queued or running) are used up; the quota resets on ${dateOf(outcome.resetsAt)} (UTC)`,
      );
    }
    if (outcome.kind === "queue_unavailable") throw new AppError("upstream_unavailable", "The request could not be queued; retry with back-off");
    if (outcome.kind === "refused") throw refusalError(outcome);
    if (outcome.kind === "replayed") {
      c.header("Idempotent-Replayed", "true");
      return c.json(outcome.answer, 202);
    }
    return c.json(acceptedAnswer(outcome.request.id), 202);
  })
  .openapi(getRoute, async (c) => {
    const request = await findAiRequest(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!request) throw notFound("AI request");
    return c.json(serializeAiRequest(request), 200);
  })
  .openapi(listRoute, async (c) => {
    const query = c.req.valid("query");
    const rows = await listAiRequests(c.var.ctx.db, c.get("auth").account.id, {
      cursor: query.cursor,
      limit: query.limit,
      status: query.status as AiRequestStatus | undefined,
    });
    return c.json(pageOf(rows, query.limit, serializeAiRequest), 200);
  });
