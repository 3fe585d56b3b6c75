// Warm-up schedules per sending domain: day N (UTC days since `warmup_started_at`) lets schedule[N] recipients
// through; past the last day the warm-up completes. Messages over today's cap are never refused and never dropped:
// the send consumer holds them back (`deferred`, next_attempt_at = the next UTC midnight) and re-enqueues them with a
// delay. The count is a D1 row per domain and day (`warmup_usage`, in the account's database), reserved with one
// conditional UPDATE, so concurrent consumers never let more than the cap through.
//
// A domain's warm-up status is in `DB` (`domains`), its `warmup.status_changed` events in the account's database: two
// databases, no shared transaction. A transition is written to the domain first, conditionally (so exactly one
// writer makes it), then its event; if the event cannot be stored the transition is taken back, so a status change
// is never left without its event (applyWarmupChanges).

import { sql, type SQL } from "drizzle-orm";
import { inJsonArray, sqlNow, statement, type AccountDb, type Ctx, batch } from "../../db/client";
import type { domains } from "../../db/schema";
import { logError } from "../../lib/log";
import { forgetCachedDomain } from "../domains/lookup";
import { dayWindow, nextUtcMidnight } from "../sending/daily-limit";
import { enqueueMessages } from "../sending/enqueue";
import { eventStatement, type EventInput } from "../events/events";
import { dispatchEventInputs } from "../webhooks/dispatch";

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

/** A change of `domains` in `DB` and the UPDATE that takes it back. `apply` ends with RETURNING: a row when it applied. */
type DomainWrite = { apply: SQL; undo: SQL };

/** A warm-up transition: `apply` makes it (only from `previous`), `alongside` are writes that stand or fall with it. */
export type WarmupChange = DomainWrite & {
  domain: Pick<DomainRow, "id" | "accountId" | "name">;
  previous: WarmupStatus;
  status: WarmupStatus;
  reason?: string;
  alongside?: DomainWrite[];
};

/**
 * Makes warm-up transitions of the context's accounts: their domain writes in `DB` (one batch), then the events of
 * those that applied in the account's database, together with `accountWrites` (one batch). If that batch fails,
 * every domain write that applied is taken back before the error is rethrown, so no transition stands without its
 * event. The events are dispatched once written. Returns the account batch's results (`accountWrites` first).
 */
export async function applyWarmupChanges(ctx: Ctx, changes: readonly WarmupChange[], accountWrites: D1PreparedStatement[] = []): Promise<D1Result[]> {
  const { db, shared } = ctx;
  const writes = changes.flatMap((change) => [change, ...(change.alongside ?? [])]);
  const applied =
    writes.length > 0
      ? await batch(
          shared,
          writes.map((write) => statement(shared, write.apply)),
        )
      : [];
  const touched = [...new Set(changes.map((change) => change.domain.id))];
  // The delivery of this isolate must see the new status at once, not once its cached copy expires.
  touched.forEach(forgetCachedDomain);
  let index = 0;
  const happened = changes.filter((change) => {
    const made = applied[index]!.results.length > 0;
    index += 1 + (change.alongside?.length ?? 0);
    return made;
  });
  const events = happened.map((change) => warmupEvent(change.domain, change.previous, change.status, change.reason));
  const statements = [...accountWrites, ...events.map((event) => eventStatement(db, event))];
  let written: D1Result[] = [];
  try {
    if (statements.length > 0) written = await batch(db, statements);
  } catch (error) {
    const undone = writes.filter((_, i) => applied[i]!.results.length > 0);
    if (undone.length > 0)
      await batch(
        shared,
        undone.map((write) => statement(shared, write.undo)),
      );
    touched.forEach(forgetCachedDomain);
    throw error;
  }
  await dispatchEventInputs(ctx, events);
  return written;
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

  const completions = [...completed.values()].map(
    (domain): WarmupChange => ({
      domain,
      previous: "active",
      status: "completed",
      apply: sql`UPDATE domains SET warmup_status = 'completed' WHERE id = ${domain.id} AND warmup_status = 'active' RETURNING id`,
      undo: sql`UPDATE domains SET warmup_status = 'active' WHERE id = ${domain.id} AND warmup_status = 'completed'`,
    }),
  );
  const statements: D1PreparedStatement[] = [];
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
  if (statements.length === 0 && completions.length === 0) return new Set();
  const written = await applyWarmupChanges(ctx, completions, statements);
  const overCap = reservations.filter((reservation) => (written[reservation.statement]?.results.length ?? 0) === 0);

  const held = [...early, ...overCap.map(({ id }) => ({ id, due: tomorrow }))];
  await enqueueHeld(ctx, held, now);
  return new Set(held.map(({ id }) => id));
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
  const write = sql`UPDATE domains SET warmup_status = ${status}, warmup_schedule = ${JSON.stringify(schedule)}, warmup_started_at = ${startedAt},
    warmup_paused_reason = ${updated.warmupPausedReason}, updated_at = ${sqlNow} WHERE id = ${domain.id}`;
  if (status === domain.warmupStatus) {
    await ctx.shared.run(write);
    forgetCachedDomain(domain.id);
    return updated;
  }
  await applyWarmupChanges(ctx, [
    {
      domain,
      previous: domain.warmupStatus,
      status,
      apply: sql`${write} AND warmup_status = ${domain.warmupStatus} RETURNING id`,
      undo: sql`UPDATE domains SET warmup_status = ${domain.warmupStatus}, warmup_schedule = ${domain.warmupSchedule === null ? null : JSON.stringify(domain.warmupSchedule)},
        warmup_started_at = ${domain.warmupStartedAt}, warmup_paused_reason = ${domain.warmupPausedReason} WHERE id = ${domain.id} AND warmup_status = ${status}`,
    },
  ]);
  return updated;
}
