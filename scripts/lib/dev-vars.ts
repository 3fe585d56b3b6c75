import { existsSync, readFileSync } from "node:fs";

/** Reads KEY="value" lines of a .dev.vars/.env file (the format wrangler uses); missing file → empty. */
export function readDevVars(path = ".dev.vars"): Record<string, string> {
  if (!existsSync(path)) return {};
  const vars: Record<string, string> = {};
  for (const line of readFileSync(path, "utf8").split(/\r?\n/)) {
    const match = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (!match || line.trimStart().startsWith("#")) continue;
    const [, name, raw] = match as unknown as [string, string, string];
    vars[name] = raw.replace(/^"(.*)"$/, "$1").replace(/^'(.*)'$/, "$1");
  }
  return vars;
}

/** Where `npm run dev` writes the Worker URL it started, inside its state directory. */
export const devStackUrlFile = (stateDir = process.env.DEV_STATE_DIR ?? ".dev") => `${stateDir}/worker-url`;

/** The Worker URL of the dev stack, when one has been started from this checkout. */
export function devStackUrl(): string | undefined {
  const path = devStackUrlFile();
  return existsSync(path) ? readFileSync(path, "utf8").trim() || undefined : undefined;
}

/** The addresses of a running dev stack's parts, which `npm run dev` writes into its state directory. */
export type DevStackAddresses = { workerUrl: string; dohUrl: string; sinkUrl: string };

export const devStackFile = (stateDir = process.env.DEV_STATE_DIR ?? ".dev") => `${stateDir}/stack.json`;

/** Where the dev stack started from this checkout listens (whatever ports it was given), when one has been started. */
export function devStackAddresses(): DevStackAddresses | undefined {
  const path = devStackFile();
  return existsSync(path) ? (JSON.parse(readFileSync(path, "utf8")) as DevStackAddresses) : undefined;
}
