import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { readDevVars } from "../../scripts/lib/dev-vars.ts";
import { createMxHosts, type MxHosts } from "../../scripts/dev/mx-hosts.ts";
import { eventually } from "./stack.ts";

// Pre-send hygiene (issue #42) through the real stack: the Worker under wrangler dev with PROBER_URL set, the real
// prober, and receiving mail servers of this file's own on loopback addresses (on the port the stack's prober dials),
// so the test reads what each server saw. Nothing here is a stand-in for one of our components.

const stack = inject("e2eStack");
const run = Date.now().toString(36);
const domains = { a: `a-${run}.hygiene.test`, b: `b-${run}.hygiene.test`, catchAll: `c-${run}.hygiene.test` };
// existing (alice, bob), unknown (zed, yan), full (dave) mailboxes and a catch-all domain: 3 valid, 2 invalid, 2 risky
const audience = [
  `alice@${domains.a}`,
  `bob@${domains.a}`,
  `alice@${domains.b}`,
  `zed@${domains.a}`,
  `yan@${domains.b}`,
  `dave@${domains.a}`,
  `anyone@${domains.catchAll}`,
];
const valid = audience.slice(0, 3);
const invalid = audience.slice(3, 5);

let mx: MxHosts;

async function publish(name: string, records: Record<string, unknown>) {
  const response = await fetch(`${stack.dohAdminUrl}/zone/${name}`, { method: "PUT", body: JSON.stringify(records) });
  expect(response.status).toBe(200);
}

beforeAll(async () => {
  mx = createMxHosts({ "127.0.0.42": { mailboxes: { alice: "ok", bob: "ok", dave: "full" } }, "127.0.0.43": { catchAll: true } });
  await mx.listen(stack.ports.DEV_MX_PORT!);
  await publish(`mx.${domains.a}`, { A: ["127.0.0.42"] });
  await publish(`mx.${domains.catchAll}`, { A: ["127.0.0.43"] });
  await publish(domains.a, { MX: [{ priority: 10, exchange: `mx.${domains.a}` }] });
  await publish(domains.b, { MX: [{ priority: 10, exchange: `mx.${domains.a}` }] });
  await publish(domains.catchAll, { MX: [{ priority: 10, exchange: `mx.${domains.catchAll}` }] });
});

afterAll(async () => {
  await mx?.close();
});

type Api = <T = Record<string, unknown>>(path: string, init?: { method?: string; body?: unknown }) => Promise<{ status: number; body: T }>;

/** An account of its own with a verified sending domain, a sender and the 7 contacts in a list. */
async function account(credits: { send: number; verify: number }) {
  const created = await fetch(`${stack.workerUrl}/admin/v1/accounts`, {
    method: "POST",
    headers: { Authorization: `Bearer ${readDevVars().ADMIN_TOKEN}`, "Content-Type": "application/json" },
    body: JSON.stringify({
      name: "Hygiene",
      features: ["email_api", "campaigns", "automations"],
      send_credits: credits.send,
      verify_credits: credits.verify,
    }),
  });
  expect(created.status).toBe(201);
  const key = ((await created.json()) as { api_key: string }).api_key;
  const api: Api = async <T>(path: string, init: { method?: string; body?: unknown } = {}) => {
    const response = await fetch(`${stack.workerUrl}${path}`, {
      method: init.method ?? (init.body ? "POST" : "GET"),
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: init.body ? JSON.stringify(init.body) : undefined,
    });
    return { status: response.status, body: (await response.json()) as T };
  };
  const name = `send-${crypto.randomUUID().slice(0, 8)}-${run}.example`;
  const domain = await api<{ id: string; records: { type: string; name: string; value: string }[] }>("/api/v1/domains", { body: { name } });
  for (const record of domain.body.records.filter((candidate) => candidate.type === "TXT")) await publish(record.name, { TXT: [record.value] });
  expect((await api<{ status: string }>(`/api/v1/domains/${domain.body.id}/verify`, { method: "POST" })).body.status).toBe("verified");
  const sender = await api<{ id: string }>("/api/v1/senders", { body: { name: "Hygiene", email: `news@${name}` } });
  const list = await api<{ id: string }>("/api/v1/lists", { body: { name: "audience" } });
  for (const email of audience) expect((await api("/api/v1/contacts", { body: { email, lists: [list.body.id] } })).status).toBe(201);
  return { api, sender: sender.body.id, list: list.body.id };
}

type Campaign = {
  id: string;
  status: string;
  verification_job_id: string | null;
  completed_at: string | null;
  counters: { recipients: number; sent: number; skipped: Record<string, number> };
};

async function sendCampaign(api: Api, body: Record<string, unknown>) {
  const draft = await api<{ id: string }>("/api/v1/campaigns", { body: { name: body.subject, text: "Hello {{email}}", ...body } });
  expect(draft.status).toBe(201);
  const sent = await api(`/api/v1/campaigns/${draft.body.id}/send`, { body: {} });
  return { id: draft.body.id, sent };
}

const finished = (api: Api, id: string) =>
  eventually(async () => {
    const { body } = await api<Campaign>(`/api/v1/campaigns/${id}`);
    return body.completed_at ? body : undefined;
  }, 60_000);

/** The addresses the mail sink received a message with this subject for. */
async function mailedWith(subject: string): Promise<string[]> {
  const received = new Set<string>();
  for (const email of audience) {
    const list = (await (await fetch(`${stack.sinkUrl}/api/messages?to=${encodeURIComponent(email)}`)).json()) as {
      data: { subject: string | null }[];
    };
    if (list.data.some((message) => message.subject === subject)) received.add(email);
  }
  return audience.filter((email) => received.has(email));
}

const rcpts = () => [...mx.hosts.values()].reduce((sum, host) => sum + host.stats.rcptsPerConnection.reduce((a, b) => a + b, 0), 0);
const connections = () => [...mx.hosts.values()].reduce((sum, host) => sum + host.stats.connections, 0);

describe("campaigns that verify their audience before sending", () => {
  it("skip_invalid mails the 5 addresses that are not invalid, charges 5 sending and 7 verification credits, and a valid_only campaign after it probes nothing", async () => {
    const { api, sender, list } = await account({ send: 20, verify: 7 });
    const first = await sendCampaign(api, { subject: `Hygiene one ${run}`, sender_id: sender, lists: [list], verification: "skip_invalid" });
    expect(first.sent.status).toBe(202);
    const one = await finished(api, first.id);
    expect(one).toMatchObject({ status: "sent", counters: { recipients: 5, sent: 5, skipped: { invalid: 2, risky: 0, unknown: 0 } } });
    expect(await mailedWith(`Hygiene one ${run}`)).toEqual(audience.filter((email) => !invalid.includes(email)));

    // the checks were one bulk job: 7 addresses, 7 credits, 2 MX hosts asked
    const job = await api<{ status: string; total: number; credits_charged: number }>(`/api/v1/verify/${one.verification_job_id}`);
    expect(job.body).toMatchObject({ status: "completed", total: 7, credits_charged: 7 });
    const report = await api<{ skipped: Record<string, number> }>(`/api/v1/reports/campaigns/${first.id}`);
    expect(report.body.skipped).toEqual({ invalid: 2, risky: 0, unknown: 0 });
    const credits = await api<{ send: { balance: number; reserved: number }; verify: { balance: number } }>("/api/v1/credits");
    expect(credits.body).toMatchObject({ send: { balance: 15, reserved: 0 }, verify: { balance: 0 } });

    // who was skipped, and why; the contact shows its result
    const skipped = await api<{ data: { email: string; result: string; reason: string }[] }>(`/api/v1/campaigns/${first.id}/skipped`);
    expect(skipped.body.data.map((row) => [row.email, row.result]).sort()).toEqual(invalid.map((email) => [email, "invalid"]).sort());
    expect(skipped.body.data[0]!.reason).toMatch(/^mailbox_not_found \(invalid\), checked \d{4}-\d{2}-\d{2}$/);
    const zed = await api<{ data: { verification: Record<string, unknown> | null }[] }>(`/api/v1/contacts?email=${encodeURIComponent(invalid[0]!)}`);
    expect(zed.body.data[0]!.verification).toMatchObject({ result: "invalid", status: "mailbox_not_found", checked_at: expect.any(String) });
    const dave = await api<{ data: { verification: Record<string, unknown> | null }[] }>(
      `/api/v1/contacts?email=${encodeURIComponent(audience[5]!)}`,
    );
    expect(dave.body.data[0]!.verification).toMatchObject({ result: "risky", status: "mailbox_full" });

    // segments filter on the stored results
    const segment = await api<{ id: string }>("/api/v1/segments", {
      body: { name: "bad", match: "all", conditions: [{ field: "verification.result", op: "in", value: ["invalid", "risky"] }] },
    });
    expect((await api<{ count: number }>(`/api/v1/segments/${segment.body.id}/count`)).body).toEqual({ count: 4 });

    // Within the freshness window a second campaign reuses every result: no RCPT at any MX host, no credit (the
    // balance is 0, so one needed would be a 402), and only the 3 valid addresses are mailed.
    const [rcptsBefore, connectionsBefore] = [rcpts(), connections()];
    const second = await sendCampaign(api, { subject: `Hygiene two ${run}`, sender_id: sender, lists: [list], verification: "valid_only" });
    expect(second.sent.status).toBe(202);
    const two = await finished(api, second.id);
    expect(two).toMatchObject({ status: "sent", verification_job_id: null, counters: { sent: 3, skipped: { invalid: 2, risky: 2, unknown: 0 } } });
    expect(await mailedWith(`Hygiene two ${run}`)).toEqual(valid);
    expect([rcpts(), connections()]).toEqual([rcptsBefore, connectionsBefore]);
    const after = await api<{ send: { balance: number }; verify: { balance: number } }>("/api/v1/credits");
    expect(after.body).toMatchObject({ send: { balance: 12 }, verify: { balance: 0 } });
  }, 120_000);

  it("refuses to start with 402 naming the credits its checks need, and takes nothing", async () => {
    const { api, sender, list } = await account({ send: 20, verify: 6 });
    const refused = await sendCampaign(api, { subject: `Hygiene refused ${run}`, sender_id: sender, lists: [list], verification: "valid_only" });
    expect(refused.sent.status).toBe(402);
    expect(refused.sent.body).toEqual({ code: "insufficient_credits", message: expect.stringMatching(/needs 7 .*6 available/) });
    const credits = await api<{ send: { reserved: number }; verify: { balance: number } }>("/api/v1/credits");
    expect(credits.body).toMatchObject({ send: { reserved: 0 }, verify: { balance: 6 } });
    expect((await api<{ status: string }>(`/api/v1/campaigns/${refused.id}`)).body.status).toBe("draft");
    const bad = await api<{ code: string; errors: Record<string, string[]> }>("/api/v1/campaigns", {
      body: { name: "bad", verification: "sometimes" },
    });
    expect(bad.status).toBe(422);
    expect(Object.keys(bad.body.errors)).toEqual(["verification"]);
  }, 60_000);

  it("POST /contacts/verify checks a list once and reuses its results", async () => {
    const { api, list } = await account({ send: 0, verify: 10 });
    const started = await api<{ id: string; total: number; credits_charged: number }>("/api/v1/contacts/verify", { body: { list_id: list } });
    expect(started.status).toBe(202);
    expect(started.body).toMatchObject({ total: 7, fresh: 0, credits_charged: 7 });
    await eventually(async () =>
      (await api<{ status: string }>(`/api/v1/verify/${started.body.id}`)).body.status === "completed" ? true : undefined,
    );
    const alice = await api<{ data: { verification: Record<string, unknown> | null }[] }>(`/api/v1/contacts?email=${encodeURIComponent(valid[0]!)}`);
    expect(alice.body.data[0]!.verification).toMatchObject({ result: "valid", status: "valid" });
    const again = await api("/api/v1/contacts/verify", { body: { list_id: list } });
    expect(again).toEqual({ status: 200, body: { id: null, status: "completed", total: 0, fresh: 7, credits_charged: 0 } });
    expect((await api("/api/v1/contacts/verify", { body: { list_id: list, all: true } })).status).toBe(422);
  }, 60_000);

  it("an automation's verify step ends the run for an invalid address and lets a valid one go on", async () => {
    const { api } = await account({ send: 0, verify: 2 });
    const after = await api<{ id: string }>("/api/v1/lists", { body: { name: "verified" } });
    const automation = await api<{ id: string }>("/api/v1/automations", {
      body: { name: "clean welcome", steps: [{ type: "verify" }, { type: "add_to_list", list_id: after.body.id }] },
    });
    expect(automation.status).toBe(201);
    type Run = { status: string; steps: { type: string; status: string; detail: Record<string, unknown> }[] };
    const runFor = async (email: string) => {
      const started = await api<{ run_id: string }>(`/api/v1/automations/${automation.body.id}/trigger`, { body: { email } });
      expect(started.status).toBe(202);
      return eventually(async () => {
        const run = await api<Run>(`/api/v1/automations/runs/${started.body.run_id}`);
        return run.body.status === "completed" ? run.body : undefined;
      }, 30_000);
    };
    const stopped = await runFor(invalid[0]!);
    expect(stopped.steps.map((step) => [step.type, step.status])).toEqual([
      ["verify", "completed"],
      ["add_to_list", "pending"],
    ]);
    expect(stopped.steps[0]!.detail).toMatchObject({ result: "invalid", status: "mailbox_not_found", reused: false });
    const went = await runFor(valid[0]!);
    expect(went.steps.map((step) => [step.type, step.status])).toEqual([
      ["verify", "completed"],
      ["add_to_list", "completed"],
    ]);
    expect((await api<{ verify: { balance: number } }>("/api/v1/credits")).body.verify.balance).toBe(0);
  }, 60_000);

  it("never sends DATA to an MX host", () => {
    expect(connections()).toBeGreaterThan(0);
    for (const host of mx.hosts.values()) expect(host.stats.dataCommands).toBe(0);
  });
});
