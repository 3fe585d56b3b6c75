// Structured logs: one JSON object per line on stdout, the format log shippers (Docker, journald, Loki, Cloudflare
// Logpush from a container) pick up without parsing rules. This is the bridge's only writer to stdout.

export type LogValue = string | number | boolean | null | undefined;
export type LogFields = Record<string, LogValue>;
export type LogLevel = "info" | "warn" | "error";

export interface Logger {
  log(level: LogLevel, event: string, fields?: LogFields): void;
}

export function createJsonLogger(write: (line: string) => void = (line) => process.stdout.write(line)): Logger {
  return {
    log(level, event, fields = {}) {
      // undefined fields are dropped by JSON.stringify, so optional values need no special casing at call sites
      write(`${JSON.stringify({ ts: new Date().toISOString(), level, event, ...fields })}\n`);
    },
  };
}

/** Keeps entries in memory (tests) instead of printing them. */
export function createMemoryLogger(): Logger & { entries: ({ level: LogLevel; event: string } & LogFields)[] } {
  const entries: ({ level: LogLevel; event: string } & LogFields)[] = [];
  return {
    entries,
    log(level, event, fields = {}) {
      entries.push({ level, event, ...fields });
    },
  };
}
