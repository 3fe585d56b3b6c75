import { createExecutionContext, createScheduledController, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import worker from "../../src/index";
import { accountD1s, accountIn, allAccountRows } from "./databases";
import { call, createAccount, d1Of, d1OfAccount, json } from "./helpers";
import { eventually, verifiedDomain } from "./sending";

export type Campaign = {
  id: string;
  status: string;
  credits_reserved: number;
  counters: Record<string, number>;
  send_at: string | null;
  completed_at: string | null;
};
export type Ledger = { kind: string; amount: number; reference_id: string | null };

export const tag = () => crypto.randomUUID().slice(0, 8);

/** An account that may send campaigns (placed in `database` if given), with a verified domain and a sender on it. */
export async function campaignAccount(options: { sendCredits?: number; dailySendLimit?: number; database?: string } = {}) {
  const overrides = {
    send_credits: options.sendCredits ?? 100,
    ...(options.dailySendLimit === undefined ? {} : { daily_send_limit: options.dailySendLimit }),
    features: ["email_api", "smtp_relay", "campaigns"],
  };
  const account = options.database ? await accountIn(options.database, overrides) : await createAccount(overrides);
  const key = account.api_key;
  const domain = await verifiedDomain(key);
  const sender = `snd_${tag()}`;
  // A sender row as the senders API stores it (test/campaigns/senders.test.ts covers that API).
  await d1Of(account)
    .prepare("INSERT INTO senders (id, account_id, name, email, reply_to, domain_id) VALUES (?1, ?2, 'Acme News', ?3, NULL, ?4)")
    .bind(sender, account.id, `hello@${domain.name}`, domain.id)
    .run();
  return { account, key, domain, sender };
}

/** `count` subscribed contacts in a new list; returns the list id and the addresses. */
export async function audienceOf(key: string, count: number): Promise<{ list: string; addresses: string[] }> {
  const list = (await json<{ id: string }>(await call("/api/v1/lists", { key, body: { name: "audience" } }))).id;
  const t = tag();
  const addresses = Array.from({ length: count }, (_, i) => `r${i}-${t}@example.net`);
  for (const email of addresses) {
    const response = await call("/api/v1/contacts", { key, body: { email, lists: [list] } });
    expect(response.status).toBeLessThan(300);
  }
  return { list, addresses };
}

export async function sendCampaign(key: string, sender: string, list: string): Promise<Campaign> {
  const created = await call("/api/v1/campaigns", { key, body: { name: "news", sender_id: sender, subject: "Hi", text: "Hello", lists: [list] } });
  expect(created.status).toBe(201);
  const draft = await json<Campaign>(created);
  const sent = await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: {} });
  expect(sent.status).toBe(202);
  return draft;
}

export async function campaignOf(key: string, id: string) {
  return json<Campaign>(await call(`/api/v1/campaigns/${id}`, { key }));
}

export async function ledgerOf(accountId: string): Promise<Ledger[]> {
  return (
    await (
      await d1OfAccount(accountId)
    )
      .prepare("SELECT kind, amount, reference_id FROM credit_ledger WHERE account_id = ?1 AND balance = 'send' AND kind != 'top_up' ORDER BY rowid")
      .bind(accountId)
      .all<Ledger>()
  ).results;
}

export async function sendBalance(key: string) {
  return (await json<{ balances: { send: { balance: number; reserved: number; available: number } } }>(await call("/api/v1/me", { key }))).balances
    .send;
}

export const progressObject = (campaignId: string) => env.CAMPAIGN_PROGRESS.getByName(campaignId);

/** When the campaign's CampaignProgress object will next run (null: nothing armed). */
export function alarmOf(campaignId: string): Promise<number | null> {
  return runInDurableObject(progressObject(campaignId), (_, state) => state.storage.getAlarm());
}

export const nextUtcMidnight = (now = new Date()) => Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);

/**
 * Midnight UTC for the account's daily sending limit: its RateLimiter keeps only the current day's count, so
 * forgetting it is what the day turning over does (the Workers runtime's clock cannot be moved).
 */
export async function newSendingDay(accountId: string): Promise<void> {
  await runInDurableObject(env.RATE_LIMITER.getByName(`daily:${accountId}`), (_, state) => state.storage.kv.delete("quota"));
}

/** How many messages the campaign has in D1 and how many distinct contacts they are for. */
export async function messageRows(campaignId: string) {
  const counts = await allAccountRows<{ messages: number; contacts: number }>(
    "SELECT count(*) AS messages, count(DISTINCT content ->> '$.contact_id') AS contacts FROM messages WHERE campaign_id = ?1",
    campaignId,
  );
  return counts.find((count) => count.messages > 0) ?? { messages: 0, contacts: 0 };
}

/** Waits until the campaign has used the day's sending limit (`sent` messages out) and its object sleeps until midnight UTC. */
export async function throttled(key: string, campaignId: string, sent: number): Promise<Campaign> {
  return eventually(async () => {
    const current = await campaignOf(key, campaignId);
    return current.counters.sent === sent && (await alarmOf(campaignId)) === nextUtcMidnight() ? current : undefined;
  }, 20_000);
}

export const waitForStatus = (key: string, id: string, status: string) =>
  eventually(async () => {
    const current = await campaignOf(key, id);
    return current.status === status ? current : undefined;
  }, 20_000);

/** The campaign's messages with their recipient's address. */
export async function campaignMessages(campaignId: string) {
  return allAccountRows<{ id: string; status: string; email: string }>(
    `SELECT m.id, m.status, r.email FROM messages AS m JOIN message_recipients AS r ON r.message_id = m.id
       WHERE m.campaign_id = ?1`,
    campaignId,
  );
}

/** Runs the Worker's real scheduled handler (the cron) once. */
export async function runCron(): Promise<void> {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ cron: "*/15 * * * *" }), env, ctx);
  await waitOnExecutionContext(ctx);
}

export const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

/** Moves time for the cron's stalled-campaign sweep: the campaign's row (and optionally its send_at) is that old. */
export const backdate = (id: string, minutes: number, sendAt?: string) =>
  Promise.all(
    accountD1s().map((d1) =>
      d1
        .prepare("UPDATE campaigns SET updated_at = ?2, send_at = coalesce(?3, send_at) WHERE id = ?1")
        .bind(id, minutesAgo(minutes), sendAt ?? null)
        .run(),
    ),
  );

/** A fan-out that died: its progress object has lost its alarm and its state. */
export async function killFanOut(campaignId: string): Promise<void> {
  await runInDurableObject(progressObject(campaignId), async (_, state) => {
    await state.storage.deleteAlarm();
    state.storage.kv.delete("progress");
  });
}
