// Warm-up schedules per sending domain: day N (UTC days since `warmup_started_at`) lets schedule[N] recipients
// through; past the last day the warm-up completes. Messages over today's cap are never refused and never dropped:
// the send consumer holds them back (`deferred`, next_attempt_at = the next UTC midnight) and re-enqueues them with a
// delay. The count is a D1 row per domain and day, reserved with one conditional UPDATE, so concurrent consumers
// never let more than the cap through.

import { sql } from "drizzle-orm";
import { inJsonArray, sqlNow, statement } from "../../db/client";
import type { domains } from "../../db/schema";
import { logError } from "../../lib/log";
import { dayWindow, nextUtcMidnight } from "../sending/daily-limit";
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

/**
 * The `warmup.status_changed` event of a transition, as a statement for the batch that makes it, placed just before
 * the UPDATE: it is written only if the warm-up is still `previous` there, so exactly when that UPDATE changes it, and
 * never without it (one transaction). Dispatch `input` once the batch has committed.
 */
export function warmupTransition(
  d1: D1Database,
  domain: Pick<DomainRow, "id" | "accountId" | "name">,
  previous: WarmupStatus,
  status: WarmupStatus,
  reason?: string,
): { event: D1PreparedStatement; input: EventInput } {
  const input: EventInput = {
    accountId: domain.accountId,
    type: "warmup.status_changed",
    subjectId: domain.id,
    // Only a transition that happened is written, so each one is a distinct fact.
    dedupeKey: `warmup.status_changed:${domain.id}:${crypto.randomUUID()}`,
    data: { domain_id: domain.id, domain: domain.name, previous_status: previous, status, ...(reason ? { reason } : {}) },
  };
  return { event: eventStatement(d1, input, sql`EXISTS (SELECT 1 FROM domains WHERE id = ${domain.id} AND warmup_status = ${previous})`), input };
}

/** Queue delays stop at 12 hours; a message due later is delayed again when it comes back early. */
const MAX_QUEUE_DELAY_SECONDS = 43_200;

type WarmupCandidate = { id: string; domainId: string; recipients: number; nextAttemptAt: string | null };
type WarmupDomain = Pick<DomainRow, "id" | "accountId" | "name" | "warmupStatus" | "warmupSchedule" | "warmupStartedAt">;

/**
 * Which of the claimed `candidates` today's warm-up caps hold back. Each warmed-up domain reserves what its messages
 * need in one statement (`granted` = what fit under the cap); messages are let through in order while they fit, the
 * rest are set back to `deferred` until the next UTC midnight and enqueued again with a delay. A domain whose
 * schedule has run out completes its warm-up here (one `warmup.status_changed`).
 */
export async function holdPastWarmupCaps(
  env: Env,
  candidates: WarmupCandidate[],
  domainsById: ReadonlyMap<string, WarmupDomain>,
  now = new Date(),
): Promise<Set<string>> {
  const held = new Set<string>();
  // Held back earlier and back before its time (queue delays stop at 12 hours; the cron may requeue it): it waits
  // again while the warm-up is active (a paused one lets it go now).
  const early = candidates.filter(
    (candidate) =>
      candidate.nextAttemptAt !== null &&
      Date.parse(candidate.nextAttemptAt) > now.getTime() &&
      domainsById.get(candidate.domainId)?.warmupStatus === "active",
  );
  const capped = new Map<string, { cap: number; messages: WarmupCandidate[] }>();
  const completed: WarmupDomain[] = [];
  for (const candidate of candidates) {
    if (early.includes(candidate)) continue;
    const domain = domainsById.get(candidate.domainId);
    if (domain?.warmupStatus !== "active") continue;
    const cap = todaysCap(domain, now);
    if (cap === undefined) {
      if (!completed.includes(domain)) completed.push(domain);
      continue;
    }
    const entry = capped.get(domain.id) ?? { cap, messages: [] };
    entry.messages.push(candidate);
    capped.set(domain.id, entry);
  }
  if (completed.length > 0) await completeWarmups(env, completed);
  if (early.length > 0)
    await holdUntil(
      env,
      early.map((candidate) => candidate.id),
      new Date(Math.max(...early.map((candidate) => Date.parse(candidate.nextAttemptAt!)))),
      now,
    );
  for (const candidate of early) held.add(candidate.id);
  if (capped.size === 0) return held;

  const day = dayWindow(now);
  const entries = [...capped];
  const reserved = await env.DB.batch<{ granted: number }>(
    entries.flatMap(([domainId, { cap, messages }]) => {
      const wanted = messages.reduce((sum, message) => sum + message.recipients, 0);
      return [
        statement(env.DB, sql`INSERT INTO warmup_usage (domain_id, day) VALUES (${domainId}, ${day}) ON CONFLICT DO NOTHING`),
        // SET expressions all read the row as it was, so `granted` is what this reservation added.
        statement(
          env.DB,
          sql`UPDATE warmup_usage SET granted = MAX(0, MIN(${cap}, sent + ${wanted}) - sent), sent = MAX(sent, MIN(${cap}, sent + ${wanted}))
            WHERE domain_id = ${domainId} AND day = ${day} RETURNING granted`,
        ),
      ];
    }),
  );
  const giveBack: D1PreparedStatement[] = [];
  const overCap: string[] = [];
  entries.forEach(([domainId, { messages }], i) => {
    let left = reserved[i * 2 + 1]?.results[0]?.granted ?? 0;
    for (const message of messages) {
      if (message.recipients <= left) left -= message.recipients;
      else overCap.push(message.id);
    }
    // Slots reserved for messages that did not fit (a multi-recipient message over what was left) go back.
    if (left > 0) giveBack.push(statement(env.DB, sql`UPDATE warmup_usage SET sent = sent - ${left} WHERE domain_id = ${domainId} AND day = ${day}`));
  });
  if (giveBack.length > 0) await env.DB.batch(giveBack);
  if (overCap.length > 0) await holdUntil(env, overCap, new Date(nextUtcMidnight(now)), now);
  for (const id of overCap) held.add(id);
  return held;
}

/** Sets claimed messages back to `deferred` until `due` and enqueues them again with a delay (at most 12 hours). */
async function holdUntil(env: Env, ids: string[], due: Date, now: Date) {
  await statement(
    env.DB,
    sql`UPDATE messages SET status = 'deferred', claimed_at = NULL, next_attempt_at = ${due.toISOString()},
      smtp_response = 'held back: the sending domain reached today''s warm-up cap', updated_at = ${sqlNow}
      WHERE ${inJsonArray(sql`id`, ids)} AND status = 'sending'`,
  ).run();
  try {
    const delaySeconds = Math.min(MAX_QUEUE_DELAY_SECONDS, Math.max(0, Math.ceil((due.getTime() - now.getTime()) / 1000)));
    // sendBatch takes at most 100 messages.
    for (let i = 0; i < ids.length; i += 100) {
      await env.SEND_QUEUE.sendBatch(ids.slice(i, i + 100).map((id) => ({ body: { message_id: id }, contentType: "json" as const, delaySeconds })));
    }
  } catch (error) {
    // The rows say deferred with their due time: the cron's requeueLostMessages enqueues them once it has passed.
    logError("warm-up: re-enqueueing held messages failed", { error: String(error), count: ids.length });
  }
}

async function completeWarmups(env: Env, completed: WarmupDomain[]) {
  const transitions = completed.map((domain) => ({ domain, transition: warmupTransition(env.DB, domain, "active", "completed") }));
  await env.DB.batch(
    transitions.flatMap(({ domain, transition }) => [
      transition.event,
      statement(env.DB, sql`UPDATE domains SET warmup_status = 'completed' WHERE id = ${domain.id} AND warmup_status = 'active'`),
    ]),
  );
  await dispatchEventInputs(
    env,
    transitions.map(({ transition }) => transition.input),
  );
}

/** Recipients let through today (for GET /domains/{id}). */
export async function warmupSentToday(d1: D1Database, domainId: string, now = new Date()): Promise<number> {
  const row = await statement(d1, sql`SELECT sent FROM warmup_usage WHERE domain_id = ${domainId} AND day = ${dayWindow(now)}`).first<{
    sent: number;
  }>();
  return row?.sent ?? 0;
}

type WarmupInput = { enabled: boolean; schedule?: number[]; preset?: WarmupPreset; startedAt?: string };

/**
 * Starts, changes or pauses a domain's warm-up. Enabling sets `active` (resuming a paused one keeps its start day
 * unless a new one is given); disabling sets `paused`. A status change emits `warmup.status_changed`.
 */
export async function setWarmup(env: Env, domain: DomainRow, input: WarmupInput, now = new Date()): Promise<DomainRow> {
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
  const transition = status === domain.warmupStatus ? undefined : warmupTransition(env.DB, domain, domain.warmupStatus, status);
  await env.DB.batch([
    ...(transition ? [transition.event] : []),
    statement(
      env.DB,
      sql`UPDATE domains SET warmup_status = ${status}, warmup_schedule = ${JSON.stringify(schedule)}, warmup_started_at = ${startedAt},
        warmup_paused_reason = ${updated.warmupPausedReason}, updated_at = ${sqlNow} WHERE id = ${domain.id}`,
    ),
  ]);
  if (transition) await dispatchEventInputs(env, [transition.input]);
  return updated;
}
