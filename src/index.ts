import { accountDatabaseNames, inDatabase, openCtx, type Ctx } from "./db/client";
import { databasesOfMoves } from "./domain/accounts/move";
import { logWarning } from "./lib/log";
import { createApp } from "./app";
import { sweepUndispatchedEvents } from "./domain/webhooks/dispatch";
import { consumeWebhookDeadLetters, consumeWebhookDeliveries } from "./queues/webhooks";
import { recheckDomains } from "./domain/domains/domains";
import { purgeDnsCache, purgeExpiredIdempotencyKeys } from "./domain/sending/maintenance";
import { requeueLostMessages, sweepStaleClaims } from "./domain/sending/recovery";
import { enqueueDueScheduledMessages } from "./domain/sending/schedule";
import { consumeSendBatch, consumeSendDeadLetters } from "./queues/send";
import { consumeAiDeadLetters, consumeAiRequests } from "./queues/ai";
import { consumeEmailEvents } from "./queues/email-events";
import { handleFeedbackEmail } from "./domain/feedback/intake";
import { handleInboundEmail } from "./domain/inbound/receive";
import { config } from "./config";
import { evaluateReputation } from "./domain/feedback/reputation";
import { consumeVerifyDeadLetters, consumeVerifyQueue } from "./queues/verify-queue";
import { sweepStaleVerificationJobs } from "./domain/verification/job-sweep";
import { sweepStaleContactImports } from "./domain/contacts/import-sweep";
import { resumeStalledCampaigns } from "./domain/campaigns/recovery";
import { purgeExpiredData } from "./domain/retention/purge";
import { runScheduledTasks, type ScheduledTask } from "./lib/scheduled";
import { grantMonthlyCredits } from "./domain/credits/monthly";
import { purgeOldAuditEntries } from "./domain/audit/purge";
import { purgeExpiredSignIns } from "./domain/members/sign-in";

export { CampaignProgress } from "./durable-objects/campaign-progress";
export { RateLimiter } from "./durable-objects/rate-limiter";
export { WebhookEndpointQueue } from "./durable-objects/webhook-endpoint-queue";
export { AutomationWorkflow } from "./workflows/automation";

type QueueConsumer = (batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext) => Promise<void>;

// One consumer per queue (names as in wrangler.toml); each parses its message bodies with its own zod schema.
const queueConsumers: Record<string, QueueConsumer> = {
  // Work after a batch's outcome is written does not hold up the next batch (queue_consumer_no_wait_for_wait_until).
  "mailforge-send": (batch, env, ctx) => consumeSendBatch(batch, env, { waitUntil: (promise) => ctx.waitUntil(promise) }),
  "mailforge-send-dlq": consumeSendDeadLetters,
  "mailforge-webhooks": consumeWebhookDeliveries,
  "mailforge-webhooks-dlq": consumeWebhookDeadLetters,
  "mailforge-verify": consumeVerifyQueue,
  "mailforge-verify-dlq": consumeVerifyDeadLetters,
  "mailforge-ai": consumeAiRequests,
  "mailforge-ai-dlq": consumeAiDeadLetters,
  "mailforge-email-events": consumeEmailEvents,
};

// The databases a running move copies from or to, read once per cron run (the tasks run side by side).
const movingThisRun = new WeakMap<ScheduledController, Promise<Set<string>>>();
const databasesInAMove = (ctx: Ctx, controller: ScheduledController) => {
  let found = movingThisRun.get(controller);
  if (!found) {
    found = databasesOfMoves(ctx.shared);
    movingThisRun.set(controller, found);
  }
  return found;
};

/**
 * A sweep of accounts' rows, run in each account database in turn with a context of its own (each task bounds its
 * own batches), so a sweep reaches every account wherever its rows are. A database an account is being moved from or
 * to is left for the next run: a sweep's deletes or writes there would make the move's counts differ (it would be
 * undone) or land in the half-made copy. Sweeps catch up, so a run missed costs nothing but a quarter of an hour.
 */
const inEachAccountDatabase =
  (task: ScheduledTask): ScheduledTask =>
  async (ctx, controller) => {
    const moving = await databasesInAMove(ctx, controller);
    for (const database of accountDatabaseNames(ctx.env)) {
      if (moving.has(database)) logWarning("scheduled sweep skipped: an account is moving", { database });
      else await task(inDatabase(ctx, database), controller);
    }
  };

// Work the cron trigger runs, by name for the logs; each task is independent and must tolerate running twice.
const scheduledTasks: Record<string, ScheduledTask> = {
  recheckDomains,
  purgeExpiredIdempotencyKeys: inEachAccountDatabase(purgeExpiredIdempotencyKeys),
  purgeDnsCache,
  // Messages no consumer will finish on its own: lost queue messages, claims of consumers that died.
  requeueLostMessages: inEachAccountDatabase(async (ctx) => void (await requeueLostMessages(ctx))),
  sweepStaleClaims: inEachAccountDatabase(async (ctx) => void (await sweepStaleClaims(ctx))),
  // Scheduled sends beyond the queue's 12-hour delay limit (or whose queue message was lost), as they fall due.
  enqueueDueScheduledMessages: inEachAccountDatabase(
    async (ctx, controller) => void (await enqueueDueScheduledMessages(ctx, new Date(controller.scheduledTime))),
  ),
  // The webhook outbox: events a producer wrote but did not dispatch.
  sweepUndispatchedEvents: inEachAccountDatabase(async (ctx) => void (await sweepUndispatchedEvents(ctx))),
  // Bulk work whose queue message was lost: resumed, or failed and refunded once it is too old.
  sweepStaleVerificationJobs: inEachAccountDatabase(
    async (ctx, controller) => void (await sweepStaleVerificationJobs(ctx, new Date(controller.scheduledTime))),
  ),
  sweepStaleContactImports: inEachAccountDatabase(
    async (ctx, controller) => void (await sweepStaleContactImports(ctx, new Date(controller.scheduledTime))),
  ),
  // Campaign fan-outs whose progress object lost its alarm: re-armed where they stopped.
  resumeStalledCampaigns: inEachAccountDatabase(
    async (ctx, controller) => void (await resumeStalledCampaigns(ctx, new Date(controller.scheduledTime))),
  ),
  // Domains whose bounce or complaint rate crossed a limit through synchronous bounces (reports already check it).
  evaluateReputation: inEachAccountDatabase(async (ctx) => void (await evaluateReputation(ctx))),
  // Plans' monthly verification credits: granted once per account and calendar month (UTC), last month's unused expired.
  grantMonthlyCredits: (ctx, controller) => grantMonthlyCredits(ctx, new Date(controller.scheduledTime)),
  // Retention: finished messages (with their rows and content), events and webhook deliveries past RETENTION_DAYS.
  purgeExpiredData: inEachAccountDatabase(async (ctx, controller) => void (await purgeExpiredData(ctx, new Date(controller.scheduledTime)))),
  // Expired sign-in links and member sessions (shared tables); audit log entries past RETENTION_DAYS (account rows).
  purgeExpiredSignIns,
  purgeOldAuditEntries: inEachAccountDatabase((ctx, controller) => purgeOldAuditEntries(ctx, new Date(controller.scheduledTime))),
};

const app = createApp();

export default {
  fetch: app.fetch,
  async queue(batch, env, ctx) {
    const consume = queueConsumers[batch.queue];
    if (!consume) throw new Error(`No consumer for queue ${batch.queue}`);
    await consume(batch, env, ctx);
  },
  // Cloudflare Email Routing: mail to BOUNCE_DOMAIN is DSNs and feedback-loop reports; any other mail is for a
  // receiving domain (docs/inbound.md), or refused.
  async email(message, env, ctx) {
    const bounceDomain = config(env).bounceDomain;
    if (bounceDomain && message.to.toLowerCase().endsWith(`@${bounceDomain}`)) await handleFeedbackEmail(message, openCtx(env, ctx));
    else await handleInboundEmail(message, openCtx(env, ctx));
  },
  async scheduled(controller, env, ctx) {
    ctx.waitUntil(runScheduledTasks(scheduledTasks, openCtx(env, ctx), controller));
  },
} satisfies ExportedHandler<Env>;
