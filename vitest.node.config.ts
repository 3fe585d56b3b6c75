import { defineConfig } from "vitest/config";

// Node-side suites: the dev DoH server, the dev mail sink, the SMTP bridge and the end-to-end stack tests.
export default defineConfig({
  test: {
    include: ["scripts/**/*.test.ts", "smtp-bridge/test/**/*.test.ts", "test/node/**/*.test.ts", "test/e2e/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Every file listens on ports of its own (0, or free ports for a whole stack with its own state directory), so
    // two run at once: an e2e file's stack starts while another file runs. Vitest's default of cores − 1 would be
    // one at a time on 2 cores.
    maxWorkers: 2,
  },
});
