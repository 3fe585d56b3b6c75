import { inDatabase, openCtx, type Ctx, type DatabaseName } from "../db/client";
import { DurableObject } from "cloudflare:workers";
import { findAccount } from "../domain/accounts/accounts";
import { audienceParameters, audienceWhere, MAX_AUDIENCE_PARAMETERS } from "../domain/campaigns/audience";
import { segmentConditions } from "../domain/campaigns/campaigns";
import {
  beginSending,
  completeIfDone,
  enqueueScheduled,
  failCampaign,
  hasScheduled,
  loadCampaign,
  MATERIALISE_CHUNK,
  materialiseChunk,
  materialisedCount,
  senderOf,
  sweepUnqueued,
} from "../domain/campaigns/fanout";
import { releaseDailySends, reserveDailySendsUpTo } from "../domain/sending/daily-limit";
import { findJob } from "../domain/verification/job-rows";
import { logError } from "../lib/log";

/**
 * fanout: materialising the audience (`cursor` = last contact id written, "" before the first) and enqueueing what
 * is materialised; drain: everything is enqueued, waiting for the last messages to reach a final state.
 * `database` is the account database the campaign's rows are in (progress stored before account databases has none:
 * its rows are in DB).
 */
type Progress = {
  campaignId: string;
  accountId: string;
  database?: DatabaseName;
  phase: "fanout" | "drain";
  cursor: string;
  materialised: number;
  audienceDone: boolean;
};

/** One alarm run works this long, then re-arms itself at once: a long campaign is many short runs, each resumable. */
const RUN_BUDGET_MS = 10_000;
/** Messages enqueued per step; the daily limit is counted per step. */
const ENQUEUE_STEP = 1_000;
/** While draining, the completion check runs at least this often (the send consumer also wakes it after each batch). */
const DRAIN_POLL_MS = 30_000;
const RETRY_MS = 30_000;
/** While the campaign's pre-send checks run, how often the fan-out looks at their job. */
const CHECKS_POLL_MS = 30_000;

/**
 * One per campaign (named by its id): owns the campaign's schedule (an alarm at send_at), its fan-out cursor and its
 * completion. The state lives in this object's storage, so a crash or redeploy resumes where the last step ended;
 * every step is idempotent in D1 (see domain/campaigns/fanout.ts). Only the alarm does work: the RPC methods arm it.
 */
export class CampaignProgress extends DurableObject<Env> {
  private progress(): Progress | undefined {
    return this.ctx.storage.kv.get<Progress>("progress");
  }

  /**
   * Arms the fan-out for `runAt` (ms) of the campaign whose rows are in `database`; a second call (a retried POST
   * /send) changes nothing. `database` comes last, defaulting to `DB`, so a Worker version from before account
   * databases (all of whose rows were in `DB`) still calls this rightly during a gradual deployment.
   */
  async start(campaignId: string, accountId: string, runAt: number, database: DatabaseName = "DB"): Promise<void> {
    if (!this.progress()) this.save({ campaignId, accountId, database, phase: "fanout", cursor: "", materialised: 0, audienceDone: false });
    await this.ctx.storage.setAlarm(runAt);
  }

  /**
   * The cron found the campaign unchanged for a while (domain/campaigns/recovery.ts): arms a run now unless one is
   * armed. Lost progress starts again from the first contact (writing a chunk again inserts nothing, and each run
   * counts what D1 holds against the reservation). A campaign being settled (cancelled or failed) is armed now
   * unless it is about to run anyway: its only alarm may be its send_at, days away, and its credits would wait for it
   * (a cancel whose wake-up did not arrive). `database` is where the cron found the campaign's rows (the stored one
   * may predate a move of its account; last, for the reason `start` gives). Returns whether it armed.
   */
  async resume(campaignId: string, accountId: string, settling = false, database: DatabaseName = "DB"): Promise<boolean> {
    const progress = this.progress();
    this.save(
      progress ? { ...progress, database } : { campaignId, accountId, database, phase: "fanout", cursor: "", materialised: 0, audienceDone: false },
    );
    const armed = await this.ctx.storage.getAlarm();
    if (armed !== null && (!settling || armed <= Date.now() + DRAIN_POLL_MS)) return false;
    await this.ctx.storage.setAlarm(Date.now());
    return true;
  }

  /** Runs the next step now (after a cancellation). */
  async wake(): Promise<void> {
    if (this.progress()) await this.ctx.storage.setAlarm(Date.now());
  }

  /** The send consumer recorded outcomes of this campaign's messages: check completion soon. */
  async messagesSettled(): Promise<void> {
    if (this.progress()?.phase !== "drain") return;
    const soon = Date.now() + 500;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > soon) await this.ctx.storage.setAlarm(soon);
  }

  override async alarm(): Promise<void> {
    const progress = this.progress();
    if (!progress) return;
    try {
      const next = await this.step(progress);
      if (next === undefined) this.ctx.storage.kv.delete("progress");
      else await this.ctx.storage.setAlarm(next);
    } catch (error) {
      logError("campaign fan-out step failed; retrying", { campaign_id: progress.campaignId, error: String(error) });
      await this.ctx.storage.setAlarm(Date.now() + RETRY_MS);
    }
  }

  /** Does one run of work; returns when to run next, or undefined when the campaign needs nothing more. */
  private async step(progress: Progress): Promise<number | undefined> {
    const ctx = this.openCtx(progress);
    const { env, db } = ctx;
    let campaign = await loadCampaign(db, progress.campaignId);
    if (!campaign || campaign.status === "draft" || campaign.completedAt !== null) return undefined;
    if (campaign.status === "scheduled") {
      if (campaign.sendAt && Date.parse(campaign.sendAt) > Date.now()) return Date.parse(campaign.sendAt);
      await beginSending(db, campaign.id);
      campaign = await loadCampaign(db, progress.campaignId);
      if (!campaign) return undefined;
    }
    if (campaign.status === "cancelled" || campaign.status === "failed") return this.settle(progress);
    if (progress.phase === "drain") return this.drain(progress);
    // Pre-send hygiene: nothing is materialised before the campaign's checks are done (their job's completion or
    // failure wakes this object; the poll is the fallback).
    if (campaign.verificationJobId && progress.cursor === "") {
      const job = await findJob(db, { id: campaign.verificationJobId });
      if (job?.status === "pending" || job?.status === "processing") return Date.now() + CHECKS_POLL_MS;
    }

    const sender = await senderOf(ctx, campaign);
    if (sender?.domainStatus !== "verified") {
      await failCampaign(db, campaign.id, sender ? `the sender's domain ${sender.domain ?? ""} is no longer verified` : "the sender was deleted");
      return this.settle(progress);
    }
    const account = await findAccount(ctx.shared, campaign.accountId);
    if (!account) return undefined;
    const where = audienceWhere(campaign, await segmentConditions(db, campaign));
    // A segment edited after POST /send can outgrow D1's parameter limit: fail (settled like a cancel) rather than retry forever.
    if (audienceParameters(where) > MAX_AUDIENCE_PARAMETERS) {
      await failCampaign(db, campaign.id, "its segments now have too many conditions together for one query");
      return this.settle(progress);
    }
    const deadline = Date.now() + RUN_BUDGET_MS;
    // The stored count can be behind D1 (a save lost after a chunk was written): the cap below needs the real one.
    let state = progress.audienceDone ? progress : { ...progress, materialised: await materialisedCount(db, campaign.id) };
    while (Date.now() < deadline) {
      // The audience is capped at the reservation taken at POST /send: contacts added since then wait for another campaign.
      for (let i = 0; i < ENQUEUE_STEP / MATERIALISE_CHUNK && !state.audienceDone; i++) {
        const room = campaign.creditsReserved - state.materialised;
        const chunk =
          room > 0
            ? await materialiseChunk(db, campaign, sender, where, state.cursor, Math.min(MATERIALISE_CHUNK, room))
            : { inserted: 0, last: undefined };
        state = {
          ...state,
          cursor: chunk.last ?? state.cursor,
          materialised: state.materialised + chunk.inserted,
          audienceDone: chunk.last === undefined,
        };
        this.save(state);
      }

      const { reservation, resumeAt } = await reserveDailySendsUpTo(env, account, ENQUEUE_STEP);
      const { enqueued, error } = await enqueueScheduled(ctx, campaign.id, reservation.count);
      // Recipients not enqueued (nothing left, or the queue refused them) do not count against today's limit.
      if (enqueued < reservation.count) await releaseDailySends(env, account, { window: reservation.window, count: reservation.count - enqueued });
      if (error !== undefined) throw error;
      // The day's limit used up with nothing left to enqueue is the end of the fan-out, not a reason to wait for midnight.
      const allEnqueued = state.audienceDone && (reservation.count === 0 ? !(await hasScheduled(db, campaign.id)) : enqueued < reservation.count);
      if (allEnqueued) {
        this.save({ ...state, phase: "drain" });
        return this.drain({ ...state, phase: "drain" });
      }
      if (reservation.count === 0) return resumeAt;
      const current = await loadCampaign(db, campaign.id);
      if (current?.status !== "sending") return Date.now();
    }
    return Date.now();
  }

  /**
   * A cancelled or failed campaign: its messages not yet enqueued are cancelled (once, before draining), the ones on
   * the queue are skipped by the consumer, and it is settled once they have drained.
   */
  private async settle(progress: Progress): Promise<number | undefined> {
    if (progress.phase === "fanout") {
      await sweepUnqueued(this.openCtx(progress).db, progress.campaignId);
      this.save({ ...progress, phase: "drain" });
    }
    return this.drain(progress);
  }

  private async drain(progress: Progress): Promise<number | undefined> {
    return (await completeIfDone(this.openCtx(progress), progress.campaignId)) ? undefined : Date.now() + DRAIN_POLL_MS;
  }

  /** The context of the campaign's account database. */
  private openCtx(progress: Progress): Ctx {
    return inDatabase(openCtx(this.env, this.ctx), progress.database ?? "DB");
  }

  private save(progress: Progress) {
    this.ctx.storage.kv.put<Progress>("progress", progress);
  }
}
