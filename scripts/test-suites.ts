// `npm test`: lint, then the SDK's build (the scripts' typecheck and the e2e SDK test read it), then at once the rest
// of the typecheck, the Workers-runtime suite and the Node suite, failing if any fails. On 2 cores the three fit
// together: most of a Node-side file's time is waiting on servers, and the typecheck is one core for half a minute.
// A Node script rather than a shell line (`a & b; wait`), so that `npm test` runs the same under cmd.exe as under sh.
import { spawn } from "node:child_process";
import { resolve } from "node:path";

const npm = process.platform === "win32" ? "npm.cmd" : "npm";

// `npm run test:full`: the fuzzer's full count (vitest.config.ts reads it), set here rather than in package.json so it
// works under cmd.exe too.
if (process.argv.includes("--full")) process.env.FUZZ_REQUESTS_PER_OPERATION = "70";

// Node's on-disk cache of compiled code for every Node process the suites start (Vitest, each wrangler and tsx run, the
// e2e stack's processes): the second start of wrangler's 10 MB bundle skips most of its compiling.
process.env.NODE_COMPILE_CACHE ??= resolve("node_modules/.cache/node-compile");

function run(...args: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(npm, ["run", ...args], { stdio: "inherit", shell: process.platform === "win32" });
    child.once("error", () => resolve(1));
    child.once("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

const failed = (codes: number[]) => codes.find((code) => code !== 0);

for (const step of [["lint"], ["build", "-w", "sdk"]]) {
  const code = await run(...step);
  if (code !== 0) process.exit(code);
}
process.exit(failed(await Promise.all([run("typecheck:code"), run("test:worker"), run("test:node")])) ?? 0);
