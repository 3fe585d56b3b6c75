// Shared by the bench scripts: one definition of a percentile, so every table means the same thing by p50 and p95.

/** The p-th percentile of `values` (nearest rank); NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}
