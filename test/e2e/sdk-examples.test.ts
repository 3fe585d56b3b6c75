// The SDK and the examples against the real local stack, as a user would run them: the SDK built from sdk/, a
// script outside the repository importing it, and each file of examples/ run with tsx.

import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { eventually, freePort } from "./stack.ts";

const run = promisify(execFile);
const root = process.cwd();
const tsx = join(root, "node_modules/.bin/tsx");

const stack = inject("e2eStack");
let outside: string;

/** `npm test` builds the SDK in its typecheck step just before; a build older than any of its sources is redone. */
async function sdkBuildIsCurrent(): Promise<boolean> {
  const built = await stat(join(root, "sdk/dist/index.js")).catch(() => undefined);
  if (!built) return false;
  const sources = await readdir(join(root, "sdk/src"), { recursive: true });
  const times = await Promise.all(sources.map(async (file) => (await stat(join(root, "sdk/src", file))).mtimeMs));
  return times.every((time) => time <= built.mtimeMs);
}

beforeAll(async () => {
  if (!(await sdkBuildIsCurrent())) await run("npm", ["run", "build", "-w", "sdk"], { cwd: root });
  // A project outside the repository that installed the SDK from sdk/ (what `npm install ../mailforge/sdk` makes).
  outside = await mkdtemp(join(tmpdir(), "mailforge-sdk-user-"));
  await mkdir(join(outside, "node_modules/@mailforge"), { recursive: true });
  await symlink(join(root, "sdk"), join(outside, "node_modules/@mailforge/sdk"), "dir");
}, 180_000);

afterAll(async () => {
  if (outside) await rm(outside, { recursive: true, force: true });
});

type SinkMessage = { id: string; subject: string };

async function sinkMessageTo(address: string): Promise<SinkMessage> {
  return eventually(async () => {
    const response = await fetch(`${stack.sinkUrl}/api/messages?to=${encodeURIComponent(address)}`);
    return ((await response.json()) as { data: SinkMessage[] }).data[0];
  });
}

const userScript = (body: string) => `import { createClient } from "@mailforge/sdk";
const mf = createClient({ baseUrl: process.env.MAILFORGE_URL ?? "", apiKey: process.env.MAILFORGE_API_KEY ?? "" });
${body}
`;

describe("the SDK from outside the repository", () => {
  it("sends through the dev stack and reads the message back, typed end to end", async () => {
    const to = `sdk-${Date.now().toString(36)}@example.org`;
    const script = join(outside, "send.mts");
    await writeFile(
      script,
      userScript(`const sent = await mf.POST("/api/v1/send", {
  body: { from: "Demo <hello@demo.mailforge.test>", to: [${JSON.stringify(to)}], subject: "From the SDK", text: "typed" },
  headers: { "Idempotency-Key": "sdk-test-1" },
});
if (sent.error) throw new Error(sent.error.code);
const id: string = sent.data.id;
const read = await mf.GET("/api/v1/messages/{id}", { params: { path: { id } } });
if (read.error) throw new Error(read.error.code);
const subject: string = read.data.subject;
const missing = await mf.GET("/api/v1/messages/{id}", { params: { path: { id: "msg_nope" } } });
console.log(JSON.stringify({ id, subject, missing: missing.error, status: missing.response.status }));
`),
    );
    const env = { ...process.env, MAILFORGE_URL: stack.workerUrl, MAILFORGE_API_KEY: stack.apiKey };
    const { stdout } = await run(process.execPath, [script], { env, cwd: outside });
    const result = JSON.parse(stdout) as { id: string; subject: string; missing: { code: string; message: string }; status: number };
    expect(result.id).toMatch(/^msg_/);
    expect(result.subject).toBe("From the SDK");
    // Errors come back in the API's shape.
    expect(result.status).toBe(404);
    expect(result.missing).toMatchObject({ code: "not_found", message: expect.any(String) });
    expect((await sinkMessageTo(to)).subject).toBe("From the SDK");

    // The types come from the OpenAPI document: the same script type-checks, a misspelt body field does not.
    const tsc = join(root, "sdk/node_modules/.bin/tsc");
    // --skipLibCheck, as `tsc --init` sets it: the SDK's .d.ts files are emitted from sources its own build checks, and
    // checking them (and lib.dom, @types/node) again here tripled the run's CPU for nothing the script's types need.
    const flags = [
      "--noEmit",
      "--skipLibCheck",
      "--strict",
      "--module",
      "nodenext",
      "--moduleResolution",
      "nodenext",
      "--target",
      "es2022",
      "--lib",
      "es2023,dom",
      "--types",
      "node",
    ];
    const typeRoots = ["--typeRoots", join(root, "node_modules/@types")];
    const misspelt = join(outside, "misspelt.mts");
    await writeFile(
      misspelt,
      userScript(`await mf.POST("/api/v1/send", { body: { from: "a@b.example", to: ["c@d.example"], subjekt: "typo", text: "x" } });`),
    );
    // One compiler run for both scripts (each run loads the SDK's 300 KB of types): it fails, and every error it
    // reports is in the misspelt script.
    const failed = await run(tsc, [...flags, ...typeRoots, script, misspelt], { cwd: outside }).then(
      () => ({ stdout: "" }),
      (error: { stdout: string }) => error,
    );
    const errors = failed.stdout.split("\n").filter((line) => /error TS\d+/.test(line));
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.filter((line) => !line.startsWith("misspelt.mts"))).toEqual([]);
    expect(failed.stdout).toContain("subjekt");
  }, 120_000);
});

describe("examples/", () => {
  const env = () => ({ ...process.env, MAILFORGE_URL: stack.workerUrl, MAILFORGE_API_KEY: stack.apiKey });

  it("send-with-sdk.ts sends a message that reaches the sink and is sent", async () => {
    const to = `example-sdk-${Date.now().toString(36)}@example.org`;
    const { stdout } = await run(tsx, ["examples/send-with-sdk.ts", to], { env: env(), cwd: root });
    const result = JSON.parse(stdout) as { id: string; credits_charged: number; status: string };
    expect(result).toMatchObject({ id: expect.stringMatching(/^msg_/), credits_charged: 1, status: "sent" });
    expect((await sinkMessageTo(to)).subject).toBe("Hello Ann");
  }, 60_000);

  it("smtp-nodemailer.ts relays through the SMTP bridge", async () => {
    const demo = JSON.parse(await readFile(join(stack.stateDir, "demo.json"), "utf8")) as { smtp: { username: string; password: string } };
    const to = `example-smtp-${Date.now().toString(36)}@example.org`;
    const { stdout } = await run(tsx, ["examples/smtp-nodemailer.ts", to], {
      env: {
        ...env(),
        MAILFORGE_SMTP_PORT: String(stack.ports.BRIDGE_SMTP_PORT),
        MAILFORGE_SMTP_USER: demo.smtp.username,
        MAILFORGE_SMTP_PASS: demo.smtp.password,
        MAILFORGE_SMTP_INSECURE_TLS: "1",
      },
      cwd: root,
    });
    const result = JSON.parse(stdout) as { response: string; accepted: string[] };
    expect(result.response).toMatch(/^250 .*queued as msg_/);
    expect(result.accepted).toEqual([to]);
    expect((await sinkMessageTo(to)).subject).toBe("Hello over SMTP");
  }, 60_000);

  it("webhook-receiver.ts accepts a real signed delivery and refuses a tampered one", async () => {
    const port = await freePort();
    const created = await fetch(`${stack.workerUrl}/api/v1/webhooks`, {
      method: "POST",
      headers: { Authorization: `Bearer ${stack.apiKey}`, "Content-Type": "application/json" },
      body: JSON.stringify({ url: `http://127.0.0.1:${port}/`, events: ["relay.sent"] }),
    });
    expect(created.status).toBe(201);
    const { id: endpointId, secret } = (await created.json()) as { id: string; secret: string };
    const receiver: ChildProcess = spawn(tsx, ["examples/webhook-receiver.ts"], {
      env: { ...process.env, MAILFORGE_WEBHOOK_SECRET: secret, PORT: String(port) },
      cwd: root,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let output = "";
    receiver.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    try {
      await eventually(async () => (output.includes('"listening"') ? true : undefined));
      const sent = await fetch(`${stack.workerUrl}/api/v1/send`, {
        method: "POST",
        headers: { Authorization: `Bearer ${stack.apiKey}`, "Content-Type": "application/json" },
        body: JSON.stringify({ from: "hello@demo.mailforge.test", to: ["hook@example.org"], subject: "hook", text: "hook" }),
      });
      const { id } = (await sent.json()) as { id: string };
      const line = await eventually(async () => output.split("\n").find((entry) => entry.includes(id)));
      expect(JSON.parse(line)).toMatchObject({ type: "relay.sent", message_id: id });

      const body = JSON.stringify({ id: "evt_forged", type: "relay.sent", created_at: new Date().toISOString(), data: { message_id: "msg_forged" } });
      const forged = await fetch(`http://127.0.0.1:${port}/`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Service-Signature": `t=${Math.floor(Date.now() / 1000)},v1=${"0".repeat(64)}` },
        body,
      });
      expect(forged.status).toBe(400);
      expect(await forged.text()).toBe("signature_mismatch");
      expect(output).not.toContain("msg_forged");
    } finally {
      receiver.kill();
      // The stack and its demo account outlive this file: later files' sends must not queue deliveries to a closed port.
      await fetch(`${stack.workerUrl}/api/v1/webhooks/${endpointId}`, { method: "DELETE", headers: { Authorization: `Bearer ${stack.apiKey}` } });
    }
  }, 60_000);
});
