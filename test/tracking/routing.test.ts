// Tracking and unsubscribe links reach the account database of their message: new links name it (a tag), old links
// (made before account databases, no tag) and links whose tag names another database (the account moved since) still
// work, by looking in the other databases.
import { env, exports } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import { config } from "../../src/config";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { accountDatabaseNames, databaseTag, placementOf } from "../../src/db/client";
import worker from "../../src/index";
import { unsubscribeToken } from "../../src/domain/sending/unsubscribe";
import { clickToken, openToken } from "../../src/domain/tracking/tokens";
import { bytesToBase64Url, hmacSha256Hex } from "../../src/lib/crypto";
import { createdIn, lastAccountDatabase, otherAccountDatabase } from "../support/databases";
import { countingD1 } from "../support/d1-counting";
import { call, createAccount, d1Of, json, type CreatedAccount } from "../support/helpers";
import { eventually, messageOf, sinkMessagesTo, sinkRaw, verifiedDomain } from "../support/sending";

const reader = { "User-Agent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko)" };
const rcpt = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}@example.net`;
const html = '<html><body><p><a href="https://shop.example/sale">Shop now</a></p></body></html>';

/** An account in `database` with a verified domain. */
async function accountIn(database: string) {
  const account = await createdIn(database, () => createAccount({ send_credits: 100 }));
  const domain = await verifiedDomain(account.api_key);
  return { account, key: account.api_key, from: `Shop <news@${domain.name}>` };
}

/** A tracked message sent through the pipeline to one recipient, handed over a minute ago (so opens count). */
async function trackedSend(account: CreatedAccount, from: string, extra: Record<string, unknown> = {}) {
  const to = rcpt("ann");
  const body = { from, to, subject: "Sale", html, track_opens: true, track_clicks: true, ...extra };
  const response = await call("/api/v1/send", { key: account.api_key, body });
  expect(response.status).toBe(202);
  const { id } = await json<{ id: string }>(response);
  const [received] = await eventually(async () => ((await sinkMessagesTo(to)).length > 0 ? sinkMessagesTo(to) : undefined));
  await eventually(async () => ((await messageOf(account.api_key, id)).status === "sent" ? true : undefined));
  await d1Of(account).prepare("UPDATE messages SET sent_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-60 seconds') WHERE id = ?1").bind(id).run();
  return { id, to, parsed: await PostalMime.parse(await sinkRaw(received!.id)) };
}

const hit = (path: string) => exports.default.fetch(new Request(`http://localhost${path}`, { headers: reader, redirect: "manual" }));

/** The recipient's opens and clicks as its account's database holds them. */
async function engagement(account: CreatedAccount, messageId: string) {
  return d1Of(account)
    .prepare("SELECT opens, clicks FROM message_recipients WHERE message_id = ?1")
    .bind(messageId)
    .first<{ opens: number; clicks: number }>();
}

const counted = (account: CreatedAccount, messageId: string, opens: number, clicks: number) =>
  eventually(async () => {
    const row = await engagement(account, messageId);
    return row?.opens === opens && row.clicks === clicks ? row : undefined;
  });

/** A tracking token as the code before account databases made it: the same signature over fields without a tag. */
async function untaggedTrackingToken(fields: unknown[]): Promise<string> {
  const key = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(`tracking:${config(env).encryptionKey}`),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const payload = bytesToBase64Url(new TextEncoder().encode(JSON.stringify(fields)));
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(payload)));
  return `${payload}.${bytesToBase64Url(mac.subarray(0, 16))}`;
}

/** An unsubscribe token as the code before account databases made it: `[message id, address]`, signed. */
async function untaggedUnsubscribeToken(messageId: string, email: string): Promise<string> {
  const payload = bytesToBase64Url(new TextEncoder().encode(JSON.stringify([messageId, email])));
  return `${payload}.${(await hmacSha256Hex(`unsubscribe:${config(env).encryptionKey}`, payload)).slice(0, 32)}`;
}

const oneClick = (path: string) =>
  call(path, { method: "POST", body: "List-Unsubscribe=One-Click", headers: { "Content-Type": "application/x-www-form-urlencoded" } });

async function suppression(key: string, email: string) {
  const entries = await json<{ data: { reason: string; scope: string }[] }>(
    await call(`/api/v1/suppressions?email=${encodeURIComponent(email)}`, { key }),
  );
  return entries.data[0];
}

describe("tracking links of an account in another account database", () => {
  it("an open and a click of a message in the last account database are recorded in that database", async () => {
    const { account, from } = await accountIn(lastAccountDatabase());
    const { id, parsed } = await trackedSend(account, from);
    const pixel = parsed.html!.match(/<img src="http:\/\/127\.0\.0\.1:8787(\/t\/o\/[^"]+)"/)?.[1];
    const link = parsed.html!.match(/href="http:\/\/127\.0\.0\.1:8787(\/t\/c\/[^"]+)"/)?.[1];
    expect((await hit(pixel!)).status).toBe(200);
    const click = await hit(link!);
    expect(click.status).toBe(302);
    expect(click.headers.get("Location")).toBe("https://shop.example/sale");

    await counted(account, id, 1, 1);
    const message = await messageOf(account.api_key, id);
    expect(message.recipients[0]).toMatchObject({ opens: 1, clicks: 1, opened_at: expect.any(String), clicked_at: expect.any(String) });
    expect(message.events.map((event) => event.type).sort()).toEqual(["clicked", "opened", "relay.sent"]);
    const rollups = await d1Of(account)
      .prepare("SELECT total(opens) AS opens, total(clicks) AS clicks FROM daily_stats WHERE account_id = ?1")
      .bind(account.id)
      .first();
    expect(rollups).toEqual({ opens: 1, clicks: 1 });
    // Nothing of it in DB, where accounts made before account databases keep their rows.
    expect(await env.DB.prepare("SELECT count(*) AS n FROM daily_stats WHERE account_id = ?1").bind(account.id).first()).toEqual({ n: 0 });
  });

  it("a tagged click reads and writes its own database only: DB (its placement cached) and the other account databases are not asked", async () => {
    const { account, from } = await accountIn(lastAccountDatabase());
    const { id, parsed } = await trackedSend(account, from);
    // The directory's word on where the account is, as this isolate holds it for a few seconds after a first hit.
    await placementOf(env, account.id);
    const link = parsed.html!.match(/href="http:\/\/127\.0\.0\.1:8787(\/t\/c\/[^"]+)"/)?.[1];
    const counters = new Map(accountDatabaseNames(env).map((name) => [name, countingD1(d1Of({ database: name }))]));
    const counting = { ...env, ...Object.fromEntries([...counters].map(([name, counter]) => [name, counter.counted])) } as Env;
    const work = createExecutionContext();
    const response = await worker.fetch!(
      new Request(`http://localhost${link}`, { headers: reader, redirect: "manual" }) as Request<unknown, IncomingRequestCfProperties>,
      counting,
      work,
    );
    expect(response.status).toBe(302);
    await waitOnExecutionContext(work);
    await counted(account, id, 0, 1);
    for (const [name, counter] of counters) {
      if (name === account.database) expect(counter.usage.roundTrips, name).toBeGreaterThanOrEqual(2);
      else expect(counter.usage.roundTrips, name).toBe(0);
    }
  });

  it("tokens made before account databases (no tag) still record the open and the click", async () => {
    const { account, from } = await accountIn(lastAccountDatabase());
    const { id, to } = await trackedSend(account, from);
    expect((await hit(`/t/o/${await untaggedTrackingToken(["o", id, to])}`)).status).toBe(200);
    const click = await hit(`/t/c/${await untaggedTrackingToken(["c", id, to, "https://shop.example/old"])}`);
    expect(click.status).toBe(302);
    expect(click.headers.get("Location")).toBe("https://shop.example/old");
    await counted(account, id, 1, 1);
  });

  it("tokens whose tag names another database (the account moved since) still record the open and the click", async () => {
    const { account, from } = await accountIn(lastAccountDatabase());
    const { id, to } = await trackedSend(account, from);
    const stale = databaseTag(otherAccountDatabase(account.database));
    const target = { messageId: id, recipient: to, tag: stale };
    expect((await hit(`/t/o/${await openToken(config(env), target)}`)).status).toBe(200);
    expect((await hit(`/t/c/${await clickToken(config(env), { ...target, url: "https://shop.example/sale" })}`)).status).toBe(302);
    await counted(account, id, 1, 1);
  });
});

describe("unsubscribe links of an account in another account database", () => {
  it("the List-Unsubscribe one-click and the preference page work for a message in the last account database", async () => {
    const { key, from } = await accountIn(lastAccountDatabase());
    const to = rcpt("una");
    const accepted = await json<{ id: string }>(
      await call("/api/v1/send", { key, body: { from, to, subject: "News", text: "x", stream: "broadcast" } }),
    );
    const [received] = await eventually(async () => ((await sinkMessagesTo(to)).length > 0 ? sinkMessagesTo(to) : undefined));
    const parsed = await PostalMime.parse(await sinkRaw(received!.id));
    const header = parsed.headers.find((entry) => entry.key === "list-unsubscribe")?.value;
    const path = new URL(header!.replace(/^<|>$/g, "")).pathname;
    const page = await call(path);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(`Email preferences for ${to}`);
    expect((await oneClick(path)).status).toBe(200);
    expect(await suppression(key, to)).toMatchObject({ reason: "unsubscribe", scope: "broadcast" });
    await eventually(async () => ((await messageOf(key, accepted.id)).events.some((event) => event.type === "unsubscribed") ? true : undefined));
  });

  it("an unsubscribe link made before account databases, and one whose tag names another database, still unsubscribe", async () => {
    const { account, key, from } = await accountIn(lastAccountDatabase());
    for (const made of ["untagged", "stale"] as const) {
      const to = rcpt(made);
      const accepted = await json<{ id: string }>(
        await call("/api/v1/send", { key, body: { from, to, subject: "News", text: "x", stream: "broadcast" } }),
      );
      await eventually(async () => ((await messageOf(key, accepted.id)).status === "sent" ? true : undefined));
      const token =
        made === "untagged"
          ? await untaggedUnsubscribeToken(accepted.id, to)
          : await unsubscribeToken(config(env), { messageId: accepted.id, email: to, tag: databaseTag(otherAccountDatabase(account.database)) });
      expect((await oneClick(`/u/${token}`)).status).toBe(200);
      expect(await suppression(key, to)).toMatchObject({ reason: "unsubscribe" });
    }
  });
});
