import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** What the tests need to reach a running stack; plain data, so a global setup can `provide` it to the test files. */
export type StackInfo = {
  workerUrl: string;
  dohUrl: string;
  dohAdminUrl: string;
  sinkUrl: string;
  ports: Record<string, number>;
  apiKey: string;
  accountId: string;
  stateDir: string;
  /** What `npm run dev` printed, up to the end of its banner ("Mailforge is running" … "Ctrl-C stops everything"). */
  output: string;
};

export type Stack = StackInfo & { stop(): Promise<void> };

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

const handedOut = new Set<number>();

/**
 * A port free now, for a server that binds it a moment later. Chosen below 32768, outside the ranges Linux (32768-60999)
 * and macOS (49152-65535) pick from for port 0: the Node suite's files bind their servers to port 0 while the stack
 * starts, and could otherwise be handed a port between our check and the stack's bind.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_768);
    if (handedOut.has(port) || !(await bindable(port))) continue;
    handedOut.add(port);
    return port;
  }
}

/**
 * Starts the real local stack (`npm run dev`'s script) on free ports with its own state directory and waits
 * until it has seeded the demo account: what a newcomer gets, driven from a test.
 */
export async function startStack(): Promise<Stack> {
  const names = [
    "WORKER_PORT",
    "DOH_PORT",
    "SINK_SMTP_PORT",
    "SINK_HTTP_PORT",
    "BRIDGE_SMTP_PORT",
    "BRIDGE_ALT_PORT",
    "BRIDGE_SMTPS_PORT",
    "PROBER_PORT",
    "DEV_MX_PORT",
  ];
  const ports: Record<string, number> = {};
  for (const name of names) ports[name] = await freePort();
  const stateDir = await mkdtemp(join(tmpdir(), "mailforge-e2e-"));
  const child: ChildProcess = spawn(join(process.cwd(), "node_modules/.bin/tsx"), ["scripts/dev.ts"], {
    env: { ...process.env, ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])), DEV_STATE_DIR: stateDir },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  // Whatever way this process ends (a Ctrl-C while the stack is still starting included), the stack ends with it.
  const stopOnExit = () => {
    try {
      if (child.pid && child.exitCode === null) process.kill(-child.pid, "SIGINT");
    } catch {
      // already gone
    }
  };
  process.once("exit", stopOnExit);
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`stack did not start in time:\n${output.slice(-3000)}`)), 90_000);
    const check = setInterval(() => {
      // The banner's last line: the whole banner is in `output` then, not only its first chunk.
      if (/Mailforge is running[\s\S]*Ctrl-C stops everything.*\n/.test(output)) {
        clearTimeout(timer);
        clearInterval(check);
        resolve();
      }
    }, 200);
    child.once("exit", (code) => {
      clearTimeout(timer);
      clearInterval(check);
      reject(new Error(`stack exited with ${code}:\n${output.slice(-3000)}`));
    });
  });
  const demo = JSON.parse(await readFile(join(stateDir, "demo.json"), "utf8")) as { account_id: string; api_key: string };
  return {
    workerUrl: `http://127.0.0.1:${ports.WORKER_PORT}`,
    dohUrl: `http://127.0.0.1:${ports.DOH_PORT}/dns-query`,
    dohAdminUrl: `http://127.0.0.1:${ports.DOH_PORT}`,
    sinkUrl: `http://127.0.0.1:${ports.SINK_HTTP_PORT}`,
    ports,
    apiKey: demo.api_key,
    accountId: demo.account_id,
    stateDir,
    output,
    async stop() {
      process.off("exit", stopOnExit);
      if (child.pid && child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        process.kill(-child.pid, "SIGINT");
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
      }
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}

/** Polls until `check` returns a value. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
