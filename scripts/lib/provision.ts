// `npm run provision`: creates the Cloudflare resources wrangler.toml names and the account lacks (D1 databases,
// queues and their dead-letter queues, R2 buckets), through wrangler itself, so it uses the same login (`wrangler
// login` or CLOUDFLARE_API_TOKEN) and the same API (CLOUDFLARE_API_BASE_URL) as `wrangler deploy`. Each resource is
// looked up first and created only when missing, so running it again changes nothing. A D1 database's id is written
// into wrangler.toml in place of its placeholder, and every database (`DB` and each account database) gets the
// migrations it lacks, so a database added to wrangler.toml is ready for accounts after one run. Workflows have no
// create call: `wrangler deploy` creates them with the Worker, so they are listed as such.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { unstable_readConfig } from "wrangler";

export type Resources = { databases: { binding: string; name: string; id?: string }[]; queues: string[]; buckets: string[]; workflows: string[] };

/** What wrangler.toml (at `configPath`) binds: every queue a producer, a consumer or a dead-letter setting names. */
export function resourcesOf(configPath: string): Resources {
  const config = unstable_readConfig({ config: configPath });
  const queues = new Set<string>();
  for (const producer of config.queues.producers ?? []) queues.add(producer.queue);
  for (const consumer of config.queues.consumers ?? []) {
    queues.add(consumer.queue);
    if (consumer.dead_letter_queue) queues.add(consumer.dead_letter_queue);
  }
  const databases: { binding: string; database_name?: string; database_id?: string }[] = config.d1_databases;
  const buckets: { bucket_name?: string }[] = config.r2_buckets;
  const workflows: { name: string }[] = config.workflows;
  return {
    databases: databases.map((database) => ({ binding: database.binding, name: database.database_name!, id: database.database_id })),
    queues: [...queues],
    buckets: [...new Set(buckets.map((bucket) => bucket.bucket_name!))],
    workflows: workflows.map((workflow) => workflow.name),
  };
}

export type WranglerResult = { code: number; output: string };
export type Wrangler = (args: string[]) => Promise<WranglerResult>;

/** Runs the project's wrangler with `env` (the caller's environment by default), collecting what it prints. */
export function wranglerCli(binary: string, env: NodeJS.ProcessEnv = process.env): Wrangler {
  return (args) =>
    new Promise((resolve, reject) => {
      const child = spawn(binary, args, { env: { ...env, WRANGLER_SEND_METRICS: "false" }, stdio: ["ignore", "pipe", "pipe"] });
      let output = "";
      child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
      child.once("error", reject);
      child.once("close", (code) => resolve({ code: code ?? 1, output }));
    });
}

export type Step = {
  kind: "database" | "migrations" | "queue" | "bucket" | "workflow";
  name: string;
  action: "exists" | "created" | "applied" | "up to date" | "on deploy";
  detail?: string;
};

// wrangler.toml's placeholders: all zero but the last digits, which tell the databases apart for `wrangler dev` (it
// keeps a local database per id). D1 gives out random (version 4) UUIDs, so none of its ids looks like this.
const placeholderId = /^0{8}-0{4}-0{4}-0{4}-[0-9a-f]{12}$/;
// How `wrangler d1 migrations apply` names a migration in what it prints (its table, one row per migration).
const migrationName = /\b\d{4}_[\w-]+\.sql\b/g;
const createdDatabaseId = /"?database_id"?\s*[=:]\s*"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"/;

class ProvisionError extends Error {}

async function run(wrangler: Wrangler, args: string[]): Promise<string> {
  const result = await wrangler(args);
  if (result.code !== 0) throw new ProvisionError(`wrangler ${args.join(" ")} failed:\n${result.output.trim()}`);
  return result.output;
}

// `wrangler … info` fails both for a missing resource and for any other error; what it printed tells them apart.
const missing = /does not exist|not found|no such|NoSuchBucket|10006|11000/i;

async function exists(wrangler: Wrangler, args: string[]): Promise<boolean> {
  const result = await wrangler(args);
  if (result.code === 0) return true;
  if (missing.test(result.output)) return false;
  throw new ProvisionError(`wrangler ${args.join(" ")} failed:\n${result.output.trim()}`);
}

async function databaseIds(wrangler: Wrangler): Promise<Map<string, string>> {
  const output = await run(wrangler, ["d1", "list", "--json"]);
  const list = JSON.parse(output.slice(output.indexOf("["))) as { uuid: string; name: string }[];
  return new Map(list.map((database) => [database.name, database.uuid]));
}

/** Writes `id` as the database_id of `name` in wrangler.toml, in place of the value it has. */
function recordDatabaseId(configPath: string, name: string, previous: string | undefined, id: string): void {
  const text = readFileSync(configPath, "utf8");
  const block = text.indexOf(`database_name = "${name}"`);
  const line = previous === undefined ? -1 : text.indexOf(`database_id = "${previous}"`, text.lastIndexOf("[[d1_databases]]", block));
  if (block < 0 || line < 0) throw new ProvisionError(`add database_id = "${id}" to the d1_databases entry of ${name} in ${configPath}`);
  writeFileSync(configPath, `${text.slice(0, line)}database_id = "${id}"${text.slice(line + `database_id = "${previous}"`.length)}`);
}

/** `lookup` for every item, a few at a time (each is a wrangler process of a few seconds), answers in the items' order. */
async function lookUpAll<T>(items: string[], lookup: (item: string) => Promise<T>, atOnce = 4): Promise<T[]> {
  const answers: T[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < items.length; index = next++) answers[index] = await lookup(items[index]!);
  };
  await Promise.all(Array.from({ length: Math.min(atOnce, items.length) }, worker));
  return answers;
}

/** Creates what is missing, one resource at a time, and says what it found or did for each. Stops at the first failure. */
export async function provision(
  wrangler: Wrangler,
  configPath: string,
  report: (step: Step) => void = () => {},
): Promise<{ steps: Step[]; error?: string }> {
  const resources = resourcesOf(configPath);
  const steps: Step[] = [];
  const record = (step: Step) => {
    steps.push(step);
    report(step);
  };
  try {
    // The databases first: a refused login or account fails there, with one wrangler run. Then the queue and bucket
    // lookups a few at once (a project has ten queues); the creations one at a time, in the order reported.
    const ids = resources.databases.length > 0 ? await databaseIds(wrangler) : new Map<string, string>();
    const [queuesFound, bucketsFound] = await Promise.all([
      lookUpAll(resources.queues, (queue) => exists(wrangler, ["queues", "info", queue])),
      lookUpAll(resources.buckets, (bucket) => exists(wrangler, ["r2", "bucket", "info", bucket])),
    ]);
    for (const database of resources.databases) {
      let id = ids.get(database.name);
      const action = id ? "exists" : "created";
      if (!id) {
        // wrangler prints the new database's config snippet (`database_id = "…"`, or JSON for a wrangler.json); the
        // list is asked only if it did not, which costs another wrangler run.
        const created = await run(wrangler, ["d1", "create", database.name]);
        id = createdDatabaseId.exec(created)?.[1] ?? (await databaseIds(wrangler)).get(database.name);
        if (!id) throw new ProvisionError(`D1 database ${database.name} was created but is not listed`);
      }
      const recorded = database.id !== undefined && !placeholderId.test(database.id);
      if (!recorded) recordDatabaseId(configPath, database.name, database.id, id);
      else if (database.id !== id)
        throw new ProvisionError(`wrangler.toml names D1 database ${database.name} with id ${database.id}, but the account's has id ${id}`);
      record({ kind: "database", name: database.name, action, detail: recorded ? id : `${id} (written to wrangler.toml)` });
    }
    // One database at a time, after all exist (wrangler finds each by its binding's id in wrangler.toml). A migration
    // that fails is rolled back by wrangler and stops the run, with what it printed.
    for (const database of resources.databases) {
      const output = await run(wrangler, ["d1", "migrations", "apply", database.binding, "--remote", "--config", configPath]);
      const applied = new Set(output.match(migrationName));
      record({
        kind: "migrations",
        name: database.binding,
        action: applied.size > 0 ? "applied" : "up to date",
        ...(applied.size > 0 ? { detail: `${applied.size} migration${applied.size === 1 ? "" : "s"}` } : {}),
      });
    }
    for (const [index, queue] of resources.queues.entries()) {
      const found = queuesFound[index];
      if (!found) await run(wrangler, ["queues", "create", queue]);
      record({ kind: "queue", name: queue, action: found ? "exists" : "created" });
    }
    for (const [index, bucket] of resources.buckets.entries()) {
      const found = bucketsFound[index];
      if (!found) await run(wrangler, ["r2", "bucket", "create", bucket]);
      record({ kind: "bucket", name: bucket, action: found ? "exists" : "created" });
    }
    for (const workflow of resources.workflows)
      record({ kind: "workflow", name: workflow, action: "on deploy", detail: "created by `npm run deploy`" });
  } catch (error) {
    if (!(error instanceof ProvisionError)) throw error;
    return { steps, error: error.message };
  }
  return { steps };
}
