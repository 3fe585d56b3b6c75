import { databaseTag } from "../../src/db/client";
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import PostalMime, { type Email } from "postal-mime";
import { describe, expect, it } from "vitest";
import { call, createAccount, createKey, d1Of, d1OfAccount, json } from "../support/helpers";
import { eventually, sinkMessagesTo, sinkRaw, verifiedDomain, type Domain } from "../support/sending";
import { createEndpoint, receiverPath, receiverUrl, waitForRequests } from "../support/webhooks";

type Campaign = {
  id: string;
  status: string;
  credits_reserved: number;
  counters: Record<string, number>;
  send_at: string | null;
  completed_at: string | null;
};
type Ledger = { kind: string; amount: number; reference_id: string | null };

const tag = () => crypto.randomUUID().slice(0, 8);

async function setup(sendCredits = 100) {
  const account = await createAccount({ send_credits: sendCredits, features: ["email_api", "smtp_relay", "campaigns"] });
  const key = account.api_key;
  const domain = await verifiedDomain(key);
  return { account, key, domain, sender: await senderOn(account.id, domain) };
}

/** A sender row as the senders API stores it (that API is built separately). */
async function senderOn(accountId: string, domain: Pick<Domain, "id" | "name">, status = "hello") {
  const id = `snd_${tag()}`;
  await (await d1OfAccount(accountId))
    .prepare("INSERT INTO senders (id, account_id, name, email, reply_to, domain_id) VALUES (?1, ?2, 'Acme News', ?3, NULL, ?4)")
    .bind(id, accountId, `${status}@${domain.name}`, domain.id)
    .run();
  return id;
}

async function list(key: string, name: string): Promise<string> {
  return (await json<{ id: string }>(await call("/api/v1/lists", { key, body: { name } }))).id;
}

async function contact(key: string, body: Record<string, unknown>): Promise<string> {
  const response = await call("/api/v1/contacts", { key, body });
  expect(response.status).toBeLessThan(300);
  return (await json<{ id: string }>(response)).id;
}

async function campaignOf(key: string, id: string) {
  return json<Campaign>(await call(`/api/v1/campaigns/${id}`, { key }));
}

async function ledgerOf(accountId: string): Promise<Ledger[]> {
  return (
    await (
      await d1OfAccount(accountId)
    )
      .prepare("SELECT kind, amount, reference_id FROM credit_ledger WHERE account_id = ?1 AND balance = 'send' ORDER BY rowid")
      .bind(accountId)
      .all<Ledger>()
  ).results;
}

async function balances(key: string) {
  return (await json<{ balances: { send: { balance: number; reserved: number; available: number } } }>(await call("/api/v1/me", { key }))).balances
    .send;
}

describe("campaigns, sent now", () => {
  it("reaches exactly its audience once each, personalised and signed with both unsubscribe forms, then completes with settled credits and campaign.completed", async () => {
    const { account, key, domain, sender } = await setup(100);
    const hook = receiverPath();
    await createEndpoint(key, { url: receiverUrl(hook), events: ["campaign.completed"] });
    const [customers, newsletter, excluded] = [await list(key, "customers"), await list(key, "newsletter"), await list(key, "do not mail")];
    const t = tag();
    const addr = (name: string) => `${name}-${t}@example.net`;
    await contact(key, { email: addr("ann"), first_name: "<Ann>", custom_fields: { plan: "pro" }, lists: [customers] });
    await contact(key, { email: addr("both"), first_name: "Bo", custom_fields: { plan: "enterprise" }, lists: [customers, newsletter] });
    await contact(key, { email: addr("nameless"), lists: [newsletter] });
    await contact(key, { email: addr("excluded"), first_name: "Ex", lists: [customers, excluded] });
    await contact(key, { email: addr("suppressed"), lists: [customers] });
    const unsubscribed = await contact(key, { email: addr("unsub"), lists: [newsletter] });
    await contact(key, { email: addr("outsider"), first_name: "Out" });
    // In no list: reached through the segment. "both" matches it too and still gets one message; "vip-excluded" matches
    // it but is on the excluded list.
    await contact(key, { email: addr("vip"), first_name: "Vi", custom_fields: { plan: "enterprise" } });
    await contact(key, { email: addr("vip-excluded"), custom_fields: { plan: "enterprise" }, lists: [excluded] });
    const segmentResponse = await call("/api/v1/segments", {
      key,
      body: { name: "Enterprise", match: "all", conditions: [{ field: "custom_fields.plan", op: "eq", value: "enterprise" }] },
    });
    expect(segmentResponse.status).toBe(201);
    const enterprise = (await json<{ id: string }>(segmentResponse)).id;
    expect((await call("/api/v1/suppressions", { key, body: { email: addr("suppressed") } })).status).toBeLessThan(300);
    expect((await call(`/api/v1/contacts/${unsubscribed}`, { key, method: "PATCH", body: { status: "unsubscribed" } })).status).toBe(200);

    const created = await call("/api/v1/campaigns", {
      key,
      body: {
        name: "November news",
        sender_id: sender,
        subject: "Hi {{first_name|there}}, news for {{custom_fields.plan|everyone}}",
        preheader: "Our {{month}} update",
        html: "<html><body><p>Hello {{first_name|there}} ({{email}}), you are on {{custom_fields.plan|free}}.</p></body></html>",
        text: "Hello {{first_name|there}}. Leave: {{unsubscribe_url}}",
        variables: { month: "November" },
        lists: [customers, newsletter],
        segments: [enterprise],
        exclude_lists: [excluded],
      },
    });
    expect(created.status).toBe(201);
    const draft = await json<Campaign>(created);
    expect(draft).toMatchObject({ status: "draft", credits_reserved: 0, counters: { recipients: 0 } });

    const sent = await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: {} });
    expect(sent.status).toBe(202);
    expect(await json(sent)).toEqual({ id: draft.id, status: "sending", recipients: 4, credits_reserved: 4, send_at: expect.any(String) });

    const done = await eventually(async () => {
      const current = await campaignOf(key, draft.id);
      return current.status === "sent" ? current : undefined;
    }, 20_000);
    expect(done.counters).toMatchObject({ recipients: 4, pending: 0, sent: 4, hard_bounces: 0, failed: 0, suppressed: 0, cancelled: 0 });
    expect(done.completed_at).not.toBeNull();

    const expected = ["ann", "both", "nameless", "vip"];
    for (const name of ["excluded", "suppressed", "unsub", "outsider", "vip-excluded"]) expect(await sinkMessagesTo(addr(name))).toEqual([]);
    const delivered = new Map<string, Email>();
    for (const name of expected) {
      const messages = await sinkMessagesTo(addr(name));
      expect(messages).toHaveLength(1);
      // The envelope sender is the message's VERP return path (BOUNCE_DOMAIN), so bounces reach the email() handler.
      expect(messages[0]!.mail_from).toMatch(
        new RegExp(`^bounces\\+${databaseTag(account.database)}\\.msg_[A-Za-z0-9]+-[0-9a-f]{16}@bounces\\.mailforge\\.test$`),
      );
      const raw = await sinkRaw(messages[0]!.id);
      expect(raw).toMatch(
        new RegExp(
          `^DKIM-Signature: v=1; a=ed25519-sha256;[\\s\\S]*DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\\/relaxed;\\r\\n d=${domain.name.replace(/\./g, "\\.")};`,
        ),
      );
      delivered.set(name, await PostalMime.parse(raw));
    }
    const ann = delivered.get("ann")!;
    expect(ann.subject).toBe("Hi <Ann>, news for pro");
    expect(ann.from).toEqual({ name: "Acme News", address: `hello@${domain.name}` });
    expect(ann.html).toContain("Hello &lt;Ann&gt; (");
    expect(ann.html).toContain("you are on pro.");
    expect(ann.html).toMatch(/<div style="display:none[^"]*">Our November update<\/div>/);
    expect(delivered.get("nameless")!.subject).toBe("Hi there, news for everyone");
    expect(delivered.get("nameless")!.text).toMatch(/^Hello there\. Leave: http:\/\/127\.0\.0\.1:8787\/u\/\S+/);

    // Both unsubscribe forms: the footer link (the html has no {{unsubscribe_url}}) and the one-click header name the same URL.
    const header = ann.headers.find((h) => h.key === "list-unsubscribe")!.value.slice(1, -1);
    expect(ann.headers.find((h) => h.key === "list-unsubscribe-post")?.value).toBe("List-Unsubscribe=One-Click");
    expect(ann.html).toContain(`<a href="${header}"`);
    const path = new URL(header).pathname;
    expect((await call(path)).status).toBe(200);
    const oneClick = await call(path, {
      method: "POST",
      body: "List-Unsubscribe=One-Click",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    expect(oneClick.status).toBe(200);
    const annContact = await json<{ data: { status: string }[] }>(await call(`/api/v1/contacts?email=${encodeURIComponent(addr("ann"))}`, { key }));
    expect(annContact.data[0]?.status).toBe("unsubscribed");
    const suppression = await call(`/api/v1/suppressions?email=${encodeURIComponent(addr("ann"))}`, { key });
    expect((await json<{ data: { reason: string }[] }>(suppression)).data).toEqual([expect.objectContaining({ reason: "unsubscribe" })]);

    // Ledger: reservation of 4, four charges taken from it, nothing left reserved.
    const ledger = await ledgerOf(account.id);
    expect(ledger.filter((entry) => entry.kind !== "top_up")).toEqual(
      expect.arrayContaining([
        { kind: "reservation", amount: 4, reference_id: draft.id },
        ...[1, 2, 3, 4].map(() => ({
          kind: "charge",
          amount: -1,
          reference_id: expect.stringMatching(new RegExp(`^${draft.id}:msg_[0-9A-Za-z]{22}$`)),
        })),
      ]),
    );
    expect(ledger.filter((entry) => entry.kind !== "top_up")).toHaveLength(5);
    expect(await balances(key)).toEqual({ balance: 96, reserved: 0, available: 96 });

    const [request] = await waitForRequests(hook, 1);
    const event = JSON.parse(request!.body) as { type: string; data: Record<string, unknown> };
    expect(event.type).toBe("campaign.completed");
    expect(event.data).toMatchObject({ campaign_id: draft.id, name: "November news", recipients: 4, sent: 4, failed: 0, suppressed: 0 });
  });

  it("turns a bounced recipient's reserved credit into a release and emits `bounced`", async () => {
    const { account, key, sender } = await setup(10);
    const audience = await list(key, "all");
    const t = tag();
    const bouncing = `nobody-${t}@example.net`;
    await contact(key, { email: `fine-${t}@example.net`, lists: [audience] });
    await contact(key, { email: bouncing, lists: [audience] });
    await fetch(`${env.TEST_SINK_HTTP_URL}/api/rules`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ match: bouncing, phase: "rcpt", responses: [{ code: 550, message: "5.1.1 no such user" }] }),
    });
    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "b", sender_id: sender, subject: "s", html: "<p>x</p>", lists: [audience] } }),
    );
    expect((await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: {} })).status).toBe(202);
    const done = await eventually(async () => {
      const current = await campaignOf(key, draft.id);
      return current.status === "sent" ? current : undefined;
    }, 20_000);
    expect(done.counters).toMatchObject({ recipients: 2, sent: 2, delivered: 1, hard_bounces: 1 });
    const kinds = (await ledgerOf(account.id)).filter((entry) => entry.kind !== "top_up").map((entry) => `${entry.kind}:${entry.amount}`);
    expect(kinds.sort()).toEqual(["charge:-1", "release:-1", "reservation:2"]);
    expect(await balances(key)).toEqual({ balance: 9, reserved: 0, available: 9 });
    const bounced = await d1Of(account)
      .prepare("SELECT type, data FROM events WHERE account_id = ?1 AND type = 'bounced'")
      .bind(account.id)
      .all<{ type: string; data: string }>();
    expect(bounced.results.map((row) => JSON.parse(row.data) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ campaign_id: draft.id, recipient: bouncing, source: "campaign" }),
    ]);
  });
});

describe("campaigns to a segment with a long text condition", () => {
  it("a segment with a 200-byte ends_with value counts and sends (D1 refuses LIKE patterns over 50 bytes)", async () => {
    const { key, sender } = await setup();
    const suffix = `${"Ünïcödé-".repeat(10)}${"X".repeat(80)}`;
    expect(new TextEncoder().encode(suffix).length).toBe(200);
    const [match, miss] = [`match-${tag()}@example.net`, `miss-${tag()}@example.net`];
    await contact(key, { email: match, custom_fields: { ref: `order-${suffix.replace(/X/g, "x")}` } });
    await contact(key, { email: miss, custom_fields: { ref: `${suffix}-more` } });
    const segment = await json<{ id: string }>(
      await call("/api/v1/segments", {
        key,
        body: { name: "long", match: "all", conditions: [{ field: "custom_fields.ref", op: "ends_with", value: suffix }] },
      }),
    );
    const counted = await call(`/api/v1/segments/${segment.id}/count`, { key });
    expect(counted.status).toBe(200);
    expect(await json(counted)).toEqual({ count: 1 });

    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "long", sender_id: sender, subject: "S", text: "hi", segments: [segment.id] } }),
    );
    const sent = await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: {} });
    expect(sent.status).toBe(202);
    expect(await json(sent)).toMatchObject({ recipients: 1, credits_reserved: 1 });
    await eventually(async () => ((await campaignOf(key, draft.id)).status === "sent" ? true : undefined), 20_000);
    expect(await sinkMessagesTo(match)).toHaveLength(1);
    expect(await sinkMessagesTo(miss)).toEqual([]);
  });
});

describe("scheduling and cancelling", () => {
  it("is scheduled, then sent when its alarm fires", async () => {
    const { account, key, sender } = await setup(10);
    const audience = await list(key, "all");
    const to = `later-${tag()}@example.net`;
    await contact(key, { email: to, lists: [audience] });
    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "later", sender_id: sender, subject: "Later", text: "hi", lists: [audience] } }),
    );
    const sendAt = new Date(Date.now() + 3_000).toISOString();
    const response = await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: { send_at: sendAt } });
    expect(response.status).toBe(202);
    expect(await json(response)).toMatchObject({ status: "scheduled", recipients: 1, credits_reserved: 1, send_at: sendAt });
    expect((await campaignOf(key, draft.id)).status).toBe("scheduled");
    expect(await balances(key)).toEqual({ balance: 10, reserved: 1, available: 9 });
    expect(await sinkMessagesTo(to)).toEqual([]);

    // Its alarm does nothing before send_at; then, with send_at moved into the past as if the 3 s had passed, it sends.
    expect(await runDurableObjectAlarm(env.CAMPAIGN_PROGRESS.getByName(draft.id))).toBe(true);
    expect((await campaignOf(key, draft.id)).status).toBe("scheduled");
    await d1Of(account)
      .prepare("UPDATE campaigns SET send_at = ?2 WHERE id = ?1")
      .bind(draft.id, new Date(Date.now() - 1_000).toISOString())
      .run();
    await runDurableObjectAlarm(env.CAMPAIGN_PROGRESS.getByName(draft.id));
    const done = await eventually(async () => {
      const current = await campaignOf(key, draft.id);
      return current.status === "sent" ? current : undefined;
    }, 20_000);
    expect(done.counters).toMatchObject({ recipients: 1, sent: 1 });
    expect(await sinkMessagesTo(to)).toHaveLength(1);
    expect(await balances(key)).toEqual({ balance: 9, reserved: 0, available: 9 });
  });

  it("sends nothing once cancelled while scheduled, and releases the reservation", async () => {
    const { account, key, sender } = await setup(10);
    const audience = await list(key, "all");
    const to = `never-${tag()}@example.net`;
    await contact(key, { email: to, lists: [audience] });
    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "c", sender_id: sender, subject: "S", text: "hi", lists: [audience] } }),
    );
    expect(
      (await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: { send_at: new Date(Date.now() + 86_400_000).toISOString() } })).status,
    ).toBe(202);
    const cancelled = await call(`/api/v1/campaigns/${draft.id}/cancel`, { key, method: "POST" });
    expect(cancelled.status).toBe(200);
    expect(await json(cancelled)).toMatchObject({ id: draft.id, status: "cancelled" });
    await runDurableObjectAlarm(env.CAMPAIGN_PROGRESS.getByName(draft.id));
    await eventually(async () => ((await balances(key)).reserved === 0 ? true : undefined));
    expect(await balances(key)).toEqual({ balance: 10, reserved: 0, available: 10 });
    const kinds = (await ledgerOf(account.id))
      .filter((entry) => entry.kind !== "top_up")
      .map((entry) => `${entry.kind}:${entry.amount}:${entry.reference_id}`);
    expect(kinds).toEqual([`reservation:1:${draft.id}`, `release:-1:${draft.id}`]);
    expect(await sinkMessagesTo(to)).toEqual([]);
    expect((await campaignOf(key, draft.id)).status).toBe("cancelled");
    expect((await call(`/api/v1/campaigns/${draft.id}/cancel`, { key, method: "POST" })).status).toBe(409);
  });
});

describe("refusals", () => {
  it("keeps a list or segment a draft or scheduled campaign uses from being deleted (409), and lets it go once the campaign is done with", async () => {
    const { key, sender } = await setup(10);
    const audience = await list(key, "all");
    const excluded = await list(key, "excluded");
    const segment = await json<{ id: string }>(
      await call("/api/v1/segments", {
        key,
        body: { name: "s", match: "all", conditions: [{ field: "email", op: "ends_with", value: "@example.net" }] },
      }),
    );
    await contact(key, { email: `one-${tag()}@example.net`, lists: [audience] });
    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", {
        key,
        body: { name: "weekly", sender_id: sender, subject: "S", text: "hi", lists: [audience], segments: [segment.id], exclude_lists: [excluded] },
      }),
    );
    for (const path of [`/api/v1/lists/${audience}`, `/api/v1/lists/${excluded}`, `/api/v1/segments/${segment.id}`]) {
      const refused = await call(path, { key, method: "DELETE" });
      expect(refused.status).toBe(409);
      expect(await json(refused)).toMatchObject({ code: "conflict", message: expect.stringContaining(draft.id) });
    }
    expect((await call(`/api/v1/campaigns/${draft.id}`, { key, method: "DELETE" })).status).toBe(200);
    for (const path of [`/api/v1/lists/${audience}`, `/api/v1/lists/${excluded}`, `/api/v1/segments/${segment.id}`]) {
      expect((await call(path, { key, method: "DELETE" })).status).toBe(200);
    }
  });

  it("answers 402 and reserves nothing when the audience is larger than the credits available", async () => {
    const { account, key, sender } = await setup(1);
    const audience = await list(key, "all");
    for (const name of ["a", "b"]) await contact(key, { email: `${name}-${tag()}@example.net`, lists: [audience] });
    const draft = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "c", sender_id: sender, subject: "S", text: "hi", lists: [audience] } }),
    );
    const response = await call(`/api/v1/campaigns/${draft.id}/send`, { key, body: {} });
    expect(response.status).toBe(402);
    expect(await json(response)).toMatchObject({ code: "insufficient_credits", message: expect.stringContaining("the audience is 2, 1 available") });
    expect((await campaignOf(key, draft.id)).status).toBe("draft");
    expect((await ledgerOf(account.id)).map((entry) => entry.kind)).toEqual(["top_up"]);
    expect(await balances(key)).toEqual({ balance: 1, reserved: 0, available: 1 });
  });

  it("refuses a missing or unverified sender, an empty audience, sending twice, changing after sending, and foreign ids", async () => {
    const { account, key, sender } = await setup(10);
    const audience = await list(key, "all");
    const empty = await list(key, "empty");
    await contact(key, { email: `one-${tag()}@example.net`, lists: [audience] });
    const unverified = await json<Domain>(await call("/api/v1/domains", { key, body: { name: `pending-${tag()}.send-test` } }));
    const pendingSender = await senderOn(account.id, unverified);

    const noSender = await json<Campaign>(await call("/api/v1/campaigns", { key, body: { name: "n", subject: "S", text: "hi", lists: [audience] } }));
    const refusedNoSender = await call(`/api/v1/campaigns/${noSender.id}/send`, { key, body: {} });
    expect(refusedNoSender.status).toBe(422);
    expect(await json(refusedNoSender)).toMatchObject({
      code: "validation_failed",
      errors: { sender_id: [expect.stringContaining("needs a sender")] },
    });

    expect((await call(`/api/v1/campaigns/${noSender.id}`, { key, method: "PATCH", body: { sender_id: pendingSender } })).status).toBe(200);
    const refusedUnverified = await call(`/api/v1/campaigns/${noSender.id}/send`, { key, body: {} });
    expect(refusedUnverified.status).toBe(422);
    expect(await json(refusedUnverified)).toMatchObject({
      errors: {
        sender_id: [
          `The sender's domain ${unverified.name} is not a verified sending domain of this account; add and verify it first (Domains in the dashboard, or POST /api/v1/domains then POST /api/v1/domains/{id}/verify)`,
        ],
      },
    });

    const emptyCampaign = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "e", sender_id: sender, subject: "S", text: "hi", lists: [empty] } }),
    );
    const refusedEmpty = await call(`/api/v1/campaigns/${emptyCampaign.id}/send`, { key, body: {} });
    expect(refusedEmpty.status).toBe(422);
    expect(await json(refusedEmpty)).toMatchObject({ errors: { lists: [expect.stringContaining("audience is empty")] } });

    const late = await call(`/api/v1/campaigns/${emptyCampaign.id}/send`, {
      key,
      body: { send_at: new Date(Date.now() + 31 * 86_400_000).toISOString() },
    });
    expect(late.status).toBe(422);
    expect(await json(late)).toMatchObject({ errors: { send_at: ["At most 30 days ahead"] } });

    const good = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "g", sender_id: sender, subject: "S", text: "hi", lists: [audience] } }),
    );
    expect((await call(`/api/v1/campaigns/${good.id}/send`, { key, body: {} })).status).toBe(202);
    const twice = await call(`/api/v1/campaigns/${good.id}/send`, { key, body: {} });
    expect(twice.status).toBe(409);
    expect(await json(twice)).toMatchObject({ code: "campaign_not_draft" });
    const patch = await call(`/api/v1/campaigns/${good.id}`, { key, method: "PATCH", body: { name: "renamed" } });
    expect(patch.status).toBe(409);
    expect((await call(`/api/v1/campaigns/${good.id}`, { key, method: "DELETE" })).status).toBe(409);

    const other = await createAccount({ features: ["campaigns"] });
    const foreignList = await list(other.api_key, "theirs");
    const foreign = await call("/api/v1/campaigns", {
      key,
      body: { name: "f", sender_id: "snd_nope", lists: [audience, foreignList], exclude_lists: [foreignList] },
    });
    expect(foreign.status).toBe(422);
    expect(await json(foreign)).toMatchObject({
      errors: {
        "lists.1": [`No list ${foreignList} in this account`],
        "exclude_lists.0": [`No list ${foreignList} in this account`],
        sender_id: ["No sender snd_nope in this account"],
      },
    });
    expect((await call(`/api/v1/campaigns/${good.id}`, { key: other.api_key })).status).toBe(404);

    const testKey = await createKey(key, { name: "test", mode: "test" });
    const fromTestKey = await call(`/api/v1/campaigns/${emptyCampaign.id}/send`, { key: testKey.key, body: {} });
    expect(fromTestKey.status).toBe(403);
    // A test key reads campaigns but cannot create, change, delete or cancel them.
    const before = await campaignOf(key, emptyCampaign.id);
    for (const [path, method, body] of [
      ["/api/v1/campaigns", "POST", { name: "sneaky" }],
      [`/api/v1/campaigns/${emptyCampaign.id}`, "PATCH", { html: "<p>changed</p>" }],
      [`/api/v1/campaigns/${emptyCampaign.id}`, "DELETE", undefined],
      [`/api/v1/campaigns/${emptyCampaign.id}/cancel`, "POST", {}],
    ] as const) {
      const response = await call(path, { key: testKey.key, method, body });
      expect(response.status).toBe(403);
      expect(await json(response)).toMatchObject({ code: "live_key_required" });
    }
    expect((await call(`/api/v1/campaigns/${emptyCampaign.id}`, { key: testKey.key })).status).toBe(200);
    expect(await campaignOf(key, emptyCampaign.id)).toEqual(before);
  });

  it("needs the campaigns feature", async () => {
    const account = await createAccount();
    const response = await call("/api/v1/campaigns", { key: account.api_key });
    expect(response.status).toBe(403);
    expect(await json(response)).toMatchObject({ code: "feature_disabled" });
  });
});
