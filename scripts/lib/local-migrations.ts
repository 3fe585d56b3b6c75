// Bringing the local D1 database of `npm run dev` (and of the e2e suite's stack) up to date with migrations/.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

// wrangler.toml's `migrations_dir` (relative to the project root, where `npm run dev` runs), and wrangler's default
// `migrations_table`, which wrangler.toml does not change.
const migrationsDir = "migrations";
const migrationsTable = "d1_migrations";

/**
 * The wrangler arguments that migrate the local database kept in `persistTo` (wrangler's `--persist-to`).
 *
 * `wrangler d1 migrations apply --local` starts a local runtime for each migration it applies: on a fresh state
 * directory, with every migration pending, that is about 20 s of CPU and as long on the clock. A database that does
 * not exist yet gets every migration from one `wrangler d1 execute --file` instead: the statements `migrations apply`
 * would run, in its order, each migration followed by the `d1_migrations` row `migrations apply` writes for it, so
 * wrangler counts them as applied afterwards. All of them run as one batch, so a failing migration leaves no database
 * half made. A database that exists goes through `migrations apply`, which applies only what it lacks.
 */
export function localMigrationCommand(persistTo: string, scratchDir: string): { args: string[]; sqlFile?: string } {
  const databases = join(persistTo, "v3", "d1");
  const exists = existsSync(databases) && readdirSync(databases, { recursive: true, encoding: "utf8" }).some((file) => file.endsWith(".sqlite"));
  if (exists) return { args: ["d1", "migrations", "apply", "DB", "--local", "--persist-to", persistTo] };

  const statements = [
    `CREATE TABLE IF NOT EXISTS "${migrationsTable}"(
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		name       TEXT UNIQUE,
		applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
);`,
  ];
  for (const name of readdirSync(migrationsDir)
    .filter((file) => file.endsWith(".sql"))
    .sort()) {
    statements.push(
      readFileSync(join(migrationsDir, name), "utf8"),
      `INSERT INTO "${migrationsTable}" (name)\nvalues ('${name.replace(/'/g, "''")}');`,
    );
  }
  const sqlFile = join(scratchDir, "all-migrations.sql");
  writeFileSync(sqlFile, `${statements.join("\n")}\n`);
  return { args: ["d1", "execute", "DB", "--local", "--persist-to", persistTo, "--file", sqlFile], sqlFile };
}
