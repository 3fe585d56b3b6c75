import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

export default defineConfig(async () => {
  const migrations = await readD1Migrations("./migrations");
  return {
    plugins: [
      cloudflareTest(({ inject }) => ({
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          bindings: {
            TEST_MIGRATIONS: migrations,
            ADMIN_TOKEN: "test-admin-token",
            BRIDGE_SECRET: "test-bridge-secret",
            DKIM_ENCRYPTION_KEY: "dGVzdC1ka2ltLWVuY3J5cHRpb24ta2V5LTMyYnl0ZXM=",
            SMTP_UPSTREAM_USER: "",
            SMTP_UPSTREAM_PASS: "",
            DOH_URL: inject("dohUrl"),
            SMTP_UPSTREAM_HOST: "127.0.0.1",
            SMTP_UPSTREAM_PORT: String(inject("sinkSmtpPort")),
            SMTP_UPSTREAM_SECURE: "off",
            ALLOW_PRIVATE_WEBHOOK_URLS: "true",
            // Short retry delays so the retry paths run through the real queue within a test.
            SEND_RETRY_BASE_SECONDS: "1",
            SEND_MAX_ATTEMPTS: "3",
            TEST_SINK_HTTP_URL: inject("sinkHttpUrl"),
            TEST_FAULT_SINK_SMTP_PORT: String(inject("faultSinkSmtpPort")),
            TEST_FAULT_SINK_HTTP_URL: inject("faultSinkHttpUrl"),
            TEST_DOH_ADMIN_URL: inject("dohAdminUrl"),
            TEST_WEBHOOK_RECEIVER_URL: inject("webhookReceiverUrl"),
          },
        },
      })),
    ],
    test: {
      include: ["test/**/*.test.ts"],
      exclude: ["test/e2e/**", "test/node/**"],
      globalSetup: ["./test/setup/global-setup.ts"],
      setupFiles: ["./test/setup/apply-migrations.ts"],
    },
  };
});
