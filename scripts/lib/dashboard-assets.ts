// The third-party scripts of the dashboard and of the API reference (/api/v1/docs) are served by Workers static assets
// from public/, never from a CDN. They are copied from node_modules (the versions package-lock.json pins) rather than
// committed, so an `npm update` is the whole upgrade. `npm run dev`, `npm run assets` and `npm run deploy` run this first.
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");

// Each file's place under public/ (git-ignored vendor/ folders) and its source in node_modules.
const vendored = {
  "dashboard/assets/vendor/htmx.min.js": "node_modules/htmx.org/dist/htmx.min.js",
  "dashboard/assets/vendor/uPlot.iife.min.js": "node_modules/uplot/dist/uPlot.iife.min.js",
  "dashboard/assets/vendor/uPlot.min.css": "node_modules/uplot/dist/uPlot.min.css",
  "api-reference/vendor/scalar.js": "node_modules/@scalar/api-reference/dist/browser/standalone.js",
};

export function copyDashboardAssets(): void {
  for (const [target, source] of Object.entries(vendored)) {
    const path = join(root, "public", target);
    mkdirSync(dirname(path), { recursive: true });
    copyFileSync(join(root, source), path);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) copyDashboardAssets();
