import { Hono } from "hono";
import { balancesOf, findBalances } from "../../domain/accounts/accounts";
import { defaultRange, overviewReport, type Overview, type ReportCounts } from "../../domain/reports/reports";
import { ChartCard, Stat, dayAxis, type ChartData } from "../components/stats";
import { Shell, percent } from "../layout";
import type { DashboardEnv } from "../session";

// Gmail's and Yahoo's bulk-sender rules: keep spam complaints under 0.1%, never reach 0.3%. Neither publishes a bounce
// limit; 2% hard bounces is the common warning line of sending providers.
const complaintTarget = 0.001;
const complaintLimit = 0.003;
const bounceLimit = 0.02;

const chartSeries = [
  ["sent", "Sent"],
  ["delivered", "Delivered"],
  ["hard_bounces", "Bounced"],
  ["unique_opens", "Opened"],
  ["unique_clicks", "Clicked"],
] as const satisfies readonly (readonly [keyof ReportCounts, string])[];

function chartData(kind: ChartData["kind"], x: number[], rows: ReportCounts[], categories?: string[]): ChartData {
  return { kind, x, categories, series: chartSeries.map(([counter, label]) => ({ label, values: rows.map((row) => row[counter]) })) };
}

function RateMeter({ label, value, warn, limit, note }: { label: string; value: number; warn: number; limit: number; note: string }) {
  const tone = value >= limit ? "bad" : value >= warn ? "warn" : "ok";
  return (
    <div class={`meter ${tone}`}>
      <div class="meter-label">{label}</div>
      <div class="meter-value">{percent(value)}</div>
      <meter min={0} max={limit * 2} low={warn} high={limit} optimum={0} value={value} aria-label={`${label} ${percent(value)}`} />
      <div class="hint">{note}</div>
    </div>
  );
}

function OverviewPage({ report }: { report: Overview }) {
  const today = report.daily.at(-1);
  const hasMail = report.totals.sent > 0 || report.daily.some((day) => day.delivered > 0 || day.unique_opens > 0);
  const complaintRate = report.rates.complaint_rate;
  return (
    <>
      <section class="grid charts">
        <ChartCard
          title={`Today (${report.to})`}
          chart={
            today && today.sent + today.delivered + today.hard_bounces > 0
              ? {
                  data: chartData(
                    "bars",
                    chartSeries.map((_, index) => index),
                    [today],
                    chartSeries.map(([, label]) => label),
                  ),
                  label: `Today: ${chartSeries.map(([counter, label]) => `${label} ${today[counter]}`).join(", ")}`,
                }
              : undefined
          }
          empty="No mail has finished sending today."
          counts={today ? chartSeries.map(([counter, label]) => [label, today[counter]]) : undefined}
        />
        <ChartCard
          title={`Last 30 days (${report.from} to ${report.to})`}
          chart={
            hasMail
              ? {
                  data: chartData("lines", dayAxis(report.daily), report.daily),
                  label: `Last 30 days: ${chartSeries.map(([counter, label]) => `${label} ${report.totals[counter]}`).join(", ")}`,
                }
              : undefined
          }
          empty="No mail in the last 30 days. Send a message and its delivery and engagement show here."
          counts={chartSeries.map(([counter, label]) => [label, report.totals[counter]])}
        />
      </section>
      <section class="card">
        <h2>Sender reputation (30 days)</h2>
        <div class="grid meters">
          <RateMeter
            label="Spam complaint rate"
            value={complaintRate}
            warn={complaintTarget}
            limit={complaintLimit}
            note="Gmail and Yahoo: stay under 0.10%, never reach 0.30%."
          />
          <RateMeter
            label="Bounce rate"
            value={report.rates.bounce_rate}
            warn={bounceLimit / 2}
            limit={bounceLimit}
            note="Hard bounces over sent; keep it under 2%."
          />
          <div class="meter">
            <div class="meter-label">Delivery rate</div>
            <div class="meter-value">{percent(report.rates.delivery_rate)}</div>
            <div class="hint">
              Open rate {percent(report.rates.open_rate)}, click rate {percent(report.rates.click_rate)}
            </div>
          </div>
        </div>
      </section>
    </>
  );
}

export const overviewPages = new Hono<DashboardEnv>().get("/", async (c) => {
  const auth = c.get("auth");
  const [report, current] = await Promise.all([
    overviewReport(c.var.ctx.db, auth.account.id, defaultRange({})),
    findBalances(c.var.ctx.db, auth.account.id),
  ]);
  const balances = balancesOf(current);
  return c.html(
    <Shell title="Overview" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard">
      <section class="grid stats">
        <Stat
          label="Sending credits"
          value={balances.send.available.toLocaleString("en")}
          hint={`${balances.send.reserved.toLocaleString("en")} reserved by campaigns`}
        />
        <Stat label="Verification credits" value={balances.verify.available.toLocaleString("en")} />
        <Stat label="Plan" value={auth.account.plan} hint={`${auth.account.dailySendLimit.toLocaleString("en")} emails a day`} />
      </section>
      <OverviewPage report={report} />
    </Shell>,
  );
});
