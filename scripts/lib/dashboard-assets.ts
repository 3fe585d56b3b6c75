// The dashboard's third-party scripts are served by Workers static assets from public/, never from a CDN. They are
// copied from node_modules (the versions package-lock.json pins) rather than committed, so an `npm update` is the
// whole upgrade. `npm run dev`, `npm run assets` and `npm run deploy` run this first.
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
export const vendorDir = join(root, "public/dashboard/assets/vendor");

const vendored = {
  "htmx.min.js": "node_modules/htmx.org/dist/htmx.min.js",
  "uPlot.iife.min.js": "node_modules/uplot/dist/uPlot.iife.min.js",
  "uPlot.min.css": "node_modules/uplot/dist/uPlot.min.css",
};

export function copyDashboardAssets(): void {
  mkdirSync(vendorDir, { recursive: true });
  for (const [name, source] of Object.entries(vendored)) copyFileSync(join(root, source), join(vendorDir, name));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) copyDashboardAssets();
