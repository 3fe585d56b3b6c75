import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BRIDGE_SIGNATURE_HEADER, PROBE_PATH } from "@mailforge/bridge-contract";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createDohServer, type DohServer } from "../../scripts/dev/doh-server.ts";
import { createMxHosts, DEV_MX_BEHAVIOURS, DEV_MX_ZONE, type MxHosts } from "../../scripts/dev/mx-hosts.ts";
import { createMemoryLogger } from "../../smtp-bridge/src/log.ts";
import { loadProberConfig } from "../../smtp-bridge/src/prober/config.ts";
import { createProberServer, type ProberServer } from "../../smtp-bridge/src/prober/server.ts";
import { createMailboxProber } from "../../src/domain/verification/mailbox.ts";

// The Worker's prober client (src/domain/verification/mailbox.ts) against the real prober, the dev MX host of
// mailbox.test and the dev DoH server: a prober that is reading as many unverified bodies as it takes refuses more
// with 503 and Retry-After, and the client asks again once that delay has passed, within its budget.

const SECRET = "prober-client-secret-0123456789";

let dir: string;
let doh: DohServer;
let mx: MxHosts;
let prober: ProberServer;
let port: number;
const logger = createMemoryLogger();
const sockets: Socket[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "prober-client-"));
  await writeFile(join(dir, "zone.json"), JSON.stringify(DEV_MX_ZONE));
  doh = createDohServer({ zonePath: join(dir, "zone.json") });
  const dohPort = await doh.listen(0, "127.0.0.1");
  mx = createMxHosts({ "127.0.0.2": DEV_MX_BEHAVIOURS["127.0.0.2"]! });
  const smtpPort = await mx.listen(0);
  prober = createProberServer(
    loadProberConfig({
      PROBER_PORT: "0",
      PROBER_SECRET: SECRET,
      PROBE_HELO_NAME: "probe.mailforge.test",
      DOH_URL: `http://127.0.0.1:${dohPort}/dns-query`,
      PROBE_SMTP_PORT: String(smtpPort),
      PROBE_ALLOW_PRIVATE: "1",
      PROBE_HOST_CONNECT_GAP_MS: "0",
      PROBER_MAX_UNVERIFIED_REQUESTS: "1",
    }),
    { logger },
  );
  port = await prober.listen();
});

afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await prober?.close();
  await mx?.close();
  await doh?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("the Worker's prober client", () => {
  it("asks a busy prober again after its Retry-After, with what is left of the budget", async () => {
    // a forged request that sends 1 KB of its body and stalls holds the prober's one place for unverified requests
    const stalled = connect(port, "127.0.0.1");
    sockets.push(stalled);
    stalled.resume();
    stalled.write(
      `POST ${PROBE_PATH} HTTP/1.1\r\nHost: prober\r\n${BRIDGE_SIGNATURE_HEADER}: t=${Math.floor(Date.now() / 1000)},v2=${"0".repeat(64)}\r\n` +
        `Content-Length: 500000\r\n\r\n${"x".repeat(1024)}`,
    );
    const forged = () =>
      fetch(`http://127.0.0.1:${port}${PROBE_PATH}`, {
        method: "POST",
        headers: { [BRIDGE_SIGNATURE_HEADER]: `t=${Math.floor(Date.now() / 1000)},v2=${"0".repeat(64)}` },
        body: "{}",
      });
    // until the stalled request has its place, a forged one is read and refused 401
    await vi.waitFor(async () => expect((await forged()).status).toBe(503));
    const refusedBefore = logger.entries.filter((entry) => entry.event === "prober.busy").length;

    const asked = createMailboxProber({ url: `http://127.0.0.1:${port}`, secret: SECRET }).probe(["alice@mailbox.test"], 5_000, {
      kind: "single",
      accountId: "acc_client",
    });
    // the client's first request is refused; the place is free again before its retry
    await vi.waitFor(() => expect(logger.entries.filter((entry) => entry.event === "prober.busy").length).toBe(refusedBefore + 1));
    stalled.destroy();
    const evidence = await asked;
    expect(evidence?.get("alice@mailbox.test")).toMatchObject({ outcome: "accepted", mx_host: "mx.mailbox.test" });
    expect(logger.entries.find((entry) => entry.event === "prober.probed")).toMatchObject({ kind: "single", account_id: "acc_client" });
  });
});
