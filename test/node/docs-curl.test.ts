// The curl commands in README.md and docs/ are what a newcomer pastes first. The API takes JSON only, and curl's `-d`
// sends `Content-Type: application/x-www-form-urlencoded` unless told otherwise, so a documented command with a body
// but no JSON content type answers 422. Every such command to the main or the operator API must say it is JSON.
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const files = [
  "README.md",
  ...readdirSync("docs")
    .filter((file) => file.endsWith(".md"))
    .map((file) => `docs/${file}`),
];

/** Each curl command of a file's code (fenced blocks and inline spans), its continuation lines joined. */
function curlCommands(markdown: string): string[] {
  const fenced = [...markdown.matchAll(/^```[^\n]*\n([\s\S]*?)^```/gm)].map(([, code]) => code!);
  const inline = [...markdown.replace(/^```[\s\S]*?^```/gm, "").matchAll(/`([^`\n]+)`/g)].map(([, code]) => code!);
  return [...fenced, ...inline].flatMap((code) => code.replace(/\\\n/g, " ").split("\n")).flatMap((line) => line.match(/\bcurl\b.*/)?.[0] ?? []);
}

const sendsBody = (command: string) => /\s(-d|--data|--data-raw|--data-binary|--data-urlencode)[\s=]/.test(command);
const toTheApi = (command: string) => /\/(api|admin)\/v1\//.test(command);
const saysJson = (command: string) => /-H\s+["']Content-Type:\s*application\/json["']/i.test(command) || /\s--json\s/.test(command);

describe("the documented curl commands", () => {
  it("are found", () => {
    const commands = files.flatMap((file) => curlCommands(readFileSync(file, "utf8")));
    expect(commands.filter((command) => sendsBody(command) && toTheApi(command)).length).toBeGreaterThan(5);
  });

  it.each(files)("%s: every one with a body to /api/v1/ or /admin/v1/ sends it as JSON", (file) => {
    const missing = curlCommands(readFileSync(file, "utf8")).filter((command) => sendsBody(command) && toTheApi(command) && !saysJson(command));
    expect(missing).toEqual([]);
  });
});
