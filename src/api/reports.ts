import { findCampaign } from "../domain/campaigns/campaigns";
import { messageStreams, providers } from "../db/schema";
import { rollupCounters, type RollupCounter } from "../domain/reports/rollups";
import { skipCounts, zeroSkips } from "../domain/campaigns/hygiene";
import { campaignReport, defaultRange, maxRangeDays, overviewReport, rangeLength } from "../domain/reports/reports";
import { notFound } from "../errors";
import { createRouter, errorResponse, IdParam, jsonResponse, keyedRoute, z } from "../lib/openapi";

const counterDescriptions: Record<RollupCounter, string> = {
  sent: "Recipients with a final transport outcome: delivered + hard_bounces + failed",
  delivered: "Accepted by the receiving server (its final 250)",
  hard_bounces: "Refused for good (5xx)",
  soft_bounces: "Deferred (4xx) at least once; each recipient counted once, on its first deferral",
  opens: "Opens by people, every one",
  unique_opens: "Recipients who opened, once each",
  machine_opens: "Opens by privacy proxies, image prefetchers and scanners, counted apart from opens",
  clicks: "Clicks on tracked links, every one",
  unique_clicks: "Recipients who clicked, once each",
  unsubscribes: "Unsubscribed through the message's link",
  complaints: "Marked as spam",
  failed: "Given up after the retries",
  suppressed: "Skipped because the address is suppressed (when sent or when its campaign reached it)",
  replies: "Received mail that answered a sent message (In-Reply-To or References named it; auto-replies not counted), on the day it arrived",
};

export const CountsSchema = z
  .object(
    Object.fromEntries(rollupCounters.map((counter) => [counter, z.number().int().openapi({ description: counterDescriptions[counter] })])) as Record<
      RollupCounter,
      z.ZodNumber
    >,
  )
  .openapi("ReportCounts", { description: "Per recipient; mail sent with test keys (sk_test_) is never counted" });

export const RatesSchema = z
  .object({
    delivery_rate: z.number().openapi({ description: "delivered / sent" }),
    bounce_rate: z.number().openapi({ description: "hard_bounces / sent" }),
    open_rate: z.number().openapi({ description: "unique_opens / delivered" }),
    click_rate: z.number().openapi({ description: "unique_clicks / delivered" }),
    unsubscribe_rate: z.number().openapi({ description: "unsubscribes / delivered" }),
    complaint_rate: z.number().openapi({ description: "complaints / delivered" }),
  })
  .openapi("ReportRates", { description: "Fractions rounded to 4 decimals; 0 when the denominator is 0" });

const isoDate = z.iso.date({ error: "Must be a date YYYY-MM-DD" });

const day = (name: "from" | "to", description: string) =>
  isoDate.optional().openapi({ param: { name, in: "query" }, description, example: name === "from" ? "2026-11-01" : "2026-11-30" });

const dateRangeFields = {
  from: day("from", "First day, UTC (inclusive). Default: 29 days before `to`"),
  to: day("to", "Last day, UTC (inclusive). Default: today"),
};

/** to ≥ from, at most 366 days; the defaults fill in what is left out (30 days ending today, UTC). */
function checkRange(query: { from?: string; to?: string }, ctx: z.RefinementCtx) {
  // Zod runs this even when a date is malformed; that one already has its error.
  if (![query.from, query.to].every((date) => date === undefined || isoDate.safeParse(date).success)) return;
  const range = defaultRange(query);
  if (range.to < range.from) ctx.addIssue({ code: "custom", path: ["to"], message: "Must be on or after `from`" });
  else if (rangeLength(range) > maxRangeDays)
    ctx.addIssue({ code: "custom", path: ["to"], message: `The range may cover at most ${maxRangeDays} days` });
}

/** `from`/`to` of a report: both optional (30 days ending today, UTC), to ≥ from, at most 366 days. */
export const DateRangeQuery = z.object(dateRangeFields).superRefine(checkRange);

const OverviewQuery = z
  .object({
    ...dateRangeFields,
    stream: z
      .enum(messageStreams)
      .optional()
      .openapi({ param: { name: "stream", in: "query" }, description: "Only this stream's mail (every part of the report)" }),
  })
  .superRefine(checkRange);

const OverviewSchema = z
  .object({
    from: z.string().openapi({ example: "2026-11-01" }),
    to: z.string().openapi({ example: "2026-11-30" }),
    totals: CountsSchema,
    rates: RatesSchema,
    providers: z
      .array(CountsSchema.extend({ provider: z.enum(providers), rates: RatesSchema }))
      .openapi({ description: "Every mailbox provider, in this order: gmail, microsoft, yahoo, apple, other" }),
    domains: z
      .array(CountsSchema.extend({ domain: z.string(), rates: RatesSchema }))
      .openapi({ description: "Sending domains (the From address's) with mail in the range, most sent first" }),
    daily: z.array(CountsSchema.extend({ date: z.string() })).openapi({ description: "Every day of the range, in order, zeros included" }),
    streams: z
      .array(CountsSchema.extend({ stream: z.enum(messageStreams), rates: RatesSchema }))
      .openapi({ description: "Transactional and broadcast mail apart, in this order (docs/streams.md)" }),
  })
  .openapi("ReportOverview");

const CampaignReportSchema = z
  .object({
    campaign_id: z.string(),
    topic_id: z.string().nullable().openapi({
      description: "The campaign's subscription topic: its `unsubscribes` left that topic only (null: they left all marketing)",
    }),
    totals: CountsSchema,
    rates: RatesSchema,
    links: z
      .array(z.object({ url: z.string(), clicks: z.number().int(), unique_clicks: z.number().int() }))
      .openapi({ description: "Tracked links of the campaign, most clicked first" }),
    skipped: z
      .object({ invalid: z.number().int(), risky: z.number().int(), unknown: z.number().int() })
      .openapi({ description: "Audience contacts the campaign's verification left out, by result (GET /campaigns/{id}/skipped lists them)" }),
  })
  .openapi("CampaignReport");

const getOverview = keyedRoute("reports", {
  method: "get",
  path: "/reports/overview",
  tags: ["Reports"],
  summary: "Delivery and engagement over a date range",
  description:
    "Totals and rates, per mailbox provider (from the recipient's domain and its MX), per sending domain and per day (UTC). " +
    "Read from daily rollups written with each event, so a report costs the same for a thousand emails as for a million.",
  request: { query: OverviewQuery },
  responses: { 200: jsonResponse(OverviewSchema, "The report") },
});

const getCampaignReport = keyedRoute("reports", {
  method: "get",
  path: "/reports/campaigns/{id}",
  tags: ["Reports"],
  summary: "One campaign's delivery, engagement and link clicks",
  request: { params: IdParam("cmp") },
  responses: { 200: jsonResponse(CampaignReportSchema, "The campaign's report"), 404: errorResponse("No such campaign") },
});

export const reportRoutes = createRouter()
  .openapi(getOverview, async (c) => {
    const query = c.req.valid("query");
    return c.json(await overviewReport(c.var.ctx.db, c.get("auth").account.id, defaultRange(query), query.stream), 200);
  })
  .openapi(getCampaignReport, async (c) => {
    const accountId = c.get("auth").account.id;
    const { id } = c.req.valid("param");
    const campaign = await findCampaign(c.var.ctx.db, accountId, id);
    if (!campaign) throw notFound("Campaign");
    const [report, skips] = await Promise.all([campaignReport(c.var.ctx.db, id), skipCounts(c.var.ctx.db, [id])]);
    return c.json({ campaign_id: id, topic_id: campaign.topicId, ...report, skipped: skips.get(id) ?? zeroSkips() }, 200);
  });
