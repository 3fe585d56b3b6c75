import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import worker from "../../src/index";
import { call, json } from "./helpers";
import { publish, verifiedDomain, type Domain } from "./sending";
import fixtures from "../fixtures/inbound";

/** A fixture (test/fixtures/inbound) filled in, with CRLF line ends as SMTP carries it. */
export function inboundMail(name: keyof typeof fixtures, values: { to: string; inReplyTo?: string }): string {
  return fixtures[name]
    .replaceAll("{{TO}}", values.to)
    .replaceAll("{{IN_REPLY_TO}}", values.inReplyTo ?? "<CAOther0002@mail.gmail.com>")
    .replaceAll("{{NONCE}}", crypto.randomUUID())
    .replace(/\r?\n/g, "\r\n");
}

export type Delivery = { rejected?: string; failed?: Error };

/**
 * Hands a mail to the Worker's email() handler as Cloudflare Email Routing does: the envelope, the raw bytes as a
 * stream, their size, and setReject. Says whether the handler refused it (setReject) or failed (a thrown error,
 * which Email Routing answers with a temporary SMTP error).
 */
export async function deliver(to: string, raw: string | Uint8Array, options: { from?: string; env?: Env; rawSize?: number } = {}): Promise<Delivery> {
  const bytes = typeof raw === "string" ? new TextEncoder().encode(raw) : raw;
  let rejected: string | undefined;
  const message = {
    from: options.from ?? "jane@example.org",
    to,
    raw: new Response(bytes).body!,
    rawSize: options.rawSize ?? bytes.byteLength,
    headers: new Headers(),
    setReject: (reason: string) => {
      rejected = reason;
    },
    forward: () => Promise.reject(new Error("not used")),
    reply: () => Promise.reject(new Error("not used")),
  } as unknown as ForwardableEmailMessage;
  try {
    await worker.email(message, options.env ?? env, createExecutionContext());
  } catch (error) {
    return { rejected, failed: error as Error };
  }
  return { rejected };
}

/** A verified domain of the account with receiving turned on (and its Email Routing MX published). */
export async function receivingDomain(key: string, body: Record<string, unknown> = {}): Promise<Domain & { receiving: boolean }> {
  const domain = await verifiedDomain(key);
  await publish(domain.name, { MX: [{ priority: 10, exchange: "route1.mx.cloudflare.net" }] });
  const response = await call(`/api/v1/domains/${domain.id}`, { key, method: "PATCH", body: { receiving: true, ...body } });
  expect(response.status).toBe(200);
  return json(response);
}

export type InboundSummary = { id: string; envelope_to: string; subject: string | null; in_reply_to_message_id: string | null };

export async function inboundList(key: string, query = ""): Promise<InboundSummary[]> {
  const response = await call(`/api/v1/inbound${query}`, { key });
  expect(response.status).toBe(200);
  return (await json<{ data: InboundSummary[] }>(response)).data;
}

/** Every R2 object stored for received mail. */
export async function inboundObjects(): Promise<string[]> {
  return (await env.BLOBS.list({ prefix: "inbound/" })).objects.map((object) => object.key);
}
