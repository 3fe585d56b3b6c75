import { readFile } from "node:fs/promises";
import { dkimVerify } from "mailauth";
import { describe, expect, inject, it } from "vitest";
import { eventually } from "./stack.ts";

const stack = inject("e2eStack");

async function api<T = Record<string, unknown>>(path: string, init: { method?: string; body?: unknown } = {}): Promise<{ status: number; body: T }> {
  const response = await fetch(`${stack.workerUrl}${path}`, {
    method: init.method ?? (init.body ? "POST" : "GET"),
    headers: { Authorization: `Bearer ${stack.apiKey}`, "Content-Type": "application/json" },
    body: init.body ? JSON.stringify(init.body) : undefined,
  });
  return { status: response.status, body: (await response.json()) as T };
}

/** mailauth's resolver, answered by the dev DoH server: the DKIM key is read from what was actually published. */
async function dohResolver(name: string, type: string): Promise<string[][]> {
  const response = await fetch(`${stack.dohUrl}?name=${encodeURIComponent(name)}&type=${type}`, { headers: { Accept: "application/dns-json" } });
  const answer = (await response.json()) as { Status: number; Answer?: { data: string }[] };
  if (answer.Status !== 0 || !answer.Answer) throw Object.assign(new Error(`no ${type} for ${name}`), { code: "ENOTFOUND" });
  return answer.Answer.map((record) => [...record.data.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((match) => match[1]!.replace(/\\(.)/g, "$1")));
}

describe("sending end to end through npm run dev", () => {
  it("verifies a domain over DoH, sends a templated message that arrives DKIM-signed (verified by mailauth), reaches sent, and bounces by DSN", async () => {
    const name = `e2e-${Date.now().toString(36)}.example`;
    const domain = await api<{ id: string; records: { type: string; name: string; value: string }[] }>("/api/v1/domains", { body: { name } });
    expect(domain.status).toBe(201);
    for (const record of domain.body.records.filter((candidate) => candidate.type === "TXT")) {
      const published = await fetch(`${stack.dohAdminUrl}/zone/${record.name}`, { method: "PUT", body: JSON.stringify({ TXT: [record.value] }) });
      expect(published.status).toBe(200);
    }
    const verified = await api<{ status: string }>(`/api/v1/domains/${domain.body.id}/verify`, { method: "POST" });
    expect(verified.body.status).toBe("verified");

    const template = await api<{ id: string }>("/api/v1/templates", {
      body: { name: "receipt", subject: "Receipt {{order}}", html: "<p>Thanks {{name|there}}!</p>", text: "Thanks {{name|there}}!" },
    });
    const to = `buyer-${Date.now().toString(36)}@example.org`;
    const sent = await api<{ id: string; credits_charged: number }>("/api/v1/send", {
      body: {
        from: `Shop <orders@${name}>`,
        to: [to],
        template_id: template.body.id,
        variables: { order: "#1042", name: "Ann" },
        tags: ["receipt"],
        attachments: [{ filename: "receipt.txt", content: Buffer.from("total: 42 EUR").toString("base64"), content_type: "text/plain" }],
      },
    });
    expect(sent.status).toBe(202);
    expect(sent.body.credits_charged).toBe(1);

    const delivered = await eventually(async () => {
      const list = (await (await fetch(`${stack.sinkUrl}/api/messages?to=${encodeURIComponent(to)}`)).json()) as { data: { id: string }[] };
      return list.data[0];
    });
    const raw = await (await fetch(`${stack.sinkUrl}/api/messages/${delivered.id}/raw`)).text();
    const dkim = await dkimVerify(raw, { resolver: dohResolver });
    // Both signatures (Ed25519 and RSA, RFC 8463) verify against the published keys.
    const rsaSelector = domain.body.records[0]!.name.split(".")[0]!;
    expect(dkim.results.map((result) => [result.signingDomain, result.selector, result.status.result])).toEqual([
      [name, `${rsaSelector}e`, "pass"],
      [name, rsaSelector, "pass"],
    ]);
    expect(raw).toMatch(/^Subject: Receipt #1042\r$/m);
    // A receipt is transactional mail: no unsubscribe link invites anyone to stop receipts (docs/streams.md).
    expect(raw).not.toMatch(/^List-Unsubscribe/im);

    const message = await eventually(async () => {
      const current = await api<{ status: string; events: { type: string }[]; source: string }>(`/api/v1/messages/${sent.body.id}`);
      return current.body.status === "sent" ? current.body : undefined;
    });
    expect(message).toMatchObject({ source: "api", events: [{ type: "relay.sent" }] });

    // The recipient's server bounces it later: a Postfix DSN to the message's VERP return path, handed to the Worker's
    // email() handler through wrangler's local Email Routing endpoint.
    const envelope = (await (await fetch(`${stack.sinkUrl}/api/messages/${delivered.id}`)).json()) as { mail_from: string; message_id: string };
    expect(envelope.mail_from).toMatch(/^bounces\+\d+\.msg_[A-Za-z0-9]+-[0-9a-f]{16}@bounces\.mailforge\.test$/);
    const dsn = (await readFile("test/fixtures/feedback/postfix-hard-bounce.eml", "utf8"))
      .replaceAll("{{RETURN_PATH}}", envelope.mail_from)
      .replaceAll("{{RECIPIENT}}", to)
      .replaceAll("{{MESSAGE_ID}}", envelope.message_id)
      .replace(/\r?\n/g, "\r\n");
    const handed = await fetch(
      `${stack.workerUrl}/cdn-cgi/handler/email?from=${encodeURIComponent("MAILER-DAEMON@mx1.example.net")}&to=${encodeURIComponent(envelope.mail_from)}`,
      { method: "POST", body: dsn },
    );
    expect(handed.status).toBeLessThan(300);
    const bounced = await eventually(async () => {
      const current = await api<{ status: string; events: { type: string; data: Record<string, unknown> }[] }>(`/api/v1/messages/${sent.body.id}`);
      return current.body.status === "bounced" ? current.body : undefined;
    });
    expect(bounced.events.find((event) => event.type === "relay.bounced")?.data).toMatchObject({
      recipient: to,
      bounce_type: "hard",
      feedback_source: "dsn",
    });
    const suppressed = await api<{ data: { reason: string }[] }>(`/api/v1/suppressions?email=${encodeURIComponent(to)}`);
    expect(suppressed.body.data[0]?.reason).toBe("bounce");
  }, 60_000);
});
