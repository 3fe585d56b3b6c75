// What the docs show a newcomer about the local stack, checked against the stack `npm run dev` starts: each recipe's
// curl commands run as written (addresses and key swapped for this stack's), and every answer a recipe shows
// (`# {…}`, where `…` stands for anything) is what the command printed.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { describe, expect, inject, it } from "vitest";

const stack = inject("e2eStack");

/** The first `sh` block after the heading `heading` of a markdown file. */
function shellBlockAfter(file: string, heading: string): string {
  const markdown = readFileSync(file, "utf8");
  const start = markdown.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`${file} has no heading "${heading}"`);
  const block = /```sh\n([\s\S]*?)```/.exec(markdown.slice(start));
  if (!block) throw new Error(`${file} has no sh block after "${heading}"`);
  return block[1]!;
}

/** Each curl command of a block (continuation lines joined) with the answer shown under it, if any. */
function recipe(block: string): { command: string; shown?: string }[] {
  const steps: { command: string; shown?: string }[] = [];
  for (const line of block.replace(/\\\n\s*/g, "").split("\n")) {
    if (line.startsWith("curl ")) steps.push({ command: line });
    else if (line.startsWith("# ") && steps.length > 0) steps.at(-1)!.shown = line.slice(2);
  }
  return steps;
}

const asPattern = (shown: string) =>
  new RegExp(
    `^${shown
      .split("…")
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
    "s",
  );

async function run(command: string): Promise<string> {
  const here = command.replaceAll("http://127.0.0.1:8787", stack.workerUrl).replaceAll("http://127.0.0.1:8053", stack.dohAdminUrl);
  const { stdout } = await promisify(execFile)("sh", ["-c", `${here.replace(/^curl /, "curl -sS ")}`], {
    env: { ...process.env, KEY: stack.apiKey },
  });
  return stdout.trim();
}

describe("the docs' local recipes, run against npm run dev", () => {
  it("docs/verification.md, In the local stack: the answers shown are the answers given", async () => {
    const steps = recipe(shellBlockAfter("docs/verification.md", "## In the local stack"));
    expect(steps.filter((step) => step.shown).length).toBeGreaterThan(0);
    for (const step of steps) {
      const printed = await run(step.command);
      if (step.shown) expect(printed, step.command).toMatch(asPattern(step.shown));
    }
  }, 60_000);
});
