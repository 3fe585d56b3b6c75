// What GET /reports/* and GET /usage read: sums over the daily rollup rows of a date range (daily_stats,
// usage_daily, campaign_links), each report in one D1 batch of GROUP BY queries. No report scans messages or events,
// so its cost follows the number of days, domains, providers and campaigns, not the number of emails.

import { and, asc, between, desc, eq, sql, type SQL } from "drizzle-orm";
import { inJsonArray, type AccountDb } from "../../db/client";
import { campaignLinks, dailyStats, messageStreams, providers, usageDaily } from "../../db/schema";
import { rollupCounters, type Provider, type RollupCounter } from "./rollups";

export type DateRange = { from: string; to: string };
type MessageStream = (typeof messageStreams)[number];
export type ReportCounts = Record<RollupCounter, number>;
export type ReportRates = {
  delivery_rate: number;
  bounce_rate: number;
  open_rate: number;
  click_rate: number;
  unsubscribe_rate: number;
  complaint_rate: number;
};

const dayMs = 86_400_000;
export const maxRangeDays = 366;
export const defaultRangeDays = 30;

/** Every date from `from` to `to` (both YYYY-MM-DD, inclusive), in order. */
export function daysOf(range: DateRange): string[] {
  const days: string[] = [];
  for (let time = Date.parse(`${range.from}T00:00:00Z`); time <= Date.parse(`${range.to}T00:00:00Z`); time += dayMs) {
    days.push(new Date(time).toISOString().slice(0, 10));
  }
  return days;
}

/** The days `range` covers, counting both ends. */
export const rangeLength = (range: DateRange) => (Date.parse(range.to) - Date.parse(range.from)) / dayMs + 1;

/** The range a report covers when `from` or `to` is left out: 30 days ending `to` (default today, UTC). */
export function defaultRange(query: Partial<DateRange>, now = new Date()): DateRange {
  const to = query.to ?? now.toISOString().slice(0, 10);
  const from = query.from ?? new Date(Date.parse(to) - (defaultRangeDays - 1) * dayMs).toISOString().slice(0, 10);
  return { from, to };
}

const columnOf = {
  sent: dailyStats.sent,
  delivered: dailyStats.delivered,
  hard_bounces: dailyStats.hardBounces,
  soft_bounces: dailyStats.softBounces,
  opens: dailyStats.opens,
  unique_opens: dailyStats.uniqueOpens,
  machine_opens: dailyStats.machineOpens,
  clicks: dailyStats.clicks,
  unique_clicks: dailyStats.uniqueClicks,
  unsubscribes: dailyStats.unsubscribes,
  complaints: dailyStats.complaints,
  failed: dailyStats.failed,
  suppressed: dailyStats.suppressed,
  replies: dailyStats.replies,
} as const satisfies Record<RollupCounter, unknown>;

const sums = Object.fromEntries(rollupCounters.map((counter) => [counter, sql<number>`COALESCE(SUM(${columnOf[counter]}), 0)`])) as Record<
  RollupCounter,
  SQL<number>
>;

export const zeroCounts = (): ReportCounts => Object.fromEntries(rollupCounters.map((counter) => [counter, 0])) as ReportCounts;

export const countsOf = (row: Record<RollupCounter, number>): ReportCounts =>
  Object.fromEntries(rollupCounters.map((counter) => [counter, Number(row[counter])])) as ReportCounts;

const ratio = (part: number, whole: number) => (whole === 0 ? 0 : Math.round((part / whole) * 10_000) / 10_000);

/** Sent-based rates over `sent` (final transport outcomes), engagement rates over `delivered`. */
export function ratesOf(counts: ReportCounts): ReportRates {
  return {
    delivery_rate: ratio(counts.delivered, counts.sent),
    bounce_rate: ratio(counts.hard_bounces, counts.sent),
    open_rate: ratio(counts.unique_opens, counts.delivered),
    click_rate: ratio(counts.unique_clicks, counts.delivered),
    unsubscribe_rate: ratio(counts.unsubscribes, counts.delivered),
    complaint_rate: ratio(counts.complaints, counts.delivered),
  };
}

export type Overview = DateRange & {
  totals: ReportCounts;
  rates: ReportRates;
  providers: ({ provider: Provider } & ReportCounts & { rates: ReportRates })[];
  domains: ({ domain: string } & ReportCounts & { rates: ReportRates })[];
  daily: ({ date: string } & ReportCounts)[];
  streams: ({ stream: MessageStream } & ReportCounts & { rates: ReportRates })[];
};

/**
 * The account's delivery and engagement over `range` (only `stream`'s mail when given): totals, per mailbox provider,
 * per sending domain, per day and per stream.
 */
export async function overviewReport(db: AccountDb, accountId: string, range: DateRange, stream?: MessageStream): Promise<Overview> {
  const inRange = and(
    eq(dailyStats.accountId, accountId),
    between(dailyStats.day, range.from, range.to),
    stream ? eq(dailyStats.stream, stream) : undefined,
  );
  const [totals, byProvider, byDomain, byDay, byStream] = await db.batch([
    db.select(sums).from(dailyStats).where(inRange),
    db
      .select({ provider: dailyStats.provider, ...sums })
      .from(dailyStats)
      .where(inRange)
      .groupBy(dailyStats.provider),
    db
      .select({ domain: dailyStats.domain, ...sums })
      .from(dailyStats)
      .where(inRange)
      .groupBy(dailyStats.domain)
      .orderBy(desc(sums.sent), asc(dailyStats.domain)),
    db
      .select({ day: dailyStats.day, ...sums })
      .from(dailyStats)
      .where(inRange)
      .groupBy(dailyStats.day),
    db
      .select({ stream: dailyStats.stream, ...sums })
      .from(dailyStats)
      .where(inRange)
      .groupBy(dailyStats.stream),
  ]);
  const total = totals[0] ? countsOf(totals[0]) : zeroCounts();
  const providerCounts = new Map(byProvider.map((row) => [row.provider, countsOf(row)]));
  const dayCounts = new Map(byDay.map((row) => [row.day, countsOf(row)]));
  const streamCounts = new Map(byStream.map((row) => [row.stream, countsOf(row)]));
  return {
    ...range,
    totals: total,
    rates: ratesOf(total),
    // Every provider, in a fixed order, so a client can chart them without filling gaps.
    providers: providers.map((provider) => {
      const counts = providerCounts.get(provider) ?? zeroCounts();
      return { provider, ...counts, rates: ratesOf(counts) };
    }),
    domains: byDomain.map((row) => {
      const counts = countsOf(row);
      return { domain: row.domain, ...counts, rates: ratesOf(counts) };
    }),
    daily: daysOf(range).map((date) => ({ date, ...(dayCounts.get(date) ?? zeroCounts()) })),
    streams: messageStreams.map((name) => {
      const counts = streamCounts.get(name) ?? zeroCounts();
      return { stream: name, ...counts, rates: ratesOf(counts) };
    }),
  };
}

export type CampaignReport = { totals: ReportCounts; rates: ReportRates; links: { url: string; clicks: number; unique_clicks: number }[] };

/** One campaign's totals over its whole life, and its links by clicks. The caller checks the campaign is the account's. */
export async function campaignReport(db: AccountDb, campaignId: string): Promise<CampaignReport> {
  const [totals, links] = await db.batch([
    campaignTotalsQuery(db, [campaignId]),
    db
      .select({ url: campaignLinks.url, clicks: campaignLinks.clicks, unique_clicks: campaignLinks.uniqueClicks })
      .from(campaignLinks)
      .where(eq(campaignLinks.campaignId, campaignId))
      .orderBy(desc(campaignLinks.clicks), asc(campaignLinks.url)),
  ]);
  const counts = totals[0] ? countsOf(totals[0]) : zeroCounts();
  return { totals: counts, rates: ratesOf(counts), links };
}

/**
 * Several campaigns' totals over their whole life, in one query: what GET /reports/campaigns/{id} shows and what the
 * campaign resource's counters and campaign.completed carry, so the two can never disagree. A campaign with no
 * counted outcome yet is absent.
 */
export async function campaignTotals(db: AccountDb, campaignIds: string[]): Promise<Map<string, ReportCounts>> {
  if (campaignIds.length === 0) return new Map();
  const rows = await campaignTotalsQuery(db, campaignIds);
  return new Map(rows.map((row) => [row.campaignId, countsOf(row)]));
}

// By campaign id alone (ids are unique across accounts, over the daily_stats_campaign index): callers have checked
// the campaigns are the account's.
export function campaignTotalsQuery(db: AccountDb, campaignIds: string[]) {
  return db
    .select({ campaignId: dailyStats.campaignId, ...sums })
    .from(dailyStats)
    .where(inJsonArray(dailyStats.campaignId, campaignIds))
    .groupBy(dailyStats.campaignId);
}

export type UsageCredits = {
  send_charged: number;
  send_refunded: number;
  send_reserved: number;
  send_released: number;
  verify_charged: number;
  verify_refunded: number;
  verify_granted: number;
  verify_expired: number;
};
export type UsageTotals = { api_calls: number; emails_sent: number; verifications: number; credits: UsageCredits };
export type UsageReport = DateRange & UsageTotals & { daily: ({ date: string } & UsageTotals)[] };

const zeroUsage = (): UsageTotals => ({
  api_calls: 0,
  emails_sent: 0,
  verifications: 0,
  credits: {
    send_charged: 0,
    send_refunded: 0,
    send_reserved: 0,
    send_released: 0,
    verify_charged: 0,
    verify_refunded: 0,
    verify_granted: 0,
    verify_expired: 0,
  },
});

/** The account's API calls, emails sent (final transport outcomes), addresses verified and credit movements per day. */
export async function usageReport(db: AccountDb, accountId: string, range: DateRange): Promise<UsageReport> {
  const [usageRows, sentRows] = await db.batch([
    db
      .select()
      .from(usageDaily)
      .where(and(eq(usageDaily.accountId, accountId), between(usageDaily.day, range.from, range.to))),
    db
      .select({ day: dailyStats.day, sent: sums.sent })
      .from(dailyStats)
      .where(and(eq(dailyStats.accountId, accountId), between(dailyStats.day, range.from, range.to)))
      .groupBy(dailyStats.day),
  ]);
  const usageOf = new Map(usageRows.map((row) => [row.day, row]));
  const sentOf = new Map(sentRows.map((row) => [row.day, Number(row.sent)]));
  const total = zeroUsage();
  const daily = daysOf(range).map((date) => {
    const row = usageOf.get(date);
    const day: UsageTotals = {
      api_calls: row?.apiCalls ?? 0,
      emails_sent: sentOf.get(date) ?? 0,
      verifications: row?.verifications ?? 0,
      credits: {
        send_charged: row?.sendCharged ?? 0,
        send_refunded: row?.sendRefunded ?? 0,
        send_reserved: row?.sendReserved ?? 0,
        send_released: row?.sendReleased ?? 0,
        verify_charged: row?.verifyCharged ?? 0,
        verify_refunded: row?.verifyRefunded ?? 0,
        verify_granted: row?.verifyGranted ?? 0,
        verify_expired: row?.verifyExpired ?? 0,
      },
    };
    total.api_calls += day.api_calls;
    total.emails_sent += day.emails_sent;
    total.verifications += day.verifications;
    for (const key of Object.keys(total.credits) as (keyof UsageCredits)[]) total.credits[key] += day.credits[key];
    return { date, ...day };
  });
  return { ...range, ...total, daily };
}
