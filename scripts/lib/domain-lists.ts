// `npm run lists`: writes the disposable and free-provider domain lists the Worker loads as text modules
// (src/domain/verification/data/*.txt, wrangler.toml's [[rules]]). The npm packages stay the source; the Worker gets
// one domain a line instead of a JavaScript array, which is half the bytes and costs nothing to parse at startup.
// test/node/domain-lists.test.ts fails when an updated package was not regenerated.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
export const dataDir = join(root, "src/domain/verification/data");

function readList(path: string): string[] {
  const list: unknown = JSON.parse(readFileSync(join(root, "node_modules", path), "utf8"));
  if (!Array.isArray(list) || !list.every((item) => typeof item === "string")) throw new Error(`${path} is not a list of strings`);
  return list;
}

export function domainLists(): Record<string, string> {
  const disposable = [
    ...new Set(readList("disposable-email-domains-js/dist/dict/disposable_email_blocklist.json").map((d) => d.toLowerCase())),
  ].sort();
  const disposableSet = new Set(disposable);
  // free-email-domains merges disposable lists into its own; a domain is free-provider only if it is not disposable,
  // so the two flags never contradict each other (and the shipped list is a third of the package's).
  const free = [...new Set(readList("free-email-domains/domains.json").map((d) => d.toLowerCase()))].filter((d) => !disposableSet.has(d)).sort();
  return { "disposable-domains.txt": `${disposable.join("\n")}\n`, "free-domains.txt": `${free.join("\n")}\n` };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const [name, text] of Object.entries(domainLists())) writeFileSync(join(dataDir, name), text);
}
