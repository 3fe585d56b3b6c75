// One AI request's generation, as the queue consumer runs it: claim, ask the provider (draft.ts), then complete with
// the draft campaigns, fail, or ask to be delivered again later. Nothing here schedules or sends a campaign.

import type { Ctx } from "../../db/client";
import { config } from "../../config";
import { logError, logWarning } from "../../lib/log";
import { aiRequestInputSchema, generateDrafts } from "./draft";
import { ProviderError } from "./adapter";
import { chooseProvider } from "./provider";
import { claimAiRequest, completeAiRequest, failAiRequest, requeueAiRequest } from "./requests";

/** Longest wait between two attempts, whatever the back-off or Retry-After says. */
const MAX_RETRY_DELAY_SECONDS = 3_600;

export type ProcessOutcome = { kind: "done" } | { kind: "retry"; delaySeconds: number };

/** Exponential back-off from AI_RETRY_BASE_SECONDS, or the provider's Retry-After when that is longer. */
export function retryDelaySeconds(baseSeconds: number, attempt: number, retryAfter?: number): number {
  return Math.min(MAX_RETRY_DELAY_SECONDS, Math.max(baseSeconds * 2 ** (attempt - 1), retryAfter ?? 0));
}

export async function processAiRequest(ctx: Ctx, requestId: string): Promise<ProcessOutcome> {
  const { env, db } = ctx;
  const request = await claimAiRequest(db, requestId);
  if (!request) return { kind: "done" };
  const settings = config(env).ai;
  const choice = chooseProvider(env);
  if (choice.kind === "not_configured") {
    await failAiRequest(db, request.id, `No AI provider is configured any more: ${choice.reason}`);
    return { kind: "done" };
  }
  const input = aiRequestInputSchema.safeParse(request.input);
  if (!input.success) {
    logError("ai: stored input no longer parses", { request_id: request.id, issues: input.error.issues });
    await failAiRequest(db, request.id, "The stored request could not be read; submit it again");
    return { kind: "done" };
  }

  let outcome: Awaited<ReturnType<typeof generateDrafts>>;
  try {
    outcome = await generateDrafts(choice.provider, input.data);
  } catch (error) {
    if (!(error instanceof ProviderError)) throw error;
    if (error.retryable && request.attempts < settings.maxAttempts) {
      logWarning("ai: provider unavailable, retrying", { request_id: request.id, attempt: request.attempts, error: error.message });
      await requeueAiRequest(db, request.id);
      return { kind: "retry", delaySeconds: retryDelaySeconds(settings.retryBaseSeconds, request.attempts, error.retryAfterSeconds) };
    }
    const after = error.retryable ? ` (gave up after ${request.attempts} attempts)` : "";
    await failAiRequest(db, request.id, `${error.message}${after}`);
    return { kind: "done" };
  }

  if (outcome.kind === "invalid") {
    await failAiRequest(db, request.id, outcome.error, outcome.usage);
    return { kind: "done" };
  }
  await completeAiRequest(db, request, input.data, outcome.drafts, outcome.usage);
  return { kind: "done" };
}
