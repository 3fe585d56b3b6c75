import {
  cancelCampaign,
  campaignCounters,
  createCampaign,
  deleteDraft,
  findCampaign,
  listCampaigns,
  sendCampaign,
  serializeCampaign,
  updateDraft,
  type CampaignStatus,
} from "../domain/campaigns/campaigns";
import { listSkips } from "../domain/campaigns/hygiene";
import { campaignChangeInput, campaignFields, campaignInput, newCampaignFields, sendCampaignInput } from "../domain/campaigns/input";
import { AppError, notFound } from "../errors";
import { campaignStatuses, campaignVerificationModes } from "../db/schema";
import { savedOrThrow, sendRefusal } from "../http/campaigns";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { pageOf } from "../lib/pagination";
import { CountsSchema } from "./reports";

const CountersSchema = CountsSchema.extend({
  recipients: z.number().int().openapi({ description: "Messages materialised (one per recipient) so far" }),
  pending: z.number().int().openapi({ description: "Not final yet: waiting for the fan-out, queued, being sent or retrying" }),
  cancelled: z.number().int().openapi({ description: "Skipped because the campaign was cancelled before they were sent" }),
  unknown: z.number().int().openapi({ description: "Interrupted after a possible hand-off; not retried, not charged, not counted as sent" }),
  skipped: z.object({ invalid: z.number().int(), risky: z.number().int(), unknown: z.number().int() }).openapi({
    description:
      "Audience contacts the campaign's `verification` left out (no message, no sending credit), by their result; unknown includes not verified",
  }),
}).openapi("CampaignCounters", {
  description:
    "recipients, pending, cancelled and unknown from the campaign's messages; every other counter is its report's total (GET /reports/campaigns/{id}, " +
    "same definitions: docs/reports.md), so the two always agree.",
});

const CampaignSchema = z
  .object({
    id: z.string().openapi({ example: "cmp_7Hq2mX9cL1vB4nZ8tR3pKd" }),
    name: z.string(),
    status: z.enum(campaignStatuses).openapi({
      description:
        "draft → sending (sent now) or scheduled (send_at) → sent; cancelled (POST /cancel while scheduled or sending); failed (its sender or its domain went away, or its fan-out could not start; " +
        "messages not yet sent are cancelled and the unused reservation released, as for a cancel, and completed_at is set once settled)",
    }),
    sender_id: z.string().nullable(),
    subject: z.string().nullable(),
    preheader: z.string().nullable(),
    html: z.string().nullable(),
    text: z.string().nullable(),
    template_id: z.string().nullable(),
    variables: z.record(z.string(), z.string()),
    tags: z.array(z.string()),
    lists: z.array(z.string()),
    segments: z.array(z.string()),
    exclude_lists: z.array(z.string()),
    track_opens: z.boolean().openapi({ description: "Add an open pixel to the html part of each message (default true); see docs/tracking.md" }),
    track_clicks: z
      .boolean()
      .openapi({ description: "Route the html part's http(s) links through a click redirect (default true); text keeps its links" }),
    verification: z
      .enum(campaignVerificationModes)
      .openapi({ description: "Pre-send hygiene: `off`, `skip_invalid` or `valid_only` (docs/campaigns.md)" }),
    verification_job_id: z
      .string()
      .nullable()
      .openapi({ description: "The bulk verification job of the pre-send checks (GET /verify/{id}); null when none was needed" }),
    send_at: Timestamp.nullable(),
    started_at: Timestamp.nullable(),
    completed_at: Timestamp.nullable(),
    credits_reserved: z.number().int().openapi({ description: "Sending credits reserved at POST /send for the audience counted then" }),
    counters: CountersSchema,
    outcome: z
      .enum(["delivered", "partially_delivered", "undelivered"])
      .nullable()
      .openapi({
        description:
          "How the finished campaign went (null until completed_at): delivered when the receiving servers accepted every recipient not cancelled, " +
          "undelivered when they accepted none (all bounced, failed, were suppressed or unknown), otherwise partially_delivered",
      }),
    error: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Campaign");

const SendCampaignResultSchema = z
  .object({
    id: z.string(),
    status: z.enum(["sending", "scheduled"]),
    recipients: z
      .number()
      .int()
      .openapi({ description: "Audience counted now; the audience is materialised when sending starts, capped at this number" }),
    credits_reserved: z.number().int(),
    send_at: Timestamp,
  })
  .openapi("SendCampaignResult");

const ListQuery = PaginationQuery.extend({
  status: z
    .enum(campaignStatuses)
    .optional()
    .openapi({ param: { name: "status", in: "query" } }),
});

const notDraft = errorResponse("`campaign_not_draft`: only a draft can be changed, deleted or sent");
const feature = { features: ["campaigns" as const] };

const createRoute = keyedRoute(
  "campaigns",
  {
    method: "post",
    path: "/campaigns",
    tags: ["Campaigns"],
    summary: "Create a campaign (a draft)",
    description:
      "Needs the account feature `campaigns`. Every list, segment, sender and template named must be the account's (422 names each bad id).",
    request: { body: jsonBody(campaignInput) },
    responses: { 201: jsonResponse(CampaignSchema, "The draft") },
  },
  { ...feature, liveKeyOnly: "Creating a campaign" },
);

const listRoute = keyedRoute(
  "campaigns",
  {
    method: "get",
    path: "/campaigns",
    tags: ["Campaigns"],
    summary: "Campaigns, newest first",
    request: { query: ListQuery },
    responses: { 200: jsonResponse(paginated(CampaignSchema, "CampaignPage"), "A page of campaigns") },
  },
  feature,
);

const getRoute = keyedRoute(
  "campaigns",
  {
    method: "get",
    path: "/campaigns/{id}",
    tags: ["Campaigns"],
    summary: "One campaign with its status and counters",
    request: { params: IdParam("cmp") },
    responses: { 200: jsonResponse(CampaignSchema, "The campaign"), 404: errorResponse("No such campaign") },
  },
  feature,
);

const updateRoute = keyedRoute(
  "campaigns",
  {
    method: "patch",
    path: "/campaigns/{id}",
    tags: ["Campaigns"],
    summary: "Change a draft",
    request: { params: IdParam("cmp"), body: jsonBody(campaignChangeInput) },
    responses: { 200: jsonResponse(CampaignSchema, "The draft"), 404: errorResponse("No such campaign"), 409: notDraft },
  },
  { ...feature, liveKeyOnly: "Changing a campaign" },
);

const deleteRoute = keyedRoute(
  "campaigns",
  {
    method: "delete",
    path: "/campaigns/{id}",
    tags: ["Campaigns"],
    summary: "Delete a draft",
    request: { params: IdParam("cmp") },
    responses: {
      200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"),
      404: errorResponse("No such campaign"),
      409: notDraft,
    },
  },
  { ...feature, liveKeyOnly: "Deleting a campaign" },
);

const sendRoute = keyedRoute(
  "campaigns",
  {
    method: "post",
    path: "/campaigns/{id}/send",
    tags: ["Campaigns"],
    summary: "Send a draft now, or schedule it",
    description:
      "Counts the audience ((lists ∪ segments) − exclude_lists − contacts not subscribed − suppressed addresses, one per address) and reserves that many " +
      "sending credits. Each recipient sent turns a reserved credit into a charge; recipients that bounce, fail or are skipped release theirs; nothing " +
      "stays reserved once the campaign completes. Every message carries List-Unsubscribe (one-click, RFC 8058) and a visible unsubscribe link " +
      "(`{{unsubscribe_url}}`, or a footer when the body lacks it). Recipients count against the daily sending limit as they are enqueued; past it " +
      "the campaign waits for the next UTC day. Needs a live key.",
    // Optional: no body, or an empty one, sends now.
    request: { params: IdParam("cmp"), body: { ...jsonBody(sendCampaignInput), required: false } },
    responses: {
      202: jsonResponse(SendCampaignResultSchema, "Sending, or scheduled"),
      402: errorResponse(
        "`insufficient_credits`: fewer sending credits available than recipients, or (with `verification`) fewer verification credits than addresses to check; nothing was reserved or charged",
      ),
      403: errorResponse("`domain_reputation_hold`: the sender's domain is held for its bounce or complaint rate (GET /domains/{id})"),
      404: errorResponse("No such campaign"),
      409: notDraft,
      422: errorResponse("No verified sender, no subject or body, an empty audience, or a bad send_at"),
      503: errorResponse("The fan-out could not be started; the campaign failed and its credits were released"),
    },
  },
  { ...feature, liveKeyOnly: "Sending a campaign" },
);

const cancelRoute = keyedRoute(
  "campaigns",
  {
    method: "post",
    path: "/campaigns/{id}/cancel",
    tags: ["Campaigns"],
    summary: "Cancel a scheduled or sending campaign",
    description:
      "Stops the fan-out: messages not yet sent are cancelled and their reserved credits released. Messages already handed to the provider stay sent.",
    request: { params: IdParam("cmp") },
    responses: {
      200: jsonResponse(CampaignSchema, "The cancelled campaign"),
      404: errorResponse("No such campaign"),
      409: errorResponse("`conflict`: only a scheduled or sending campaign can be cancelled"),
    },
  },
  { ...feature, liveKeyOnly: "Cancelling a campaign" },
);

const SkipSchema = z
  .object({
    contact_id: z.string(),
    email: z.string(),
    result: z.enum(["invalid", "risky", "unknown"]).openapi({ description: "The contact's verification result then; unknown also when it had none" }),
    reason: z.string().openapi({ example: "mailbox_not_found (invalid), checked 2026-11-22" }),
    created_at: Timestamp,
  })
  .openapi("CampaignSkip");

const skippedRoute = keyedRoute(
  "campaigns",
  {
    method: "get",
    path: "/campaigns/{id}/skipped",
    tags: ["Campaigns"],
    summary: "Contacts the campaign's verification left out, and why",
    description:
      "One row per audience contact that `skip_invalid` or `valid_only` did not send to (no message was created and no sending credit spent), newest first.",
    request: { params: IdParam("cmp"), query: PaginationQuery },
    responses: { 200: jsonResponse(paginated(SkipSchema, "CampaignSkipPage"), "A page of skipped contacts"), 404: errorResponse("No such campaign") },
  },
  feature,
);

/**
 * Campaigns are live-only (a test key cannot send one), so a test key cannot change them either: a leaked `sk_test_`
 * key must not rewrite, delete or cancel what a live key sends.
 */
export const campaignRoutes = createRouter()
  .openapi(createRoute, async (c) => {
    const body = c.req.valid("json");
    const campaign = savedOrThrow(await createCampaign(c.var.ctx.db, c.get("auth").account.id, newCampaignFields(body)));
    return c.json(serializeCampaign(campaign), 201);
  })
  .openapi(listRoute, async (c) => {
    const query = c.req.valid("query");
    const rows = await listCampaigns(c.var.ctx.db, c.get("auth").account.id, {
      cursor: query.cursor,
      limit: query.limit,
      status: query.status as CampaignStatus | undefined,
    });
    const counters = await campaignCounters(
      c.var.ctx.db,
      rows.slice(0, query.limit).map((row) => row.id),
    );
    return c.json(
      pageOf(rows, query.limit, (row) => serializeCampaign(row, counters.get(row.id))),
      200,
    );
  })
  .openapi(getRoute, async (c) => {
    const campaign = await findCampaign(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!campaign) throw notFound("Campaign");
    const counters = await campaignCounters(c.var.ctx.db, [campaign.id]);
    return c.json(serializeCampaign(campaign, counters.get(campaign.id)), 200);
  })
  .openapi(updateRoute, async (c) => {
    const body = c.req.valid("json");
    const campaign = savedOrThrow(await updateDraft(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id, campaignFields(body)));
    return c.json(serializeCampaign(campaign), 200);
  })
  .openapi(deleteRoute, async (c) => {
    const { id } = c.req.valid("param");
    const outcome = await deleteDraft(c.var.ctx.db, c.get("auth").account.id, id);
    if (outcome.kind === "not_found") throw notFound("Campaign");
    if (outcome.kind === "not_draft") throw new AppError("campaign_not_draft", `The campaign is ${outcome.status}; only a draft can be deleted`);
    return c.json({ id, deleted: true as const }, 200);
  })
  .openapi(sendRoute, async (c) => {
    const { send_at: sendAt } = c.req.valid("json");
    const outcome = await sendCampaign(
      c.var.ctx,
      c.get("auth").account.id,
      c.req.valid("param").id,
      sendAt === undefined ? undefined : new Date(sendAt),
    );
    if (outcome.kind !== "started") throw sendRefusal(outcome);
    const { campaign } = outcome;
    const status = campaign.status === "scheduled" ? ("scheduled" as const) : ("sending" as const);
    return c.json(
      { id: campaign.id, status, recipients: outcome.recipients, credits_reserved: campaign.creditsReserved, send_at: campaign.sendAt! },
      202,
    );
  })
  .openapi(skippedRoute, async (c) => {
    const campaign = await findCampaign(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!campaign) throw notFound("Campaign");
    const query = c.req.valid("query");
    const rows = await listSkips(c.var.ctx.db, campaign.id, query);
    return c.json(
      pageOf(rows, query.limit, (row) => ({
        contact_id: row.contactId,
        email: row.email,
        result: row.result,
        reason: row.reason,
        created_at: row.createdAt,
      })),
      200,
    );
  })
  .openapi(cancelRoute, async (c) => {
    const outcome = await cancelCampaign(c.var.ctx, c.get("auth").account.id, c.req.valid("param").id);
    if (outcome.kind === "not_found") throw notFound("Campaign");
    if (outcome.kind === "not_cancellable")
      throw new AppError("conflict", `The campaign is ${outcome.status}; only a scheduled or sending campaign can be cancelled`);
    const counters = await campaignCounters(c.var.ctx.db, [outcome.campaign.id]);
    return c.json(serializeCampaign(outcome.campaign, counters.get(outcome.campaign.id)), 200);
  });
