// scripts/lib/local-migrations.ts against the project's wrangler.toml and migrations/: one run builds `DB` and every
// account database, each recording every migration under the name wrangler's `migrations list` and `migrations apply`
// look for, so they find nothing left to apply; a state directory from before the account databases gets them added.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, expect, it } from "vitest";
import { localDatabases, migrateLocalDatabases, migrationFiles } from "./local-migrations.ts";

const dir = mkdtempSync(join(tmpdir(), "mailforge-migrations-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const migrations = migrationFiles("migrations");
const bindings = localDatabases("wrangler.toml").map((database) => database.binding);

/**
 * What `wrangler d1 migrations list` compares, for each local database, read from the files rather than by a wrangler
 * run per database (each is seconds of CPU). Miniflare keeps the databases beside files of its own: they are the ones
 * with wrangler's table.
 */
function recorded(persistTo: string): string[][] {
  const lists: string[][] = [];
  const folder = join(persistTo, "v3", "d1");
  for (const file of readdirSync(folder, { recursive: true, encoding: "utf8" }).filter((name) => name.endsWith(".sqlite"))) {
    const database = new DatabaseSync(join(folder, file));
    try {
      if (database.prepare("SELECT 1 FROM sqlite_master WHERE name = 'd1_migrations'").get())
        lists.push(
          database
            .prepare("SELECT name FROM d1_migrations ORDER BY id")
            .all()
            .map((row) => String(row.name)),
        );
    } finally {
      database.close();
    }
  }
  return lists;
}

it("builds DB and every account database in one run, recorded as wrangler records them, and applies nothing twice", async () => {
  expect(bindings).toEqual(expect.arrayContaining(["DB", "ACCOUNT_DB_0", "ACCOUNT_DB_1"]));
  expect(migrations.length).toBeGreaterThan(10);
  const persistTo = join(dir, "fresh");

  const applied = await migrateLocalDatabases(persistTo);
  expect(applied).toEqual(Object.fromEntries(bindings.map((binding) => [binding, migrations])));
  expect(recorded(persistTo)).toEqual(bindings.map(() => migrations));

  expect(await migrateLocalDatabases(persistTo)).toEqual(Object.fromEntries(bindings.map((binding) => [binding, []])));
}, 120_000);

it("adds the account databases to a local state that has only DB, leaving DB as it is", async () => {
  const persistTo = join(dir, "before-the-split");
  const [db] = localDatabases("wrangler.toml");
  const onlyDb = join(dir, "only-db.toml");
  writeFileSync(
    onlyDb,
    `name = "only-db"\ncompatibility_date = "2026-10-01"\n\n[[d1_databases]]\nbinding = "DB"\ndatabase_name = "mailforge"\ndatabase_id = "${db!.id}"\nmigrations_dir = "${resolve("migrations")}"\n`,
  );
  expect(await migrateLocalDatabases(persistTo, onlyDb)).toEqual({ DB: migrations });
  expect(recorded(persistTo)).toEqual([migrations]);

  const applied = await migrateLocalDatabases(persistTo);
  expect(applied).toEqual(Object.fromEntries(bindings.map((binding) => [binding, binding === "DB" ? [] : migrations])));
  expect(recorded(persistTo)).toEqual(bindings.map(() => migrations));
}, 120_000);
