import type { Child } from "hono/jsx";

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
export function Counts({ counts }: { counts: [label: string, count: number][] }) {
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
