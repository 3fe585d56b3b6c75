/** Structured log lines (one JSON object each), which Workers Logs and `wrangler tail` index by field. */
export function logError(message: string, fields: Record<string, unknown> = {}): void {
  console.error(JSON.stringify({ level: "error", message, ...fields }));
}
