import { defineConfig } from "vitest/config";
import { useMemoryForTemporaryFiles } from "./test/setup/temporary-directory.ts";

useMemoryForTemporaryFiles();

// Node-side suites: the dev DoH server, the dev mail sink, the SMTP bridge and the end-to-end stack tests.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Each node file listens on ports the system picks (port 0), so several run at once (beside the e2e file of the
    // moment); Vitest's default of cores − 1 would be one at a time on 2 cores. `npm test` runs the two projects as two
    // Vitest processes (scripts/test-suites.ts), so the node files need not wait for the e2e project's stack.
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
          // One local stack for all of them, started before the first e2e file and stopped after the last. Its ports
          // are outside the range port-0 servers get (test/e2e/stack.ts), so node files may start servers meanwhile.
          globalSetup: ["./test/e2e/global-setup.ts"],
          // One file at a time: they share the stack's demo account and the machine's two cores with a browser.
          fileParallelism: false,
        },
      },
    ],
  },
});
