// The browser the e2e files drive: Debian's Chromium through playwright-core. Its headless shell
// (`apt-get install chromium-headless-shell`, the build Playwright itself runs headless tests in) renders with the same
// Blink as the full browser for about a quarter less CPU; the full `chromium` does as well where the shell is missing.
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

export const chromiumPath = [
  process.env.CHROMIUM_PATH,
  // The binary itself: /usr/bin/chromium-headless-shell is a shell script that does not exec it, so the browser
  // would outlive a kill of its launcher.
  "/usr/lib/chromium/chromium-headless-shell",
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
].find((path): path is string => Boolean(path && existsSync(path)));

export function launchChromium(): Promise<Browser> {
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
}
