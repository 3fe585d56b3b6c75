// What the docs show a newcomer about the local stack, checked against the stack `npm run dev` starts: each recipe's
// curl commands run as written (addresses and key swapped for this stack's, and example.org for a domain of this run's:
// the stack is shared, and the Worker keeps a name another file found missing for a minute), and every answer a recipe
// shows (`# {…}`, where `…` stands for anything) is what the command printed.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { describe, expect, inject, it } from "vitest";

const stack = inject("e2eStack");
const domain = `recipe-${Date.now().toString(36)}.example`;

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
    const ours = line.replaceAll("example.org", domain);
    if (ours.startsWith("curl ")) steps.push({ command: ours });
    else if (ours.startsWith("# ") && steps.length > 0) steps.at(-1)!.shown = ours.slice(2);
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

describe("the README's picture of npm run dev", () => {
  it("shows every line npm run dev prints once it is running, as printed with the default ports and state directory", async () => {
    const printed = stack.output.slice(stack.output.indexOf("Mailforge is running."));
    const banner = printed.slice(0, printed.indexOf("\n", printed.indexOf("Ctrl-C stops everything")));
    const defaults: Record<string, number> = {
      WORKER_PORT: 8787,
      DOH_PORT: 8053,
      SINK_SMTP_PORT: 1025,
      SINK_HTTP_PORT: 8025,
      BRIDGE_SMTP_PORT: 2587,
      BRIDGE_ALT_PORT: 2525,
      BRIDGE_SMTPS_PORT: 2465,
      PROBER_PORT: 2580,
      DEV_MX_PORT: 2555,
    };
    // Secrets and ids as the README writes them, then this stack's ports and state directory as a newcomer's would be.
    let expected = banner
      .replace(/sk_live_[0-9A-Za-z]+/g, "sk_live_…")
      .replace(/acc_[0-9A-Za-z]+/g, "acc_…")
      .replace(/smtp_[0-9A-Za-z]+/g, "smtp_…")
      .replace(/(Operator token|password|--auth-password) \S+/g, "$1 …")
      .replaceAll(stack.stateDir, ".dev");
    for (const [name, port] of Object.entries(stack.ports)) expected = expected.replace(new RegExp(`\\b${port}\\b`, "g"), String(defaults[name]));
    const readme = readFileSync("README.md", "utf8");
    const shown = /and prints:\n\n```\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(shown?.trimEnd().split("\n")).toEqual(expected.trimEnd().split("\n"));
  });
});
