import { mkdtemp, rm, writeFile, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { createDohServer } from "../../scripts/dev/doh-server.ts";
import { createMailSink } from "../../scripts/dev/mail-sink.ts";
import { createMxHosts, DEV_MX_BEHAVIOURS, DEV_MX_ZONE } from "../../scripts/dev/mx-hosts.ts";
import { createMemoryLogger } from "../../smtp-bridge/src/log.ts";
import { loadProberConfig } from "../../smtp-bridge/src/prober/config.ts";
import { createProberServer } from "../../smtp-bridge/src/prober/server.ts";
import { createWebhookReceiver } from "../../scripts/dev/webhook-receiver.ts";

declare module "vitest" {
  export interface ProvidedContext {
    dohUrl: string;
    dohAdminUrl: string;
    sinkSmtpPort: number;
    sinkHttpUrl: string;
    faultSinkSmtpPort: number;
    faultSinkHttpUrl: string;
    webhookReceiverUrl: string;
    proberUrl: string;
  }
}

/** The key prober requests are signed with: vitest.config.ts binds it as TEST_PROBER_SECRET. */
const TEST_PROBER_SECRET = "test-prober-secret-0123456789";

// Runs in Node before the Workers-runtime suites: the real dev DoH server and mail sink on loopback,
// so DNS checks and SMTP delivery run their real code paths inside workerd.
export default async function setup(project: TestProject) {
  const dir = await mkdtemp(join(tmpdir(), "mailforge-test-"));
  const zonePath = join(dir, "zone.json");
  // the fixture zone, plus the dev stack's MX hosts and their demo domains (*.mailbox.test)
  const fixture = JSON.parse(await readFile(new URL("../fixtures/zone.json", import.meta.url), "utf8")) as Record<string, unknown>;
  await writeFile(zonePath, JSON.stringify({ ...fixture, ...DEV_MX_ZONE }));
  const doh = createDohServer({ zonePath });
  const dohPort = await doh.listen(0, "127.0.0.1");
  const sink = createMailSink();
  const sinkPorts = await sink.listen({ smtpPort: 0, httpPort: 0, host: "127.0.0.1" });
  // A second sink for the SMTP fault matrix: its rules refuse every connection or command ("*"), which would
  // disturb the other test files sharing the first sink.
  const faultSink = createMailSink();
  const faultSinkPorts = await faultSink.listen({ smtpPort: 0, httpPort: 0, host: "127.0.0.1" });
  const webhookReceiver = createWebhookReceiver();
  const webhookReceiverPort = await webhookReceiver.listen(0, "127.0.0.1");
  // Receiving mail servers on 127.0.0.2… and the mailbox prober that asks them (loopback allowed, as in dev). The
  // Worker's own PROBER_URL stays unset, so every other test sees mailbox checks off; mailbox tests set it.
  const mx = createMxHosts(DEV_MX_BEHAVIOURS);
  const mxPort = await mx.listen(0);
  const prober = createProberServer(
    loadProberConfig({
      PROBER_PORT: "0",
      PROBER_SECRET: TEST_PROBER_SECRET,
      PROBE_HELO_NAME: "probe.mailforge.test",
      PROBE_MAIL_FROM: "probe@mailforge.test",
      DOH_URL: `http://127.0.0.1:${dohPort}/dns-query`,
      PROBE_SMTP_PORT: String(mxPort),
      PROBE_ALLOW_PRIVATE: "1",
      PROBE_HOST_CONNECT_GAP_MS: "0",
    }),
    { logger: createMemoryLogger() },
  );
  const proberPort = await prober.listen();

  project.provide("dohUrl", `http://127.0.0.1:${dohPort}/dns-query`);
  project.provide("dohAdminUrl", `http://127.0.0.1:${dohPort}`);
  project.provide("sinkSmtpPort", sinkPorts.smtpPort);
  project.provide("sinkHttpUrl", `http://127.0.0.1:${sinkPorts.httpPort}`);
  project.provide("faultSinkSmtpPort", faultSinkPorts.smtpPort);
  project.provide("faultSinkHttpUrl", `http://127.0.0.1:${faultSinkPorts.httpPort}`);
  project.provide("webhookReceiverUrl", `http://127.0.0.1:${webhookReceiverPort}`);
  project.provide("proberUrl", `http://127.0.0.1:${proberPort}`);

  return async () => {
    await Promise.all([doh.close(), sink.close(), faultSink.close(), webhookReceiver.close(), prober.close(), mx.close()]);
    await rm(dir, { recursive: true, force: true });
  };
}
