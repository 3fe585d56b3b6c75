// `npm run provision` (scripts/lib/provision.ts) through the project's real wrangler, pointed by
// CLOUDFLARE_API_BASE_URL at a stand-in of the Cloudflare API (cloudflare-api.ts): a first run creates every D1
// database, queue, dead-letter queue and R2 bucket a wrangler.toml names, writes the databases' ids into it and
// applies the migrations to each database; after an account database is added to wrangler.toml (docs/operations.md),
// a second run creates and migrates that one and nothing else. Then `wrangler deploy --dry-run` accepts the project's
// own wrangler.toml.
import { spawnSync } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { provision, resourcesOf, wranglerCli, type Step } from "../../scripts/lib/provision.ts";
import { startCloudflareStandIn, type CloudflareStandIn } from "./cloudflare-api.ts";

const root = process.cwd();

// Two small migrations stand in for migrations/: what matters is that each database gets each of them once.
const migrations = {
  "0000_init.sql": "CREATE TABLE accounts (id TEXT PRIMARY KEY, name TEXT NOT NULL);",
  "0001_messages.sql":
    "CREATE TABLE messages (id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id));\nCREATE INDEX messages_account ON messages (account_id);",
};
const wranglerBinary = join(root, "node_modules/.bin/wrangler");

// A wrangler.toml with one of each kind (and `DB` beside an account database): few wrangler runs, each a few seconds.
const smallConfig = `name = "provision-test"
main = "src/index.ts"
compatibility_date = "2026-10-01"

[[d1_databases]]
binding = "DB"
database_name = "pt-db"
database_id = "00000000-0000-0000-0000-000000000000"
migrations_dir = "migrations"

[[d1_databases]]
binding = "ACCOUNT_DB_0"
database_name = "pt-accounts-0"
database_id = "00000000-0000-0000-0000-000000000010"
migrations_dir = "migrations"

[[r2_buckets]]
binding = "BLOBS"
bucket_name = "pt-blobs"

[[queues.producers]]
binding = "EVENTS"
queue = "pt-events"

[[queues.consumers]]
queue = "pt-events"
dead_letter_queue = "pt-events-dlq"

[[workflows]]
name = "pt-flow"
binding = "FLOW"
class_name = "Flow"
`;

describe("npm run provision", () => {
  let api: CloudflareStandIn;
  let dir: string;

  beforeAll(async () => {
    api = await startCloudflareStandIn();
    dir = mkdtempSync(join(tmpdir(), "mailforge-provision-"));
  });
  afterAll(async () => {
    await api?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads every queue of the project's wrangler.toml, dead-letter queues and the email-events queue included", () => {
    const resources = resourcesOf(join(root, "wrangler.toml"));
    expect(resources.queues.sort()).toEqual(
      ["send", "verify", "webhooks", "ai", "email-events"].flatMap((queue) => [`mailforge-${queue}`, `mailforge-${queue}-dlq`]).sort(),
    );
    expect(resources).toMatchObject({
      databases: [
        { binding: "DB", name: "mailforge" },
        { binding: "ACCOUNT_DB_0", name: "mailforge-accounts-0" },
        { binding: "ACCOUNT_DB_1", name: "mailforge-accounts-1" },
      ],
      buckets: ["mailforge-blobs"],
      workflows: ["mailforge-automation"],
    });
  });

  it("creates what is missing, records the database ids, migrates every database, and after a database is added, creates and migrates only that one", async () => {
    const configPath = join(dir, "wrangler.toml");
    writeFileSync(configPath, smallConfig);
    mkdirSync(join(dir, "migrations"));
    for (const [name, sql] of Object.entries(migrations)) writeFileSync(join(dir, "migrations", name), sql);
    // One queue exists already: it is found, not created again.
    api.queues.set("pt-events", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    const wrangler = wranglerCli(wranglerBinary, {
      ...process.env,
      CLOUDFLARE_API_BASE_URL: api.baseUrl,
      CLOUDFLARE_API_TOKEN: "stand-in-token",
      CLOUDFLARE_ACCOUNT_ID: api.accountId,
    });
    const summary = (steps: Step[]) => steps.map((step) => `${step.kind} ${step.name} ${step.action}`);

    const first = await provision(wrangler, configPath);
    expect(first.error).toBeUndefined();
    expect(summary(first.steps)).toEqual([
      "database pt-db created",
      "database pt-accounts-0 created",
      "migrations DB applied",
      "migrations ACCOUNT_DB_0 applied",
      "queue pt-events exists",
      "queue pt-events-dlq created",
      "bucket pt-blobs created",
      "workflow pt-flow on deploy",
    ]);
    expect([...api.queues.keys()].sort()).toEqual(["pt-events", "pt-events-dlq"]);
    expect([...api.buckets]).toEqual(["pt-blobs"]);
    expect(first.steps.filter((step) => step.kind === "migrations").map((step) => step.detail)).toEqual(["2 migrations", "2 migrations"]);
    for (const name of ["pt-db", "pt-accounts-0"]) expect(readFileSync(configPath, "utf8")).toContain(`database_id = "${api.databases.get(name)}"`);
    // The new databases' ids came from what `wrangler d1 create` printed: the databases were listed once, before.
    expect(api.requests.filter((request) => /^GET \/accounts\/.*\/d1\/database$/.test(request))).toHaveLength(1);
    const migrated = (name: string) => {
      const database = api.sqlite.get(api.databases.get(name)!)!;
      const names = (sql: string) =>
        database
          .prepare(sql)
          .all()
          .map((row) => String(row.name));
      return {
        tables: names("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"),
        recorded: names("SELECT name FROM d1_migrations ORDER BY id"),
      };
    };
    const everyMigration = { tables: ["accounts", "d1_migrations", "messages"], recorded: Object.keys(migrations) };
    expect(migrated("pt-db")).toEqual(everyMigration);
    expect(migrated("pt-accounts-0")).toEqual(everyMigration);

    // docs/operations.md, "Adding an account database": another entry with a placeholder id, then provision again.
    appendFileSync(
      configPath,
      `\n[[d1_databases]]\nbinding = "ACCOUNT_DB_1"\ndatabase_name = "pt-accounts-1"\ndatabase_id = "00000000-0000-0000-0000-000000000011"\nmigrations_dir = "migrations"\n`,
    );
    const creations = () => api.requests.filter((request) => /^POST \/accounts\/.*\/(d1\/database|queues|r2\/buckets)$/.test(request)).length;
    const createdBefore = creations();
    expect(createdBefore).toBe(4);
    const second = await provision(wrangler, configPath);
    expect(second.error).toBeUndefined();
    expect(summary(second.steps)).toEqual([
      "database pt-db exists",
      "database pt-accounts-0 exists",
      "database pt-accounts-1 created",
      "migrations DB up to date",
      "migrations ACCOUNT_DB_0 up to date",
      "migrations ACCOUNT_DB_1 applied",
      "queue pt-events exists",
      "queue pt-events-dlq exists",
      "bucket pt-blobs exists",
      "workflow pt-flow on deploy",
    ]);
    expect(creations()).toBe(createdBefore + 1);
    expect(readFileSync(configPath, "utf8")).toContain(`database_id = "${api.databases.get("pt-accounts-1")}"`);
    expect(migrated("pt-accounts-1")).toEqual(everyMigration);
    expect(migrated("pt-db")).toEqual(everyMigration);
    expect(api.unknown).toEqual([]);
  }, 400_000);

  it("stops with wrangler's own message when the API refuses, instead of reporting success", async () => {
    const configPath = join(dir, "refused.toml");
    writeFileSync(configPath, smallConfig.replace("pt-db", "pt-db-2"));
    const wrangler = wranglerCli(wranglerBinary, {
      ...process.env,
      CLOUDFLARE_API_BASE_URL: api.baseUrl,
      CLOUDFLARE_API_TOKEN: "stand-in-token",
      CLOUDFLARE_ACCOUNT_ID: "another-account",
    });
    const result = await provision(wrangler, configPath);
    expect(result.steps).toEqual([]);
    expect(result.error).toMatch(/wrangler d1 list --json failed/);
  }, 120_000);

  it("leaves a wrangler.toml that `wrangler deploy --dry-run` accepts", () => {
    const result = spawnSync(wranglerBinary, ["deploy", "--dry-run", "--outdir", join(dir, "dist")], {
      cwd: root,
      env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
      encoding: "utf8",
    });
    expect(result.stderr + result.stdout).toMatch(/--dry-run: exiting now/);
    expect(result.status).toBe(0);
  }, 300_000);
});
