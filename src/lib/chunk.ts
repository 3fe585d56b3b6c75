/** `items` in consecutive slices of at most `size` (the last one shorter): for limits on ids per statement or per sendBatch. */
export function chunk<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size));
  return chunks;
}
