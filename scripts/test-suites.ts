// `npm run test:suites`: the Workers-runtime and Node suites at the same time (a Node-side file mostly waits on
// servers, so it fits beside the Workers runtime's CPU), failing if either fails. A Node script rather than a shell
// line (`a & b; wait`), so that `npm test` runs the same under cmd.exe as under sh.
import { spawn } from "node:child_process";

const npm = process.platform === "win32" ? "npm.cmd" : "npm";

// `npm run test:full`: the fuzzer's full count (vitest.config.ts reads it), set here rather than in package.json so it
// works under cmd.exe too.
if (process.argv.includes("--full")) process.env.FUZZ_REQUESTS_PER_OPERATION = "70";

function run(script: string): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(npm, ["run", script], { stdio: "inherit", shell: process.platform === "win32" });
    child.once("error", () => resolve(1));
    child.once("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

const codes = await Promise.all([run("test:worker"), run("test:node")]);
process.exit(codes.find((code) => code !== 0) ?? 0);
