// AI requests: stored at POST /ai/campaign (quota checked in the same statement), claimed by the queue consumer,
// completed together with their draft campaigns in one D1 batch, or failed. This module owns ai_requests' queries.
//
// Quota: completed generations whose completed_at falls in the current UTC month, plus the requests still queued or
// running, must stay under accounts.ai_generations_per_month. Counting those in flight at POST time is what stops ten
// concurrent POSTs from passing a limit of 1 (the INSERT … SELECT … WHERE is one statement, and D1 runs one at a
// time); a request that then fails gives its place back.

import { z } from "zod";
import { and, count, eq, gte, inArray, or, sql } from "drizzle-orm";
import { sqlNow, statement, type AccountDb, batch, databaseNameOf, type Ctx } from "../../db/client";
import { accounts, aiRequests, type aiRequestStatuses } from "../../db/schema";
import { idFromDigest, newId } from "../../lib/ids";
import { keysetPage } from "../pagination";
import { draftInsert } from "../campaigns/campaigns";
import type { AiRequestInput, GeneratedDrafts } from "./draft";
import type { TokenUsage } from "./adapter";
import { chooseProvider } from "./provider";
import { findOwned } from "../owned";
import { logError } from "../../lib/log";
import {
  findStoredResponse,
  type Idempotency,
  isIdempotencyRace,
  recordResponseStatement,
  releaseKeyStatement,
  replay,
  replayAfterRace,
  type Replayed,
} from "../sending/idempotency";
import { isRefusal, type Refusal } from "../refusal";

/** The AI queue's message: the request to generate (its consumer, generation.ts, parses it). */
export const aiQueueMessageSchema = z.object({
  request_id: z.string().min(1),
  /** The account database the request's row is in; messages sent before account databases name none: DB. */
  database: z.string().max(64).default("DB"),
});
export type AiQueueMessage = z.infer<typeof aiQueueMessageSchema>;

export type AiRequestRow = typeof aiRequests.$inferSelect;
export type AiRequestStatus = (typeof aiRequestStatuses)[number];

/** The UTC month `now` is in: where the quota's count starts, and when it starts again. */
export function quotaMonth(now: Date): { start: string; resetsAt: string } {
  const start = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
  return { start: new Date(start).toISOString(), resetsAt: new Date(next).toISOString() };
}

const countedThisMonth = (accountId: string, monthStart: string) =>
  and(
    eq(aiRequests.accountId, accountId),
    or(inArray(aiRequests.status, ["queued", "running"]), and(eq(aiRequests.status, "completed"), gte(aiRequests.completedAt, monthStart))),
  );

export type AiUsage = { limit: number; used: number; inProgress: number; resetsAt: string };

/** This month's generations of the account: completed, and queued or running (which count against the limit too). */
export async function aiUsage(db: AccountDb, account: { id: string; aiGenerationsPerMonth: number }, now = new Date()): Promise<AiUsage> {
  const month = quotaMonth(now);
  const rows = await db
    .select({ status: aiRequests.status, total: count() })
    .from(aiRequests)
    .where(countedThisMonth(account.id, month.start))
    .groupBy(aiRequests.status)
    .all();
  const total = (status: AiRequestStatus) => rows.find((row) => row.status === status)?.total ?? 0;
  return { limit: account.aiGenerationsPerMonth, used: total("completed"), inProgress: total("queued") + total("running"), resetsAt: month.resetsAt };
}

/** POST /ai/campaign's answer, as the Idempotency-Key store keeps it for replays. */
export type AiRequestAccepted = { id: string; status: "queued" };

export const acceptedAnswer = (id: string): AiRequestAccepted => ({ id, status: "queued" });

const replayedOutcome = (replayed: Replayed<AiRequestAccepted> | Refusal): CreateOutcome =>
  isRefusal(replayed) ? replayed : { kind: "replayed", answer: replayed.body };

export type CreateOutcome =
  | { kind: "created"; request: AiRequestRow }
  | { kind: "quota_exceeded"; limit: number; resetsAt: string }
  /** The Idempotency-Key was used before with this body: nothing new was stored, this is the first answer. */
  | { kind: "replayed"; answer: AiRequestAccepted }
  /** The Idempotency-Key came with another body, or its first request is still being stored. */
  | Refusal;

/**
 * Stores a queued request if the account's monthly quota has room for it, in one statement, with its
 * Idempotency-Key record (if any) in the same batch.
 */
export async function createAiRequest(
  db: AccountDb,
  accountId: string,
  input: AiRequestInput,
  idempotency?: Idempotency,
  now = new Date(),
): Promise<CreateOutcome> {
  // The first answer to this request's Idempotency-Key, if it has one (refused if it came with another body).
  const storedAnswer = async (): Promise<CreateOutcome | undefined> => {
    const previous = idempotency && (await findStoredResponse(db, accountId, idempotency));
    return previous && idempotency ? replayedOutcome(replay<AiRequestAccepted>(previous, idempotency)) : undefined;
  };
  const earlier = await storedAnswer();
  if (earlier) return earlier;
  const id = newId("air");
  const month = quotaMonth(now);
  const counted = db.select({ n: count() }).from(aiRequests).where(countedThisMonth(accountId, month.start));
  const limit = db.select({ limit: accounts.aiGenerationsPerMonth }).from(accounts).where(eq(accounts.id, accountId));
  const insert = statement(
    db,
    sql`INSERT INTO ${aiRequests} (id, account_id, status, input, campaign_ids)
        SELECT ${id}, ${accountId}, 'queued', ${JSON.stringify(input)}, '[]'
        WHERE (${counted}) < (${limit})`,
  );
  const writes = idempotency
    ? [insert, recordResponseStatement(db, accountId, idempotency, { status: 202, body: acceptedAnswer(id) }, { table: aiRequests, id })]
    : [insert];
  let inserted: number;
  try {
    inserted = (await batch(db, writes))[0]!.meta.changes;
  } catch (error) {
    if (!(idempotency && isIdempotencyRace(error))) throw error;
    return replayedOutcome(await replayAfterRace<AiRequestAccepted>(db, accountId, idempotency));
  }
  if (inserted === 0) {
    // A concurrent request with the same key may have taken the quota's last place: its answer is this one's.
    const winner = await storedAnswer();
    if (winner) return winner;
    const account = await limit.get();
    return { kind: "quota_exceeded", limit: account?.limit ?? 0, resetsAt: month.resetsAt };
  }
  const request = await db.select().from(aiRequests).where(eq(aiRequests.id, id)).get();
  if (!request) throw new Error(`AI request ${id} was written but could not be read back`);
  return { kind: "created", request };
}

export type SubmitOutcome =
  | CreateOutcome
  | { kind: "not_configured"; reason: string }
  /** The queue refused the request; it was failed at once (it does not count against the quota) and its key freed. */
  | { kind: "queue_unavailable" };

/** Accepts a generation for the account: a provider must be configured, the quota must have room, and it is queued. */
export async function submitAiRequest(ctx: Ctx, accountId: string, input: AiRequestInput, idempotency?: Idempotency): Promise<SubmitOutcome> {
  const { env, db } = ctx;
  const provider = chooseProvider(env);
  if (provider.kind === "not_configured") return { kind: "not_configured", reason: provider.reason };
  const outcome = await createAiRequest(db, accountId, input, idempotency);
  if (outcome.kind !== "created") return outcome;
  const message: AiQueueMessage = { request_id: outcome.request.id, database: databaseNameOf(db) };
  try {
    await env.AI_QUEUE.send(message);
  } catch (error) {
    logError("ai: enqueue failed", { request_id: outcome.request.id, error: String(error) });
    await failAiRequest(db, outcome.request.id, "The request could not be queued");
    if (idempotency) await releaseKeyStatement(db, accountId, idempotency).run();
    return { kind: "queue_unavailable" };
  }
  return outcome;
}

export async function findAiRequest(db: AccountDb, accountId: string, id: string): Promise<AiRequestRow | undefined> {
  return findOwned(db, aiRequests, accountId, id);
}

/** A page of the account's requests, newest first (`limit + 1` rows, for `pageOf`). */
export async function listAiRequests(db: AccountDb, accountId: string, page: { cursor?: string; limit: number; status?: AiRequestStatus }) {
  const keyset = keysetPage(aiRequests, page.cursor);
  return db
    .select()
    .from(aiRequests)
    .where(and(eq(aiRequests.accountId, accountId), page.status ? eq(aiRequests.status, page.status) : undefined, keyset.where))
    .orderBy(...keyset.orderBy)
    .limit(page.limit + 1)
    .all();
}

/**
 * Marks the request running and counts the attempt; undefined when it is already completed or failed (a duplicate
 * or late delivery). A running request is claimed again: its consumer died, and the queue delivered it anew.
 */
export async function claimAiRequest(db: AccountDb, id: string): Promise<AiRequestRow | undefined> {
  return db
    .update(aiRequests)
    .set({ status: "running", attempts: sql`${aiRequests.attempts} + 1`, updatedAt: sql`${sqlNow}` })
    .where(and(eq(aiRequests.id, id), inArray(aiRequests.status, ["queued", "running"])))
    .returning()
    .get();
}

const addedUsage = (usage: TokenUsage | undefined) =>
  usage && {
    inputTokens: sql`coalesce(${aiRequests.inputTokens}, 0) + ${usage.inputTokens}`,
    outputTokens: sql`coalesce(${aiRequests.outputTokens}, 0) + ${usage.outputTokens}`,
  };

/** Back to `queued` while the queue waits to deliver it again (after a time-out, 429 or 5xx). */
export async function requeueAiRequest(db: AccountDb, id: string): Promise<void> {
  await db
    .update(aiRequests)
    .set({ status: "queued", updatedAt: sql`${sqlNow}` })
    .where(and(eq(aiRequests.id, id), eq(aiRequests.status, "running")));
}

/** Failed for good; it no longer counts against the quota. Completed requests stay completed. */
export async function failAiRequest(db: AccountDb, id: string, error: string, usage?: TokenUsage): Promise<void> {
  await db
    .update(aiRequests)
    .set({ status: "failed", error, ...addedUsage(usage), completedAt: sql`${sqlNow}`, updatedAt: sql`${sqlNow}` })
    .where(and(eq(aiRequests.id, id), inArray(aiRequests.status, ["queued", "running"])));
}

const MAX_NAME_EXCERPT = 80;

/** "AI: <start of the prompt> — variation 1 of 2", so the drafts are recognisable in GET /campaigns. */
function draftName(input: AiRequestInput, part: string): string {
  const prompt = input.prompt.replace(/\s+/g, " ").trim();
  const excerpt = prompt.length > MAX_NAME_EXCERPT ? `${prompt.slice(0, MAX_NAME_EXCERPT - 1)}…` : prompt;
  return `AI: ${excerpt} — ${part}`;
}

async function draftId(requestId: string, index: number): Promise<string> {
  return idFromDigest("cmp", new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${requestId}:${index}`))));
}

export type StoredResult = {
  variations: { subject: string; preheader: string | null; html: string; text: string }[];
  followups: { delay_days: number; subject: string; preheader: string | null; html: string; text: string }[];
};

/**
 * Writes each variation and follow-up as a draft campaign and completes the request, in one D1 batch. The drafts'
 * ids derive from the request, so a second consumer finishing the same request fails on them and writes nothing:
 * "already_completed".
 */
export async function completeAiRequest(
  db: AccountDb,
  request: AiRequestRow,
  input: AiRequestInput,
  drafts: GeneratedDrafts,
  usage: TokenUsage,
): Promise<"completed" | "already_completed"> {
  const contents = [
    ...drafts.variations.map((draft, i) => ({ draft, name: draftName(input, `variation ${i + 1} of ${drafts.variations.length}`) })),
    ...drafts.followups.map((draft, i) => ({ draft, name: draftName(input, `follow-up ${i + 1}, ${draft.delayDays} day(s) later`) })),
  ];
  const ids = await Promise.all(contents.map((_, i) => draftId(request.id, i)));
  const result: StoredResult = {
    variations: drafts.variations.map(({ subject, preheader, html, text }) => ({ subject, preheader, html, text })),
    followups: drafts.followups.map(({ delayDays, subject, preheader, html, text }) => ({ delay_days: delayDays, subject, preheader, html, text })),
  };
  const inserts = contents.map(({ draft, name }, i) =>
    statement(
      db,
      draftInsert(db, request.accountId, ids[i]!, {
        name,
        senderId: null,
        subject: draft.subject,
        preheader: draft.preheader,
        html: draft.html,
        text: draft.text,
        templateId: null,
        variables: {},
        tags: [],
        lists: [],
        segments: [],
        excludeLists: [],
        topicId: null,
        trackOpens: true,
        trackClicks: true,
        verification: "off",
      }),
    ),
  );
  const completion = statement(
    db,
    db
      .update(aiRequests)
      .set({
        status: "completed",
        result,
        campaignIds: ids,
        error: null,
        ...addedUsage(usage),
        completedAt: sql`${sqlNow}`,
        updatedAt: sql`${sqlNow}`,
      })
      .where(and(eq(aiRequests.id, request.id), inArray(aiRequests.status, ["queued", "running"]))),
  );
  try {
    await batch(db, [...inserts, completion]);
  } catch (error) {
    if (error instanceof Error && /UNIQUE constraint failed: campaigns\.id/.test(error.message)) return "already_completed";
    throw error;
  }
  return "completed";
}

export function serializeAiRequest(row: AiRequestRow) {
  return {
    id: row.id,
    status: row.status,
    input: row.input,
    result: row.result as StoredResult | null,
    campaign_ids: row.campaignIds,
    error: row.error,
    usage:
      row.inputTokens === null && row.outputTokens === null ? null : { input_tokens: row.inputTokens ?? 0, output_tokens: row.outputTokens ?? 0 },
    attempts: row.attempts,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
    completed_at: row.completedAt,
  };
}
