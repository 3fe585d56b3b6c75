// `npm test`: lint, the typecheck, the Workers-runtime suite and the Node suite, failing if any fails. The Workers
// suite starts at once; the typecheck and the Node suite start once lint has passed and the SDK is built (the scripts'
// typecheck and the e2e SDK test read the build). On 2 cores they fit together: most of a Node-side file's time is
// waiting on servers, and the typecheck is one core for half a minute. A lint or build failure stops everything.
// A Node script rather than a shell line (`a & b; wait`), so that `npm test` runs the same under cmd.exe as under sh.
import { spawn, type ChildProcess } from "node:child_process";
import { resolve } from "node:path";

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

function stopAll(code: number): never {
  for (const child of running) {
    try {
      if (windows) child.kill();
      else if (child.pid) process.kill(-child.pid, "SIGINT");
    } catch {
      // already gone
    }
  }
  process.exit(code);
}

// The children are in groups of their own, so a Ctrl-C at the terminal reaches only this process: pass it on.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => stopAll(130));

const workers = run("test:worker");
for (const step of [["lint"], ["build", "-w", "sdk"]]) {
  const code = await run(...step);
  if (code !== 0) stopAll(code);
}
// The Node suite's two projects as two Vitest processes: in one, every file would wait for the e2e project's global
// setup (starting the local stack, ~20-40 s) although only the e2e files use it.
const codes = await Promise.all([
  run("typecheck:code"),
  workers,
  run("test:node", "--", "--project", "node"),
  run("test:node", "--", "--project", "e2e"),
]);
process.exit(codes.find((code) => code !== 0) ?? 0);
