import { defineConfig } from "vitest/config";

// Node-side suites: the dev DoH server, the dev mail sink, the SMTP bridge and the end-to-end stack tests.
export default defineConfig({
  test: {
    include: ["scripts/**/*.test.ts", "smtp-bridge/test/**/*.test.ts", "test/node/**/*.test.ts", "test/e2e/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
