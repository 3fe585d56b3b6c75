import type { D1Migration } from "cloudflare:test";

declare global {
  namespace Cloudflare {
    interface Env {
      TEST_MIGRATIONS: D1Migration[];
      TEST_SINK_HTTP_URL: string;
      TEST_FAULT_SINK_SMTP_PORT: string;
      TEST_FAULT_SINK_HTTP_URL: string;
      TEST_DOH_ADMIN_URL: string;
      TEST_WEBHOOK_RECEIVER_URL: string;
      TEST_AI_PROVIDER_URL: string;
      TEST_FUZZ_REQUESTS_PER_OPERATION: string;
      TEST_PROBER_URL: string;
      TEST_PROBER_SECRET: string;
    }
  }
}
