import { mkdtemp, rm, writeFile, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { createDohServer } from "../../scripts/dev/doh-server.ts";
import { createMailSink } from "../../scripts/dev/mail-sink.ts";
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
  }
}

// Runs in Node before the Workers-runtime suites: the real dev DoH server and mail sink on loopback,
// so DNS checks and SMTP delivery run their real code paths inside workerd.
export default async function setup(project: TestProject) {
  const dir = await mkdtemp(join(tmpdir(), "mailforge-test-"));
  const zonePath = join(dir, "zone.json");
  await writeFile(zonePath, await readFile(new URL("../fixtures/zone.json", import.meta.url)));
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

  project.provide("dohUrl", `http://127.0.0.1:${dohPort}/dns-query`);
  project.provide("dohAdminUrl", `http://127.0.0.1:${dohPort}`);
  project.provide("sinkSmtpPort", sinkPorts.smtpPort);
  project.provide("sinkHttpUrl", `http://127.0.0.1:${sinkPorts.httpPort}`);
  project.provide("faultSinkSmtpPort", faultSinkPorts.smtpPort);
  project.provide("faultSinkHttpUrl", `http://127.0.0.1:${faultSinkPorts.httpPort}`);
  project.provide("webhookReceiverUrl", `http://127.0.0.1:${webhookReceiverPort}`);

  return async () => {
    await Promise.all([doh.close(), sink.close(), faultSink.close(), webhookReceiver.close()]);
    await rm(dir, { recursive: true, force: true });
  };
}
