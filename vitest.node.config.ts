import { defineConfig } from "vitest/config";

// Node-side suites: the dev DoH server, the dev mail sink, the SMTP bridge and the end-to-end stack tests.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Each node file listens on ports the system picks (port 0), so two run at once beside the e2e file of the moment;
    // Vitest's default of cores − 1 would be one at a time on 2 cores.
    maxWorkers: 3,
    projects: [
      {
        extends: true,
        test: {
          name: "node",
          include: ["scripts/**/*.test.ts", "smtp-bridge/test/**/*.test.ts", "test/node/**/*.test.ts", "sdk/test/**/*.test.ts"],
        },
      },
      {
        extends: true,
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          // One local stack for all of them, started before any test file runs (so no file's port-0 server takes a
          // port the stack was about to bind) and stopped after the last.
          globalSetup: ["./test/e2e/global-setup.ts"],
          // One file at a time: they share the stack's demo account and the machine's two cores with a browser.
          fileParallelism: false,
        },
      },
    ],
  },
});
