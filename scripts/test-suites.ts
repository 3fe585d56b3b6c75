// `npm test`: lint, the typecheck, the Workers-runtime suite and the Node suite, failing if any fails. The Workers
// suite starts at once; the typecheck and the Node suite start once lint has passed and the SDK is built (the scripts'
// typecheck and the e2e SDK test read the build). On 2 cores they fit together: most of a Node-side file's time is
// waiting on servers, and the typecheck is one core for half a minute. A lint or build failure stops everything.
// A Node script rather than a shell line (`a & b; wait`), so that `npm test` runs the same under cmd.exe as under sh.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const npm = process.platform === "win32" ? "npm.cmd" : "npm";
const windows = process.platform === "win32";

// `npm run test:full`: the fuzzer's full count (vitest.config.ts reads it), set here rather than in package.json so it
// works under cmd.exe too.
if (process.argv.includes("--full")) process.env.FUZZ_REQUESTS_PER_OPERATION = "70";
// Node's on-disk cache of compiled code for every Node process the suites start (Vitest, each wrangler and tsx run, the
// e2e stack's processes): the second start of wrangler's 10 MB bundle skips most of its compiling.
process.env.NODE_COMPILE_CACHE ??= resolve("node_modules/.cache/node-compile");

const running = new Set<ChildProcess>();

function run(...args: string[]): Promise<number> {
  return new Promise((done) => {
    // Its own process group (POSIX), so a failure elsewhere can stop it with everything it started.
    const child = spawn(npm, ["run", ...args], { stdio: "inherit", shell: windows, detached: !windows });
    running.add(child);
    child.once("error", () => done(1));
    child.once("exit", (code, signal) => {
      running.delete(child);
      done(code ?? (signal ? 1 : 0));
    });
  });
}

// Each Vitest run also writes its results as JSON here, so the last line can sum every suite: a failure in one suite
// would otherwise sit a hundred lines above the end, under another suite's output.
const resultsDir = mkdtempSync(join(tmpdir(), "mailforge-test-results-"));
const vitestSuites = ["workers", "node", "e2e"] as const;
const reporting = (suite: (typeof vitestSuites)[number]) => [
  ...(suite === "workers" ? [] : ["--project", suite]),
  "--reporter=default",
  "--reporter=json",
  `--outputFile.json=${join(resultsDir, `${suite}.json`)}`,
];
const failedSteps: { name: string; suite?: (typeof vitestSuites)[number] }[] = [];

/** The summary CI tools read, alone on the last line: every suite's tests, and the steps that failed besides. */
function summarize(): void {
  let passed = 0;
  let failed = 0;
  const failing = new Set<string>();
  for (const suite of vitestSuites) {
    const file = join(resultsDir, `${suite}.json`);
    if (!existsSync(file)) continue;
    const results = JSON.parse(readFileSync(file, "utf8")) as { numPassedTests: number; numFailedTests: number; numFailedTestSuites: number };
    passed += results.numPassedTests;
    // A file that failed to load fails no test, but is a failure all the same.
    const suiteFailures = results.numFailedTests + (results.numFailedTests === 0 ? results.numFailedTestSuites : 0);
    failed += suiteFailures;
    if (suiteFailures > 0) failing.add(suite);
  }
  rmSync(resultsDir, { recursive: true, force: true });
  // A step that failed without a failed test to show for it (lint, the typecheck, a suite that did not start) counts once.
  failed += failedSteps.filter((step) => !step.suite || !failing.has(step.suite)).length;
  if (failedSteps.length > 0) process.stdout.write(`\nFailed: ${failedSteps.map((step) => step.name).join(", ")}\n`);
  process.stdout.write(`\nTests: ${passed} passed, ${failed} failed\n`);
}

function stopAll(code: number): never {
  for (const child of running) {
    try {
      if (windows) child.kill();
      else if (child.pid) process.kill(-child.pid, "SIGINT");
    } catch {
      // already gone
    }
  }
  summarize();
  process.exit(code);
}

// The children are in groups of their own, so a Ctrl-C at the terminal reaches only this process: pass it on.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => stopAll(130));

const step = async (name: string, args: string[], suite?: (typeof vitestSuites)[number]) => {
  const code = await run(...args, ...(suite ? ["--", ...reporting(suite)] : []));
  if (code !== 0) failedSteps.push({ name, suite });
  return code;
};
const workers = step("the Workers suite", ["test:worker"], "workers");
for (const [name, args] of [
  ["lint", ["lint"]],
  ["the SDK build", ["build", "-w", "sdk"]],
] as const) {
  const code = await step(name, [...args]);
  if (code !== 0) stopAll(code);
}
// The Node suite's two projects as two Vitest processes: in one, every file would wait for the e2e project's global
// setup (starting the local stack, ~20-40 s) although only the e2e files use it.
const codes = await Promise.all([
  step("the typecheck", ["typecheck:code"]),
  workers,
  step("the Node suite", ["test:node"], "node"),
  step("the e2e suite", ["test:node"], "e2e"),
]);
summarize();
process.exit(codes.find((code) => code !== 0) ?? 0);
