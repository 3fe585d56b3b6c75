// Bringing the local D1 databases of `npm run dev` (and of the e2e suite's stack) up to date with migrations/: `DB`
// and every account database wrangler.toml declares.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { getPlatformProxy, unstable_readConfig, unstable_splitSqlQuery } from "wrangler";

// wrangler's default `migrations_table`, which wrangler.toml does not change.
const migrationsTable = "d1_migrations";

export type LocalDatabase = { binding: string; id: string; migrationsDir: string };

/** The D1 databases wrangler.toml (at `configPath`) binds, with the folder of migrations each is built from. */
export function localDatabases(configPath: string): LocalDatabase[] {
  const config = unstable_readConfig({ config: configPath });
  const root = resolve(configPath, "..");
  const databases: { binding: string; database_id?: string; migrations_dir?: string }[] = config.d1_databases;
  return databases.map((database) => ({
    binding: database.binding,
    id: database.database_id ?? database.binding,
    migrationsDir: resolve(root, database.migrations_dir ?? "migrations"),
  }));
}

/** The migrations of `dir`, in the order wrangler applies them. */
export function migrationFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith(".sql"))
    .sort();
}

type D1 = {
  prepare(query: string): D1Statement;
  batch(statements: D1Statement[]): Promise<unknown[]>;
};
type D1Statement = { run(): Promise<unknown>; all(): Promise<{ results: Record<string, unknown>[] }> };

/**
 * Applies what each local database lacks, and returns what it applied to each (binding → migration names).
 *
 * `wrangler d1 migrations apply --local` starts a local runtime for each database and each migration it applies: on a
 * fresh state directory, with every migration pending, that was about 20 s of CPU for one database, three times that for
 * three. Here one runtime holds every database (wrangler's own `getPlatformProxy`, persisting where `wrangler dev
 * --persist-to` does), and each database gets what it lacks in one batch: the statements `migrations apply` would run,
 * in its order, each migration followed by the `d1_migrations` row `migrations apply` writes for it, so wrangler counts
 * them as applied afterwards. A batch is one transaction, so a failing migration leaves that database as it was.
 */
export async function migrateLocalDatabases(persistTo: string, configPath = "wrangler.toml"): Promise<Record<string, string[]>> {
  const databases = localDatabases(configPath);
  // The proxy gets the databases only: the Worker's queues, Durable Objects and workflows are not needed to migrate.
  const scratch = mkdtempSync(join(resolve(persistTo, ".."), "migrate-"));
  const scratchConfig = join(scratch, "wrangler.json");
  writeFileSync(
    scratchConfig,
    JSON.stringify({
      name: "local-migrations",
      compatibility_date: "2026-10-01",
      d1_databases: databases.map((database) => ({ binding: database.binding, database_id: database.id })),
    }),
  );
  const proxy = await getPlatformProxy<Record<string, D1>>({
    configPath: scratchConfig,
    persist: { path: join(resolve(persistTo), "v3") },
    remoteBindings: false,
  });
  try {
    const applied: Record<string, string[]> = {};
    // One database after another: three large batches at once through the proxy's one connection were seen to lose
    // it ("other side closed") on a busy machine.
    for (const database of databases) {
      const db = proxy.env[database.binding]!;
      // wrangler's own definition of its table, so `migrations apply` finds it as it would have made it
      await db
        .prepare(`CREATE TABLE IF NOT EXISTS "${migrationsTable}"(
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		name       TEXT UNIQUE,
		applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
);`)
        .run();
      const done = new Set((await db.prepare(`SELECT name FROM "${migrationsTable}"`).all()).results.map((row) => String(row.name)));
      const pending = migrationFiles(database.migrationsDir).filter((name) => !done.has(name));
      applied[database.binding] = pending;
      if (pending.length === 0) continue;
      const statements = pending.flatMap((name) => [
        ...unstable_splitSqlQuery(readFileSync(join(database.migrationsDir, name), "utf8")).map((query) => db.prepare(query)),
        db.prepare(`INSERT INTO "${migrationsTable}" (name)\nvalues ('${name.replace(/'/g, "''")}');`),
      ]);
      await db.batch(statements);
    }
    return applied;
  } finally {
    await proxy.dispose();
    rmSync(scratch, { recursive: true, force: true });
  }
}
