/** Structured log lines (one JSON object each), which Workers Logs and `wrangler tail` index by field. */
export function logError(message: string, fields: Record<string, unknown> = {}): void {
  console.error(JSON.stringify({ level: "error", message, ...fields }));
}

/** Expected but notable conditions (an endpoint deleted while its deliveries were queued): a line, not an error. */
export function logWarning(message: string, fields: Record<string, unknown> = {}): void {
  console.warn(JSON.stringify({ level: "warn", message, ...fields }));
}
