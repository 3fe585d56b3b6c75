// src/db/schema/ (what the code's queries are typed against) and migrations/ (what D1 is built from) describe the
// same database: every table, column (type, NOT NULL, default, key) and index (columns, uniqueness, partial condition).
// Some migrations are written by hand (D1-specific statements), so this is checked, not assumed. And drizzle-kit's
// last snapshot is the schema now, so `npm run db:generate` writes only what changes next.
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, describe, expect, it } from "vitest";

// spawnSync blocks the event loop, so Vitest's own time limit cannot fire while it runs: a hung child is killed here.
const spawnLimit = { timeout: 110_000, killSignal: "SIGKILL" } as const;

const dir = mkdtempSync(join(tmpdir(), "mailforge-schema-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** drizzle-kit generate from src/db/schema/ into `out` (a path it takes relative to the project). */
function generate(out: string) {
  const result = spawnSync(
    join(process.cwd(), "node_modules/.bin/drizzle-kit"),
    ["generate", "--dialect", "sqlite", "--schema", "./src/db/schema/index.ts", "--out", relative(process.cwd(), out), "--prefix", "timestamp"],
    { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], ...spawnLimit },
  );
  expect(result.status, result.stderr).toBe(0);
  return result.stdout;
}

const sqlFiles = (folder: string) =>
  readdirSync(folder)
    .filter((file) => file.endsWith(".sql"))
    .sort();

/** The database `files` build, as SQLite describes it. */
function described(folder: string, files: string[]) {
  const db = new DatabaseSync(":memory:");
  for (const file of files) db.exec(readFileSync(join(folder, file), "utf8").replaceAll("--> statement-breakpoint", ""));
  type Entry = { type: string; name: string; tbl_name: string; sql: string | null };
  const entries = db.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name").all() as Entry[];
  type Column = { name: string; type: string; notnull: number; dflt_value: string | null; pk: number };
  const columnsOf = (table: string) =>
    (db.prepare(`PRAGMA table_info("${table}")`).all() as Column[])
      .map((column) => {
        const constraints = `${column.notnull ? " NOT NULL" : ""}${column.pk ? ` PK${column.pk}` : ""}`;
        return `${column.name} ${column.type.toUpperCase()}${constraints} default ${column.dflt_value?.replaceAll(" ", "") ?? "-"}`;
      })
      // in name order: ALTER TABLE adds a column last, CREATE TABLE has it where it is declared
      .sort();
  const tables = Object.fromEntries(entries.filter((entry) => entry.type === "table").map((entry) => [entry.name, columnsOf(entry.name)]));
  const indexes = Object.fromEntries(
    entries
      .filter((entry) => entry.type === "index")
      .map((entry) => {
        const columns = (db.prepare(`PRAGMA index_info("${entry.name}")`).all() as { name: string }[]).map((column) => column.name);
        const unique = /^CREATE UNIQUE/i.test(entry.sql ?? "");
        const where =
          /\sWHERE\s(.*)$/is
            .exec(entry.sql ?? "")?.[1]
            ?.replace(/[\s`"]/g, "")
            .toLowerCase() ?? "";
        return [entry.name, `${entry.tbl_name}(${columns.join(",")})${unique ? " unique" : ""}${where ? ` where ${where}` : ""}`];
      }),
  );
  db.close();
  return { tables, indexes };
}

describe("the database schema", () => {
  it("migrations/ build exactly the tables, columns and indexes src/db/schema/ declares", () => {
    const fromSchema = join(dir, "from-schema");
    generate(fromSchema);
    const built = described("migrations", sqlFiles("migrations"));
    expect(Object.keys(built.tables).length).toBeGreaterThan(30);
    expect(built).toEqual(described(fromSchema, sqlFiles(fromSchema)));
  }, 60_000);

  it("has drizzle-kit's snapshot up to date: generating now finds nothing to write", () => {
    const copy = join(dir, "migrations");
    cpSync("migrations", copy, { recursive: true });
    expect(generate(copy)).toContain("No schema changes, nothing to migrate");
    expect(sqlFiles(copy)).toEqual(sqlFiles("migrations"));
  }, 60_000);
});

describe("the streams migrations (issue #44)", () => {
  it("gives today's unsubscribes the broadcast scope, keeps bounces and complaints for all mail, makes campaign mail and its counts broadcast", () => {
    const files = sqlFiles("migrations");
    // Rows as they stood before the first of them; then both migrations.
    const streams = files.findIndex((file) => file.endsWith("_streams_topics_forms.sql"));
    expect(streams).toBeGreaterThan(0);
    const db = new DatabaseSync(":memory:");
    // The rows below stand alone: no account or domain rows for their keys to point at.
    db.exec("PRAGMA foreign_keys = OFF");
    const apply = (file: string) => db.exec(readFileSync(join("migrations", file), "utf8").replaceAll("--> statement-breakpoint", ""));
    for (const file of files.slice(0, streams)) apply(file);
    db.exec(`
      INSERT INTO suppressions (account_id, email, reason) VALUES
        ('acc_1', 'left@example.com', 'unsubscribe'), ('acc_1', 'gone@example.com', 'bounce'),
        ('acc_1', 'angry@example.com', 'complaint'), ('acc_1', 'hand@example.com', 'manual');
      INSERT INTO messages (id, account_id, source, status, from_address, domain_id, subject, tags, metadata, credits_charged, campaign_id) VALUES
        ('msg_c', 'acc_1', 'campaign', 'sent', 'a@x.example', 'dom_1', 's', '[]', '{}', 1, 'cmp_1'),
        ('msg_a', 'acc_1', 'api', 'sent', 'a@x.example', 'dom_1', 's', '[]', '{}', 1, NULL);
      INSERT INTO daily_stats (account_id, day, domain, provider, campaign_id, sent) VALUES
        ('acc_1', '2026-11-01', 'x.example', 'gmail', 'cmp_1', 5), ('acc_1', '2026-11-01', 'x.example', 'gmail', '', 7);`);
    for (const file of files.slice(streams)) apply(file);
    expect(db.prepare("SELECT email, reason, scope FROM suppressions ORDER BY email").all()).toEqual([
      { email: "angry@example.com", reason: "complaint", scope: "all" },
      { email: "gone@example.com", reason: "bounce", scope: "all" },
      { email: "hand@example.com", reason: "manual", scope: "all" },
      { email: "left@example.com", reason: "unsubscribe", scope: "broadcast" },
    ]);
    expect(db.prepare("SELECT campaign_id, stream, sent FROM daily_stats ORDER BY campaign_id").all()).toEqual([
      { campaign_id: "", stream: "transactional", sent: 7 },
      { campaign_id: "cmp_1", stream: "broadcast", sent: 5 },
    ]);
    expect(db.prepare("SELECT id, stream FROM messages ORDER BY id").all()).toEqual([
      { id: "msg_a", stream: "transactional" },
      { id: "msg_c", stream: "broadcast" },
    ]);
    db.close();
  });
});

describe("the account balances migration (issue #43)", () => {
  it("copies every account's balances into account_balances and drops them from accounts", () => {
    const files = sqlFiles("migrations");
    const moved = files.findIndex((file) => file.endsWith("_account_balances.sql"));
    expect(moved).toBeGreaterThan(0);
    const db = new DatabaseSync(":memory:");
    const apply = (file: string) => db.exec(readFileSync(join("migrations", file), "utf8").replaceAll("--> statement-breakpoint", ""));
    for (const file of files.slice(0, moved)) apply(file);
    db.exec(`
      INSERT INTO accounts (id, name, features, daily_send_limit, rate_limit_per_minute, send_balance, send_reserved, verify_balance, updated_at) VALUES
        ('acc_1', 'one', '[]', 100, 60, 250, 40, 12, '2026-11-01T10:00:00.000Z'),
        ('acc_2', 'two', '[]', 100, 60, 0, 0, 0, '2026-11-02T10:00:00.000Z');`);
    for (const file of files.slice(moved)) apply(file);
    expect(
      db.prepare("SELECT account_id, send_balance, send_reserved, verify_balance, updated_at FROM account_balances ORDER BY account_id").all(),
    ).toEqual([
      { account_id: "acc_1", send_balance: 250, send_reserved: 40, verify_balance: 12, updated_at: "2026-11-01T10:00:00.000Z" },
      { account_id: "acc_2", send_balance: 0, send_reserved: 0, verify_balance: 0, updated_at: "2026-11-02T10:00:00.000Z" },
    ]);
    const columns = (db.prepare(`PRAGMA table_info("accounts")`).all() as { name: string }[]).map((column) => column.name);
    expect(columns).not.toContain("send_balance");
    expect(columns).not.toContain("send_reserved");
    expect(columns).not.toContain("verify_balance");
    db.close();
  });
});
