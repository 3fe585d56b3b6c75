// `npm run test:suites`: the Workers-runtime and Node suites at the same time (a Node-side file mostly waits on
// servers, so it fits beside the Workers runtime's CPU), failing if either fails. A Node script rather than a shell
// line (`a & b; wait`), so that `npm test` runs the same under cmd.exe as under sh.
import { spawn } from "node:child_process";

const npm = process.platform === "win32" ? "npm.cmd" : "npm";

function run(script: string): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(npm, ["run", script], { stdio: "inherit", shell: process.platform === "win32" });
    child.once("error", () => resolve(1));
    child.once("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

const codes = await Promise.all([run("test:worker"), run("test:node")]);
process.exit(codes.find((code) => code !== 0) ?? 0);
