import { sharedDb } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { chargeStatements } from "../../src/domain/credits/ledger";
import { createDomain, generateDomainKeys, type DomainKeys } from "../../src/domain/domains/domains";
import { call, d1Of, databaseOfAccount, dbOf, json } from "./helpers";

type DomainRecord = { type: string; name: string; value: string; purpose: string; status: string };
export type Domain = { id: string; name: string; status: string; records: DomainRecord[] };

/** Publishes records in the dev DoH server's zone, as a user would at their DNS host. */
export async function publish(name: string, records: { TXT?: string[]; MX?: { priority: number; exchange: string }[] }) {
  const response = await fetch(`${env.TEST_DOH_ADMIN_URL}/zone/${encodeURIComponent(name)}`, { method: "PUT", body: JSON.stringify(records) });
  expect(response.status).toBe(200);
}

export async function unpublish(name: string) {
  await fetch(`${env.TEST_DOH_ADMIN_URL}/zone/${encodeURIComponent(name)}`, { method: "DELETE" });
}

/** Publishes what a domain's owner publishes: its TXT records (the return-path MX is the operator's, published once). */
export async function publishRecords(domain: Domain) {
  for (const record of domain.records) if (record.type === "TXT") await publish(record.name, { TXT: [record.value] });
}

let counter = 0;
export const uniqueDomain = (label: string) => `${label}-${Date.now().toString(36)}-${counter++}.send-test`;

// Made once per runtime: an RSA-2048 key costs ~60 ms of CPU, and the suite adds hundreds of domains (POST /domains
// makes new ones for each domain, as test/domains/domains.test.ts checks).
let sharedKeys: Promise<DomainKeys> | undefined;
const domainKeys = () => {
  sharedKeys ??= generateDomainKeys();
  return sharedKeys;
};

/**
 * A domain added, its records published and verified: what a user does before the first send. Added as POST /domains
 * adds it (the same domain function), but with keys made once for the suite rather than new ones.
 */
export async function verifiedDomain(apiKey: string, name = uniqueDomain("acme")): Promise<Domain> {
  const me = await json<{ id: string }>(await call("/api/v1/me", { key: apiKey }));
  const created = await createDomain(sharedDb(env), me.id, name, env, domainKeys);
  if (created.kind !== "created") throw new Error(`${name} was not added: ${created.message}`);
  const domain = await json<Domain>(await call(`/api/v1/domains/${created.domain.id}`, { key: apiKey }));
  await publishRecords(domain);
  const verified = await json<Domain>(await call(`/api/v1/domains/${domain.id}/verify`, { key: apiKey, method: "POST" }));
  expect(verified.status).toBe("verified");
  return verified;
}

export type SinkMessage = {
  id: string;
  session_id: string;
  rcpt_to: string[];
  mail_from: string;
  subject: string | null;
  message_id: string | null;
  size: number;
};

export async function sinkMessagesTo(address: string): Promise<SinkMessage[]> {
  const response = await fetch(`${env.TEST_SINK_HTTP_URL}/api/messages?to=${encodeURIComponent(address)}`);
  return (await json<{ data: SinkMessage[] }>(response)).data;
}

export async function sinkRaw(id: string): Promise<string> {
  return (await fetch(`${env.TEST_SINK_HTTP_URL}/api/messages/${id}/raw`)).text();
}

export async function sinkRule(rule: {
  match: string;
  phase: "mail" | "rcpt" | "data";
  responses: { code: number; message: string }[];
  times?: number;
}) {
  const response = await fetch(`${env.TEST_SINK_HTTP_URL}/api/rules`, {
    method: "POST",
    body: JSON.stringify(rule),
    headers: { "Content-Type": "application/json" },
  });
  expect(response.status).toBeLessThan(300);
}

/** Polls until `check` returns a value (the queue consumer runs in the background of the runtime). */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export async function messageOf(apiKey: string, id: string) {
  return json<{
    status: string;
    recipients: {
      email: string;
      status: string;
      smtp_response: string | null;
      opens: number;
      clicks: number;
      opened_at: string | null;
      clicked_at: string | null;
    }[];
    events: { type: string; id: string; data: Record<string, unknown> }[];
    attempts: number;
    smtp_response: string | null;
  }>(await call(`/api/v1/messages/${id}`, { key: apiKey }));
}

export async function sendBalance(apiKey: string): Promise<number> {
  return (await json<{ balances: { send: { balance: number } } }>(await call("/api/v1/me", { key: apiKey }))).balances.send.balance;
}

/**
 * A stored message charged one credit per recipient in one ledger row, as acceptance leaves it, but not on the queue, so the
 * consumer can be driven step by step with createMessageBatch.
 */
export async function storedMessage(accountId: string, domainId: string, from: string, to: string | string[]) {
  const recipients = Array.isArray(to) ? to : [to];
  const id = `msg_direct${crypto.randomUUID().replace(/-/g, "").slice(0, 16)}`;
  const content = JSON.stringify({ kind: "compose", to: recipients, text: "Hello", variables: {}, attachments: [] });
  const account = await databaseOfAccount(accountId);
  const d1 = d1Of(account);
  await d1.batch([
    ...chargeStatements(dbOf(account), { accountId, balance: "send", amount: recipients.length, referenceId: id }),
    d1
      .prepare(
        `INSERT INTO messages (id, account_id, source, status, from_address, domain_id, subject, tags, metadata, content, credits_charged)
       VALUES (?1, ?2, 'api', 'queued', ?3, ?4, 'Direct', '[]', '{}', ?5, ?6)`,
      )
      .bind(id, accountId, from, domainId, content, recipients.length),
    ...recipients.map((email) =>
      d1.prepare("INSERT INTO message_recipients (message_id, email, account_id, status) VALUES (?1, ?2, ?3, 'queued')").bind(id, email, accountId),
    ),
  ]);
  return id;
}
