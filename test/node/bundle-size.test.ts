// The Worker's bundle stays under its size budget: `wrangler deploy --dry-run` builds it exactly as a deploy does
// (minified, with wrangler.toml's aliases) and prints the upload's size and its gzipped size, the figure Cloudflare
// checks against the plan's limit. docs/scaling.md ("Bundle and startup") has how the bytes were cut and how to find
// where new ones come from.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

// spawnSync blocks the event loop, so Vitest's own time limit cannot fire while it runs: a hung child is killed here.
const spawnLimit = { timeout: 110_000, killSignal: "SIGKILL" } as const;

const budgetKiB = 550;

describe("the Worker bundle", () => {
  const dir = mkdtempSync(join(tmpdir(), "mailforge-bundle-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it(`is under ${budgetKiB} KiB gzipped`, () => {
    // Without Vitest's NODE_ENV=test, which wrangler would compile into the bundle in place of a deploy's "production".
    const { NODE_ENV: _test, ...env } = process.env;
    const result = spawnSync(join(process.cwd(), "node_modules/.bin/wrangler"), ["deploy", "--dry-run", "--outdir", dir], {
      env: { ...env, WRANGLER_SEND_METRICS: "false" },
      encoding: "utf8",
      ...spawnLimit,
    });
    const output = result.stdout + result.stderr;
    expect(result.status, output).toBe(0);
    const gzipKiB = Number(/Total Upload: [\d.]+ KiB \/ gzip: ([\d.]+) KiB/.exec(output)?.[1]);
    expect(gzipKiB, `no "Total Upload" line in wrangler's output:\n${output}`).toBeGreaterThan(0);
    // Over budget: `npx wrangler deploy --dry-run --outdir /tmp/b --metafile /tmp/meta.json`, then the largest
    // outputs[...].inputs[...].bytesInOutput of the metafile say which module or package grew.
    expect(gzipKiB).toBeLessThan(budgetKiB);
  }, 120_000);
});
