import type { Child } from "hono/jsx";
import { Empty } from "../layout";

/** One headline figure in a row of cards (`<section class="grid stats">`), with a line that explains it. */
export function Stat({ label, value, hint }: { label: string; value: string; hint?: Child }) {
  return (
    <div class="card stat">
      <div class="stat-label">{label}</div>
      <div class="stat-value">{value}</div>
      {hint ? <div class="hint">{hint}</div> : null}
    </div>
  );
}

/** Totals under a chart, each a label and a count. */
function Counts({ counts }: { counts: [label: string, count: number][] }) {
  return (
    <dl class="counts">
      {counts.map(([label, count]) => (
        <div>
          <dt>{label}</dt>
          <dd>{count.toLocaleString("en")}</dd>
        </div>
      ))}
    </dl>
  );
}

/** What dashboard.js draws with uPlot: x values (Unix seconds, or indexes into `categories`) and one series a line or bar. */
export type ChartData = { kind: "lines" | "bars"; x: number[]; categories?: string[]; series: { label: string; values: number[] }[] };

/** A chart drawn by dashboard.js; `label` says in words what it shows. */
function Chart({ data, label }: { data: ChartData; label: string }) {
  return <div class="chart" data-chart={JSON.stringify(data)} role="img" aria-label={label} />;
}

/** A daily report's days as a time axis: the Unix seconds of each UTC midnight. */
export const dayAxis = (days: { date: string }[]) => days.map((day) => Date.parse(`${day.date}T00:00:00Z`) / 1000);

type ChartCardProps = {
  title: Child;
  /** Left out when there is nothing to draw; `empty` says so instead. */
  chart?: { data: ChartData; label: string };
  empty: string;
  /** The totals under the chart. */
  counts?: [label: string, count: number][];
};

/** A card of one chart and its totals (the overview's today and last 30 days, the usage page's 30 days). */
export function ChartCard({ title, chart, empty, counts }: ChartCardProps) {
  return (
    <section class="card">
      <h2>{title}</h2>
      {chart ? <Chart data={chart.data} label={chart.label} /> : <Empty>{empty}</Empty>}
      {counts ? <Counts counts={counts} /> : null}
    </section>
  );
}
