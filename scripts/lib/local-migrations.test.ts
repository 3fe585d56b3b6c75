// The fresh-database path of scripts/lib/local-migrations.ts, through the project's real wrangler: after the one
// `wrangler d1 execute`, the database records every migration under the name wrangler's `migrations list` and
// `migrations apply` look for, so they find nothing left to apply.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, expect, it } from "vitest";
import { localMigrationCommand } from "./local-migrations.ts";

// spawnSync blocks the event loop, so Vitest's own time limit cannot fire while it runs: a hung child is killed here.
const spawnLimit = { timeout: 110_000, killSignal: "SIGKILL" } as const;

const dir = mkdtempSync(join(tmpdir(), "mailforge-migrations-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const wrangler = (args: string[]) =>
  spawnSync(join(process.cwd(), "node_modules/.bin/wrangler"), args, {
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", WRANGLER_DISABLE_UPDATE_CHECK: "true", CLOUDFLARE_CF_FETCH_ENABLED: "false" },
    ...spawnLimit,
  });

it("applies every migration to a new local database in one run, recorded as wrangler records them", () => {
  const persistTo = join(dir, "state");
  const fresh = localMigrationCommand(persistTo, dir);
  expect(fresh.args.slice(0, 3)).toEqual(["d1", "execute", "DB"]);
  const applied = wrangler(fresh.args);
  expect(applied.stderr).toBe("");
  expect(applied.status).toBe(0);

  // What `wrangler d1 migrations list` compares, read from the database rather than by a second wrangler run: a run is
  // seconds of CPU (wrangler's 15 MB bundle, then a workerd), and beside the rest of `npm test` on two busy cores one
  // got 7 % of a core (33 s for 2.5 s of CPU), so two of them took this test past its limit.
  const migrations = readdirSync("migrations")
    .filter((file) => file.endsWith(".sql"))
    .sort();
  expect(migrations.length).toBeGreaterThan(10);
  // Miniflare keeps the database beside files of its own: it is the one with wrangler's table.
  const recorded: unknown[][] = [];
  for (const file of readdirSync(join(persistTo, "v3", "d1"), { recursive: true, encoding: "utf8" }).filter((name) => name.endsWith(".sqlite"))) {
    const database = new DatabaseSync(join(persistTo, "v3", "d1", file));
    try {
      if (database.prepare("SELECT 1 FROM sqlite_master WHERE name = 'd1_migrations'").get()) {
        const rows = database.prepare("SELECT name FROM d1_migrations ORDER BY id").all();
        recorded.push(rows.map((row) => row.name));
      }
    } finally {
      database.close();
    }
  }
  expect(recorded).toEqual([migrations]);

  // The database exists now: the next start asks wrangler for what is missing.
  expect(localMigrationCommand(persistTo, dir).args).toEqual(["d1", "migrations", "apply", "DB", "--local", "--persist-to", persistTo]);
}, 120_000);
