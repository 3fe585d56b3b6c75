import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { resumeStalledCampaigns } from "../../src/domain/campaigns/recovery";
import { call, d1Of, json } from "../support/helpers";
import { sinkMessagesTo } from "../support/sending";
import {
  alarmOf,
  audienceOf,
  backdate,
  campaignAccount,
  killFanOut,
  minutesAgo,
  progressObject,
  waitForStatus,
  type Campaign,
} from "../support/campaigns";

// The cron's stalled-campaign sweep looks at 100 campaigns per run. Its own file: the sweep sees every stale campaign
// of the database, and this test needs to know exactly which ones there are.

const ALIVE = 120;

describe("cron: a dead fan-out among many throttled ones", () => {
  it("is reached within a few runs, however many live campaigns have been waiting longer", async () => {
    const { account, key, sender } = await campaignAccount({ sendCredits: 10 });
    // Campaigns sleeping until their daily limit resets: their rows have not changed for an hour, their objects are armed.
    const alive = Array.from({ length: ALIVE }, (_, i) => `cmp_alive${String(i).padStart(3, "0")}${crypto.randomUUID().slice(0, 8)}`);
    const d1 = d1Of(account);
    await d1.batch(
      alive.map((id) =>
        d1
          .prepare(
            `INSERT INTO campaigns (id, account_id, name, status, variables, tags, lists, segments, exclude_lists, started_at, updated_at)
           VALUES (?1, ?2, 'throttled', 'sending', '{}', '[]', '[]', '[]', '[]', ?3, ?3)`,
          )
          .bind(id, account.id, minutesAgo(60)),
      ),
    );
    const tomorrow = Date.now() + 86_400_000;
    await Promise.all(alive.map((id) => progressObject(id).start(id, account.id, tomorrow, account.database)));

    // A scheduled campaign whose object lost its alarm and state, due 20 minutes ago.
    const { list, addresses } = await audienceOf(key, 1);
    const dead = await json<Campaign>(
      await call("/api/v1/campaigns", { key, body: { name: "dead", sender_id: sender, subject: "Hi", text: "Hello", lists: [list] } }),
    );
    expect((await call(`/api/v1/campaigns/${dead.id}/send`, { key, body: { send_at: new Date(tomorrow).toISOString() } })).status).toBe(202);
    await killFanOut(dead.id);
    await backdate(dead.id, 20, minutesAgo(20));

    // The sweep alone, twice, rather than the whole cron: the cron's other tasks work through what the runtime's other
    // files left (up to 50 of their domains re-checked over DNS per run, one after another), seconds a run on a busy
    // machine, which took this test past its limit. test/campaigns/cron.test.ts runs the sweep through the cron.
    await resumeStalledCampaigns(openCtx(env, undefined, account));
    await resumeStalledCampaigns(openCtx(env, undefined, account));
    const done = await waitForStatus(key, dead.id, "sent");
    expect(done.counters).toMatchObject({ recipients: 1, sent: 1 });
    expect(await sinkMessagesTo(addresses[0]!)).toHaveLength(1);
    // The live ones were looked at, not re-armed.
    expect(await alarmOf(alive[0]!)).toBe(tomorrow);
    expect(await alarmOf(alive[ALIVE - 1]!)).toBe(tomorrow);
  });
});
