import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, inject } from "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    /** The files that act on every account's rows (vitest.config.ts), as `test/…` paths. */
    globalStateFiles: string[];
  }
}

// Files run one after another in a runtime whose storage they share. A file that sweeps every account's rows must not
// follow the other files, whose leftovers it would sweep: vitest.config.ts starts every such file first. Should that
// order ever break, this says so instead of letting a sweep's count come out wrong.
const state = globalThis as { otherFilesRan?: string };
const testPath = expect.getState().testPath;
if (!testPath) throw new Error("the setup file cannot tell which test file it runs for");
const file = testPath.replaceAll("\\", "/");
if (inject("globalStateFiles").some((globalFile) => file.endsWith(`/${globalFile}`))) {
  if (state.otherFilesRan) throw new Error(`${file} acts on every account's rows but runs after ${state.otherFilesRan} in the same runtime`);
} else {
  state.otherFilesRan ??= file;
}

// Every database carries the whole schema (wrangler.toml): `DB` and each account database.
await Promise.all([env.DB, env.ACCOUNT_DB_0, env.ACCOUNT_DB_1].map((database) => applyD1Migrations(database, env.TEST_MIGRATIONS)));
