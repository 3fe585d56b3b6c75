// Warm-up schedules per sending domain: day N (UTC days since `warmup_started_at`) lets schedule[N] recipients
// through; past the last day the warm-up completes. Messages over today's cap are never refused and never dropped:
// the send consumer holds them back (`deferred`, next_attempt_at = the next UTC midnight) and re-enqueues them with a
// delay. The count is a D1 row per domain and day, reserved with one conditional UPDATE, so concurrent consumers
// never let more than the cap through.

import { sql } from "drizzle-orm";
import { inJsonArray, sqlNow, statement, type AccountDb, type Ctx, batch } from "../../db/client";
import type { domains } from "../../db/schema";
import { logError } from "../../lib/log";
import { dayWindow, nextUtcMidnight } from "../sending/daily-limit";
import { enqueueMessages } from "../sending/enqueue";
import { eventStatement, type EventInput } from "../events/events";
import { dispatchEventInputs } from "../webhooks/dispatch";
import { forgetCachedDomain } from "../domains/lookup";

type DomainRow = typeof domains.$inferSelect;

/**
 * Daily caps of the presets, in recipients. `standard` follows the ramps mailbox providers' sender guides describe
 * (roughly doubling from 50 a day to 100k over a month); `conservative` takes twice as long, `aggressive` half.
 */
export const warmupPresets = {
  conservative: [
    20, 40, 60, 100, 150, 200, 300, 400, 600, 800, 1000, 1500, 2000, 3000, 4000, 6000, 8000, 10000, 15000, 20000, 30000, 40000, 60000, 80000, 100000,
  ],
  standard: [50, 100, 200, 400, 800, 1500, 3000, 5000, 8000, 12000, 20000, 35000, 50000, 75000, 100000],
  aggressive: [200, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000],
} as const satisfies Record<string, readonly number[]>;
export type WarmupPreset = keyof typeof warmupPresets;

const DAY_MS = 86_400_000;

/** The warm-up's day index today (0 on the start day; negative before it). */
export function warmupDay(startedAt: string, now = new Date()): number {
  return Math.floor((Date.parse(dayWindow(now)) - Date.parse(startedAt.slice(0, 10))) / DAY_MS);
}

/** Today's cap of an active warm-up, or undefined when nothing limits the domain (off, paused, completed, or past the last day). */
export function todaysCap(domain: Pick<DomainRow, "warmupStatus" | "warmupSchedule" | "warmupStartedAt">, now = new Date()): number | undefined {
  if (domain.warmupStatus !== "active" || !domain.warmupSchedule?.length || !domain.warmupStartedAt) return undefined;
  const day = Math.max(0, warmupDay(domain.warmupStartedAt, now));
  return domain.warmupSchedule[day];
}

type WarmupStatus = DomainRow["warmupStatus"];

/** A domain's warm-up columns as stored (the schedule as its JSON text). */
type WarmupColumns = {
  warmup_status: WarmupStatus;
  warmup_schedule: string | null;
  warmup_started_at: string | null;
  warmup_paused_reason: string | null;
};

/**
 * The `warmup.status_changed` event of a transition, as a statement for the batch that makes it, placed just before
 * the UPDATE: it is written only if the warm-up is still `previous` there, so exactly when that UPDATE changes it, and
 * never without it (one transaction). Dispatch `input` once the batch has committed.
 */
export function warmupTransition(
  db: AccountDb,
  domain: Pick<DomainRow, "id" | "accountId" | "name">,
  previous: WarmupStatus,
  status: WarmupStatus,
  reason?: string,
): { event: D1PreparedStatement; input: EventInput } {
  const input = warmupEvent(domain, previous, status, reason);
  return { event: eventStatement(db, input, sql`EXISTS (SELECT 1 FROM domains WHERE id = ${domain.id} AND warmup_status = ${previous})`), input };
}

/** The `warmup.status_changed` event of a transition that happened. */
function warmupEvent(
  domain: Pick<DomainRow, "id" | "accountId" | "name">,
  previous: WarmupStatus,
  status: WarmupStatus,
  reason?: string,
): EventInput {
  return {
    accountId: domain.accountId,
    type: "warmup.status_changed",
    subjectId: domain.id,
    // Only a transition that happened is written, so each one is a distinct fact.
    dedupeKey: `warmup.status_changed:${domain.id}:${crypto.randomUUID()}`,
    data: { domain_id: domain.id, domain: domain.name, previous_status: previous, status, ...(reason ? { reason } : {}) },
  };
}

/** Queue delays stop at 12 hours; a message due later is delayed again when it comes back early. */
const MAX_QUEUE_DELAY_SECONDS = 43_200;

type WarmupCandidate = { id: string; domainId: string; recipients: number; nextAttemptAt: string | null };
type WarmupDomain = Pick<DomainRow, "id" | "accountId" | "name" | "warmupStatus" | "warmupSchedule" | "warmupStartedAt">;

const heldBack = "held back: the sending domain reached today's warm-up cap";

/**
 * Which of the claimed `candidates` today's warm-up caps hold back, decided and written in one D1 batch. Each message
 * of a warmed-up domain, in order, reserves its recipients with a conditional UPDATE of the domain's count that only
 * applies if they fit under the cap (so concurrent consumers never let more through, and a message too big for what
 * is left does not stop a smaller one after it); one that does not fit is set back to `deferred` until the next UTC
 * midnight. Held messages are enqueued again with a delay. A domain whose schedule has run out completes its warm-up
 * here (one `warmup.status_changed`).
 */
export async function holdPastWarmupCaps(
  ctx: Ctx,
  candidates: WarmupCandidate[],
  domainsById: ReadonlyMap<string, WarmupDomain>,
  now = new Date(),
): Promise<Set<string>> {
  const { db } = ctx;
  // Held back earlier and back before its time (queue delays stop at 12 hours; the cron may requeue it): it waits
  // again, until the time it was given, while the warm-up is active (a paused one lets it go now).
  const early: { id: string; due: number }[] = [];
  const capped = new Map<string, { cap: number; messages: WarmupCandidate[] }>();
  const completed = new Map<string, WarmupDomain>();
  for (const candidate of candidates) {
    const domain = domainsById.get(candidate.domainId);
    if (domain?.warmupStatus !== "active") continue;
    const due = candidate.nextAttemptAt === null ? undefined : Date.parse(candidate.nextAttemptAt);
    if (due !== undefined && due > now.getTime()) {
      early.push({ id: candidate.id, due });
      continue;
    }
    const cap = todaysCap(domain, now);
    if (cap === undefined) {
      completed.set(domain.id, domain);
      continue;
    }
    const entry = capped.get(domain.id) ?? { cap, messages: [] };
    entry.messages.push(candidate);
    capped.set(domain.id, entry);
  }

  // The domains are in the directory (`DB`), their events in the account's database: the completions are made there
  // first, and only the domains this run completed (not another consumer's) get an event, in this batch.
  const completions = (await completeWarmups(ctx, [...completed.values()])).map((domain) => warmupEvent(domain, "active", "completed"));
  const statements = completions.map((input) => eventStatement(db, input));
  if (early.length > 0) {
    const ids = early.map(({ id }) => id);
    // Their rows already carry the time they were given.
    statements.push(
      statement(
        db,
        sql`UPDATE messages SET status = 'deferred', claimed_at = NULL, smtp_response = ${heldBack}, updated_at = ${sqlNow}
          WHERE ${inJsonArray(sql`id`, ids)} AND status = 'sending'`,
      ),
    );
  }
  const day = dayWindow(now);
  const tomorrow = nextUtcMidnight(now);
  const tomorrowIso = new Date(tomorrow).toISOString();
  const reservations: { id: string; statement: number }[] = [];
  for (const [domainId, { cap, messages }] of capped) {
    statements.push(statement(db, sql`INSERT INTO warmup_usage (domain_id, day) VALUES (${domainId}, ${day}) ON CONFLICT DO NOTHING`));
    for (const message of messages) {
      // Both read the count as the reservations before them left it, so exactly one of the two applies.
      statements.push(
        statement(
          db,
          sql`UPDATE messages SET status = 'deferred', claimed_at = NULL, next_attempt_at = ${tomorrowIso},
            smtp_response = ${heldBack}, updated_at = ${sqlNow}
            WHERE id = ${message.id} AND status = 'sending'
              AND (SELECT sent FROM warmup_usage WHERE domain_id = ${domainId} AND day = ${day}) + ${message.recipients} > ${cap}`,
        ),
        statement(
          db,
          sql`UPDATE warmup_usage SET sent = sent + ${message.recipients}
            WHERE domain_id = ${domainId} AND day = ${day} AND sent + ${message.recipients} <= ${cap} RETURNING sent`,
        ),
      );
      reservations.push({ id: message.id, statement: statements.length - 1 });
    }
  }
  if (statements.length === 0) return new Set();
  let written: D1Result[];
  try {
    written = await batch(db, statements);
  } catch (error) {
    // Not written with its event: the completion is taken back, and the batch's next delivery completes it again.
    await undoCompletions(ctx, completions);
    throw error;
  }
  const overCap = reservations.filter((reservation) => (written[reservation.statement]?.results.length ?? 0) === 0);

  await dispatchEventInputs(ctx, completions);
  const held = [...early, ...overCap.map(({ id }) => ({ id, due: tomorrow }))];
  await enqueueHeld(ctx, held, now);
  return new Set(held.map(({ id }) => id));
}

/** Completes the warm-ups of `domains` still active in the directory; the ones this call completed. */
async function completeWarmups(ctx: Ctx, domains: WarmupDomain[]): Promise<WarmupDomain[]> {
  if (domains.length === 0) return [];
  const { results } = await statement(
    ctx.shared,
    sql`UPDATE domains SET warmup_status = 'completed', updated_at = ${sqlNow}
      WHERE ${inJsonArray(
        sql`id`,
        domains.map((domain) => domain.id),
      )} AND warmup_status = 'active' RETURNING id`,
  ).all<{ id: string }>();
  const completed = new Set(results.map((row) => row.id));
  for (const id of completed) forgetCachedDomain(id);
  return domains.filter((domain) => completed.has(domain.id));
}

/** Takes back the completions whose events could not be written. */
async function undoCompletions(ctx: Ctx, completions: EventInput[]): Promise<void> {
  if (completions.length === 0) return;
  const ids = completions.map((input) => input.subjectId);
  await statement(
    ctx.shared,
    sql`UPDATE domains SET warmup_status = 'active' WHERE ${inJsonArray(sql`id`, ids)} AND warmup_status = 'completed'`,
  ).run();
  for (const id of ids) if (id) forgetCachedDomain(id);
}

/** Enqueues held messages again, each delayed until its due time (at most 12 hours: it waits again if it comes early). */
async function enqueueHeld(ctx: Ctx, held: { id: string; due: number }[], now: Date) {
  const { refused, error } = await enqueueMessages(
    ctx,
    held.map(({ id, due }) => ({ id, delaySeconds: Math.min(MAX_QUEUE_DELAY_SECONDS, Math.max(0, Math.ceil((due - now.getTime()) / 1000))) })),
  );
  // The rows say deferred with their due time: the cron's requeueLostMessages enqueues them once it has passed.
  if (refused.length > 0) logError("warm-up: re-enqueueing held messages failed", { error: String(error), count: refused.length });
}

/** Recipients let through today (for GET /domains/{id}). */
export async function warmupSentToday(db: AccountDb, domainId: string, now = new Date()): Promise<number> {
  const row = await statement(db, sql`SELECT sent FROM warmup_usage WHERE domain_id = ${domainId} AND day = ${dayWindow(now)}`).first<{
    sent: number;
  }>();
  return row?.sent ?? 0;
}

type WarmupInput = { enabled: boolean; schedule?: number[]; preset?: WarmupPreset; startedAt?: string };

/**
 * Starts, changes or pauses a domain's warm-up. Enabling sets `active` (resuming a paused one keeps its start day
 * unless a new one is given); disabling sets `paused`. A status change emits `warmup.status_changed`.
 */
export async function setWarmup(ctx: Ctx, domain: DomainRow, input: WarmupInput, now = new Date()): Promise<DomainRow> {
  const { db, shared } = ctx;
  const schedule = input.schedule ?? (input.preset ? [...warmupPresets[input.preset]] : (domain.warmupSchedule ?? [...warmupPresets.standard]));
  const startedAt =
    input.startedAt ??
    (domain.warmupStartedAt && domain.warmupStatus !== "off" && domain.warmupStatus !== "completed" ? domain.warmupStartedAt : dayWindow(now));
  const status = input.enabled
    ? warmupDay(startedAt, now) >= schedule.length
      ? "completed"
      : "active"
    : domain.warmupStatus === "off"
      ? "off"
      : "paused";
  const updated = {
    ...domain,
    warmupStatus: status,
    warmupSchedule: schedule,
    warmupStartedAt: startedAt,
    warmupPausedReason: input.enabled ? null : "paused by the account",
  } satisfies DomainRow;
  // The domain is in the directory (`DB`), its event in the account's database: what it had is read in the UPDATE's
  // transaction, and the event written after it only if the status changed there, so an event never announces a
  // change that was not made, and two requests racing announce one.
  const [before] = await batch<WarmupColumns>(shared, [
    statement(shared, sql`SELECT warmup_status, warmup_schedule, warmup_started_at, warmup_paused_reason FROM domains WHERE id = ${domain.id}`),
    statement(
      shared,
      sql`UPDATE domains SET warmup_status = ${status}, warmup_schedule = ${JSON.stringify(schedule)}, warmup_started_at = ${startedAt},
        warmup_paused_reason = ${updated.warmupPausedReason}, updated_at = ${sqlNow} WHERE id = ${domain.id}`,
    ),
  ]);
  forgetCachedDomain(domain.id);
  const previous = before?.results[0];
  if (previous && previous.warmup_status !== status) {
    const input = warmupEvent(domain, previous.warmup_status, status);
    try {
      await batch(db, [eventStatement(db, input)]);
    } catch (error) {
      // Two databases' writes cannot be one transaction: a change whose event could not be stored is taken back (unless
      // another change followed it), so the warm-up stays as it was and no change goes unannounced.
      await statement(
        shared,
        sql`UPDATE domains SET warmup_status = ${previous.warmup_status}, warmup_schedule = ${previous.warmup_schedule},
          warmup_started_at = ${previous.warmup_started_at}, warmup_paused_reason = ${previous.warmup_paused_reason}
          WHERE id = ${domain.id} AND warmup_status = ${status}`,
      ).run();
      forgetCachedDomain(domain.id);
      throw error;
    }
    await dispatchEventInputs(ctx, [input]);
  }
  return updated;
}
