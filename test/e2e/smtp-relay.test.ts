import { readFile } from "node:fs/promises";
import { createServer as createHttpServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { dkimVerify } from "mailauth";
import MailComposer from "nodemailer/lib/mail-composer";
import nodemailer from "nodemailer";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { loadConfig } from "../../smtp-bridge/src/config.ts";
import { createMemoryLogger } from "../../smtp-bridge/src/log.ts";
import { createServer as createBridge } from "../../smtp-bridge/src/server.ts";
import { readDevVars } from "../../scripts/lib/dev-vars.ts";

// The whole relay path on the real local stack, started the way a developer starts it (scripts/dev.ts on free
// ports, its own state directory; test/e2e/global-setup.ts): SMTP client → smtp-bridge → Worker /internal/relay →
// send queue → consumer → DKIM signing → the dev mail sink. Nothing is faked.

type Demo = { account_id: string; api_key: string; smtp: { id: string; username: string; password: string } };

const stack = inject("e2eStack");
const { ports, output } = stack;
let demo: Demo;

const workerUrl = () => `http://127.0.0.1:${ports.WORKER_PORT}`;

async function api<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<{ status: number; body: T }> {
  const response = await fetch(`${workerUrl()}${path}`, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: { Authorization: `Bearer ${demo.api_key}`, "Content-Type": "application/json" },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  return { status: response.status, body: (await response.json()) as T };
}

beforeAll(async () => {
  demo = JSON.parse(await readFile(join(stack.stateDir, "demo.json"), "utf8")) as Demo;
});

/** A sending domain, as a user sets it up: add it, publish its records, verify. */
async function verifiedDomain() {
  const name = `relay-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}.test`;
  const created = await api<{ id: string; records: { name: string; value: string }[] }>("/api/v1/domains", { body: { name } });
  expect(created.status).toBe(201);
  for (const record of created.body.records) {
    const published = await fetch(`http://127.0.0.1:${ports.DOH_PORT}/zone/${encodeURIComponent(record.name)}`, {
      method: "PUT",
      body: JSON.stringify({ TXT: [record.value] }),
    });
    expect(published.status).toBe(200);
  }
  expect((await api<{ status: string }>(`/api/v1/domains/${created.body.id}/verify`, { method: "POST" })).body.status).toBe("verified");
  return { name, created };
}

function relayTransport() {
  return nodemailer.createTransport({
    host: "127.0.0.1",
    port: ports.BRIDGE_SMTP_PORT,
    secure: false,
    requireTLS: true,
    tls: { rejectUnauthorized: false },
    auth: { user: demo.smtp.username, pass: demo.smtp.password },
  });
}

async function sinkRawTo(address: string): Promise<Buffer> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const listed = (await (await fetch(`http://127.0.0.1:${ports.SINK_HTTP_PORT}/api/messages?to=${encodeURIComponent(address)}`)).json()) as {
      data: { id: string }[];
    };
    const delivered = listed.data[0];
    if (delivered) return Buffer.from(await (await fetch(`http://127.0.0.1:${ports.SINK_HTTP_PORT}/api/messages/${delivered.id}/raw`)).arrayBuffer());
    if (Date.now() > deadline) throw new Error(`nothing reached the sink for ${address}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

type HeldAnswer = { status: number; body: string };

/**
 * An HTTP hop between a bridge and the Worker that passes every request on whole, and, while `holding`, keeps the
 * Worker's answer to a message from the bridge: what a connection that breaks after the Worker stored a message
 * looks like from the bridge, which gives up after WORKER_TIMEOUT_MS. `held` has the answers it kept.
 */
async function answerLosingHop(target: string) {
  const held: Promise<HeldAnswer>[] = [];
  const hop = {
    holding: true,
    held,
    url: "",
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  const passed = (headers: IncomingHttpHeaders) =>
    Object.fromEntries(Object.entries(headers).filter(([name]) => ["content-type", "x-bridge-signature"].includes(name))) as Record<string, string>;
  const server = createHttpServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    // sent on whether or not the bridge is still waiting, as a request that reached the Worker is processed
    const answer = fetch(`${target}${req.url}`, { method: req.method, headers: passed(req.headers), body: Buffer.concat(chunks) }).then(
      async (response) => ({ status: response.status, body: await response.text(), retryAfter: response.headers.get("retry-after") }),
    );
    if (hop.holding && req.url?.endsWith("/messages")) {
      held.push(answer);
      // never answered: the bridge times out and cuts the connection
      return;
    }
    const { status, body, retryAfter } = await answer;
    res.writeHead(status, { "Content-Type": "application/json", ...(retryAfter ? { "Retry-After": retryAfter } : {}) }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  hop.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return hop;
}

describe("SMTP relay end to end", () => {
  it("prints the SMTP settings and the credential it seeded", () => {
    expect(output).toContain(`ports ${ports.BRIDGE_SMTP_PORT} and ${ports.BRIDGE_ALT_PORT} (STARTTLS), ${ports.BRIDGE_SMTPS_PORT} (implicit TLS)`);
    expect(output).toContain(`username ${demo.smtp.username}`);
  });

  it("delivers a multipart message sent over STARTTLS to the provider, unchanged apart from a valid DKIM signature", async () => {
    const { name, created } = await verifiedDomain();

    const to = `reader-${Date.now().toString(36)}@example.org`;
    const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "base64");
    const raw = await new MailComposer({
      from: `"Acme" <billing@${name}>`,
      to,
      replyTo: `help@${name}`,
      subject: "Your invoice",
      messageId: `<invoice-7@${name}>`,
      date: new Date(),
      headers: { "X-Customer-Id": "42" },
      text: "Invoice attached.\r\n",
      html: `<p><img src="cid:logo@${name}"> Invoice attached.</p>`,
      attachments: [
        { filename: "invoice.pdf", content: Buffer.from("%PDF-1.4 invoice\n".repeat(100)), contentType: "application/pdf" },
        { filename: "logo.png", content: png, contentType: "image/png", cid: `logo@${name}` },
      ],
    })
      .compile()
      .build();

    const info = await relayTransport().sendMail({ envelope: { from: `billing@${name}`, to: [to] }, raw });
    const messageId = /^250 2\.0\.0 Ok: queued as (msg_\w+)$/.exec(info.response)?.[1];
    expect(messageId).toBeDefined();

    const stored = await api<{ source: string; status: string }>(`/api/v1/messages/${messageId}`);
    expect(stored.body).toMatchObject({ source: "smtp" });

    const received = await sinkRawTo(to);

    // the Worker prepended its two DKIM-Signature header fields (Ed25519 and RSA, both keys published) and changed
    // nothing else
    const text = received.toString("latin1");
    const prefix = text.slice(0, received.length - raw.length);
    expect(received.subarray(received.length - raw.length).equals(raw)).toBe(true);
    expect(prefix).toMatch(/^(DKIM-Signature: [^\r\n]*(\r\n[ \t][^\r\n]*)*\r\n){2}$/);
    expect([...prefix.matchAll(/^DKIM-Signature: v=1; a=([a-z0-9-]+);/gm)].map((match) => match[1])).toEqual(["ed25519-sha256", "rsa-sha256"]);

    const dkimRecords = new Map(created.body.records.map((record) => [record.name, record.value]));
    const verdict = await dkimVerify(received, {
      resolver: async (lookup: string, type: string) => {
        const value = dkimRecords.get(lookup);
        if (type !== "TXT" || !value) throw Object.assign(new Error(`no ${type} for ${lookup}`), { code: "ENOTFOUND" });
        return [value.match(/.{1,255}/g) ?? []];
      },
    });
    expect(verdict.results.map((result) => [result.signingDomain, result.status.result])).toEqual([
      [name, "pass"],
      [name, "pass"],
    ]);
  }, 40_000);

  it("refuses a second From field with 550 5.7.1 after DATA, and takes Bcc fields out of what reaches the provider", async () => {
    const { name } = await verifiedDomain();
    const to = `reader-${Date.now().toString(36)}@example.org`;
    const hidden = `hidden-${Date.now().toString(36)}@example.org`;
    const transport = relayTransport();
    const message = (headers: string[]) => Buffer.from([...headers, `To: ${to}`, "Subject: From checks", "", "body", ""].join("\r\n"));

    const spoofed = transport.sendMail({
      envelope: { from: `billing@${name}`, to: [to] },
      raw: message([`From: billing@${name}`, "From: ceo@bank.example"]),
    });
    await expect(spoofed).rejects.toMatchObject({ responseCode: 550, response: expect.stringMatching(/^550 5\.7\.1 .*2 From header fields/) });

    const raw = message([`From: billing@${name}`, `Bcc: ${hidden}`, `Message-ID: <bcc-e2e@${name}>`, `Date: ${new Date().toUTCString()}`]);
    const info = await transport.sendMail({ envelope: { from: `billing@${name}`, to: [to, hidden] }, raw });
    expect(info.response).toMatch(/^250 2\.0\.0 Ok: queued as msg_/);
    const received = (await sinkRawTo(hidden)).toString("latin1");
    expect(received).not.toContain(hidden);
    expect(received.endsWith(raw.toString("latin1").replace(`Bcc: ${hidden}\r\n`, ""))).toBe(true);
  }, 40_000);
  it("a message whose 250 never reached the client is stored and charged once: the client's retry gets the first message's id", async () => {
    const { name } = await verifiedDomain();
    const hop = await answerLosingHop(workerUrl());
    const logger = createMemoryLogger();
    // a second bridge, like the stack's but reaching the Worker through the hop, and giving up on it after 2 s
    const bridge = createBridge(
      loadConfig({
        SMTP_HOST: "127.0.0.1",
        SMTP_PORT: "0",
        SMTP_ALT_PORT: "0",
        SMTPS_PORT: "0",
        SMTP_HOSTNAME: "localhost",
        WORKER_URL: hop.url,
        BRIDGE_SECRET: readDevVars().BRIDGE_SECRET ?? "",
        WORKER_TIMEOUT_MS: "2000",
      }),
      { logger },
    );
    const bridgePorts = await bridge.listen();
    const client = () =>
      nodemailer.createTransport({
        host: "127.0.0.1",
        port: bridgePorts.smtp,
        secure: false,
        requireTLS: true,
        tls: { rejectUnauthorized: false },
        auth: { user: demo.smtp.username, pass: demo.smtp.password },
      });
    const balance = async () => (await api<{ balances: { send: { balance: number } } }>("/api/v1/me")).body.balances.send.balance;
    try {
      const to = `retry-${Date.now().toString(36)}@example.org`;
      // what a client queues and sends again after a 4xx: the same bytes, its Message-ID and Date included
      const raw = await new MailComposer({
        from: `billing@${name}`,
        to,
        subject: "Sent once, answered late",
        messageId: `<retry-${Date.now().toString(36)}@${name}>`,
        date: new Date(),
        text: "One message, one charge.\r\n",
      })
        .compile()
        .build();
      const envelope = { from: `billing@${name}`, to: [to] };
      const before = await balance();

      const lost = await client()
        .sendMail({ envelope, raw })
        .then(
          () => undefined,
          (error: { response?: string }) => error,
        );
      expect(lost?.response).toMatch(/^451 4\.3\.0 /);
      // the Worker did store it: its answer reached the hop, not the bridge
      expect(hop.held).toHaveLength(1);
      const stored = await hop.held[0]!;
      expect(stored.status).toBe(202);
      const first = JSON.parse(stored.body) as { id: string };

      hop.holding = false;
      const retried = await client().sendMail({ envelope, raw });
      expect(retried.response).toBe(`250 2.0.0 Ok: queued as ${first.id}`);
      expect(logger.entries.filter((entry) => entry.event === "smtp.transaction").map(({ outcome, replayed }) => ({ outcome, replayed }))).toEqual([
        { outcome: "deferred", replayed: undefined },
        { outcome: "queued", replayed: true },
      ]);

      const listed = await api<{ data: { id: string; credits_charged: number }[] }>(`/api/v1/messages?to=${encodeURIComponent(to)}`);
      expect(listed.body.data.map(({ id, credits_charged }) => ({ id, credits_charged }))).toEqual([{ id: first.id, credits_charged: 1 }]);
      expect(await balance()).toBe(before - 1);
      const delivered = (await sinkRawTo(to)).toString("latin1");
      expect(delivered).toContain("Sent once, answered late");
    } finally {
      await bridge.close({ timeoutMs: 500 });
      await hop.close();
    }
  }, 40_000);
});
