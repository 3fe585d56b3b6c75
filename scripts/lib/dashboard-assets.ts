// The third-party scripts of the dashboard and of the API reference (/api/v1/docs) are served by Workers static assets
// from public/, never from a CDN. They come from the npm registry, at pinned versions, rather than being committed:
// htmx and uPlot from node_modules (package-lock.json pins them, so an `npm update` is the whole upgrade), Scalar from
// its package's tarball alone (below). `npm run dev`, `npm run assets` and `npm run deploy` run this first.
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * The API reference is one prebuilt file of @scalar/api-reference. Installing the package would put its dependencies
 * (about 180 MB: Vue, an AI SDK, icon sets, editors) in node_modules for that one file, so the tarball alone is
 * fetched with `npm pack` (from npm's cache once it has been fetched) and checked against the integrity pinned here,
 * as package-lock.json pins every other package. To upgrade: `npm view @scalar/api-reference@<version> dist.integrity`.
 */
const scalar = {
  spec: "@scalar/api-reference@1.76.0",
  integrity: "sha512-pjqwnzmA9YK3ZX+IZSICMsywm4qI6HLSngR2py9H6TvFApHHuJjkTAd+gFJfnqJDzJuro8k7ji6JCtJ2U+Byng==",
  file: "package/dist/browser/standalone.js",
};

/** The Scalar bundle, kept under node_modules/.cache after the first fetch. */
function scalarBundle(): string {
  const cached = join(root, "node_modules/.cache/mailforge-assets", `${scalar.spec.replace(/^@/, "").replace(/[@/]/g, "-")}.js`);
  if (existsSync(cached)) return cached;
  const dir = mkdtempSync(join(tmpdir(), "mailforge-scalar-"));
  try {
    const output = execFileSync("npm", ["pack", scalar.spec, "--json", "--prefer-offline", "--pack-destination", dir], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
      // npm is npm.cmd on Windows, which only a shell runs.
      shell: process.platform === "win32",
    });
    const [packed] = JSON.parse(output) as { filename: string; integrity: string }[];
    if (packed?.integrity !== scalar.integrity) {
      throw new Error(`${scalar.spec} has integrity ${packed?.integrity}, not the pinned ${scalar.integrity}`);
    }
    execFileSync("tar", ["-xzf", join(dir, packed.filename), "-C", dir, scalar.file]);
    mkdirSync(dirname(cached), { recursive: true });
    copyFileSync(join(dir, scalar.file), cached);
    return cached;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function copyDashboardAssets(): void {
  // Each file's place under public/ (git-ignored vendor/ folders) and where it comes from.
  const vendored = {
    "dashboard/assets/vendor/htmx.min.js": join(root, "node_modules/htmx.org/dist/htmx.min.js"),
    "dashboard/assets/vendor/uPlot.iife.min.js": join(root, "node_modules/uplot/dist/uPlot.iife.min.js"),
    "dashboard/assets/vendor/uPlot.min.css": join(root, "node_modules/uplot/dist/uPlot.min.css"),
    "api-reference/vendor/scalar.js": scalarBundle(),
  };
  for (const [target, source] of Object.entries(vendored)) {
    const path = join(root, "public", target);
    mkdirSync(dirname(path), { recursive: true });
    copyFileSync(source, path);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) copyDashboardAssets();
