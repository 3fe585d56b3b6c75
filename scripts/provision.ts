// `npm run provision [-- --config path/to/wrangler.toml]`: see scripts/lib/provision.ts.
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { provision, wranglerCli } from "./lib/provision.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({ options: { config: { type: "string", default: join(root, "wrangler.toml") } } });

const { error } = await provision(wranglerCli(join(root, "node_modules/.bin/wrangler")), resolve(values.config), (step) =>
  process.stdout.write(`${step.kind.padEnd(9)} ${step.name.padEnd(28)} ${step.action}${step.detail ? `  ${step.detail}` : ""}\n`),
);
if (error) {
  process.stderr.write(`${error}\n`);
  process.exit(1);
}
