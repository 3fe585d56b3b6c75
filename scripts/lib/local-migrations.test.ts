// The fresh-database path of scripts/lib/local-migrations.ts, through the project's real wrangler: after the one
// `wrangler d1 execute`, wrangler's own `migrations list` finds nothing left to apply.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { localMigrationCommand } from "./local-migrations.ts";

const dir = mkdtempSync(join(tmpdir(), "mailforge-migrations-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const wrangler = (args: string[]) =>
  spawnSync(join(process.cwd(), "node_modules/.bin/wrangler"), args, {
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", WRANGLER_DISABLE_UPDATE_CHECK: "true", CLOUDFLARE_CF_FETCH_ENABLED: "false" },
  });

it("applies every migration to a new local database in one run, recorded as wrangler records them", () => {
  const persistTo = join(dir, "state");
  const fresh = localMigrationCommand(persistTo, dir);
  expect(fresh.args.slice(0, 3)).toEqual(["d1", "execute", "DB"]);
  const applied = wrangler(fresh.args);
  expect(applied.stderr).toBe("");
  expect(applied.status).toBe(0);

  const listed = wrangler(["d1", "migrations", "list", "DB", "--local", "--persist-to", persistTo]);
  expect(listed.status).toBe(0);
  expect(listed.stdout).toContain("No migrations to apply");
  expect(readdirSync("migrations").filter((file) => file.endsWith(".sql")).length).toBeGreaterThan(10);

  // The database exists now: the next start asks wrangler for what is missing.
  expect(localMigrationCommand(persistTo, dir).args).toEqual(["d1", "migrations", "apply", "DB", "--local", "--persist-to", persistTo]);
}, 120_000);
