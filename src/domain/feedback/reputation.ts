// The reputation guard and warm-up pauses. Gmail and Yahoo ask bulk senders to keep spam complaints under 0.3% and
// treat bounce rates over a few percent as list abuse; a domain past either rate today (UTC, from the report rollups,
// once it has sent REPUTATION_MIN_SENT recipients) is `held`: new campaign sends from it are refused until an operator
// clears it (POST /admin/v1/domains/{id}/reputation/clear). Its active warm-up, if any, is paused the same way.

import { sql } from "drizzle-orm";
import { config } from "../../config";
import { inJsonArray, sqlNow, sqlToday, statement, type AccountDb, type Ctx, type SharedDb, batch } from "../../db/client";
import { dispatchEventInputs } from "../webhooks/dispatch";
import { warmupTransition } from "./warmup";

export const BOUNCE_RATE_LIMIT = 0.05;
export const COMPLAINT_RATE_LIMIT = 0.003;

export type DomainRates = { sent: number; hardBounces: number; complaints: number; bounceRate: number; complaintRate: number };

type RatesRow = {
  id: string;
  account_id: string;
  name: string;
  warmup_status: string;
  reputation_status: string;
  sent: number;
  bounces: number;
  complaints: number;
};

const rate = (part: number, whole: number) => (whole > 0 ? part / whole : 0);

/** Today's sent, hard bounces and complaints of each domain, from the rollups. */
function ratesQuery(domainIds: readonly string[] | undefined) {
  return sql`SELECT d.id, d.account_id, d.name, d.warmup_status, d.reputation_status,
      COALESCE(SUM(s.sent), 0) AS sent, COALESCE(SUM(s.hard_bounces), 0) AS bounces, COALESCE(SUM(s.complaints), 0) AS complaints
    FROM domains d JOIN daily_stats s ON s.account_id = d.account_id AND s.domain = d.name AND s.day = ${sqlToday}
    WHERE ${domainIds ? inJsonArray(sql`d.id`, domainIds) : sql`1`}
    GROUP BY d.id`;
}

/**
 * Today's rates of one domain (zeros when it sent nothing today), from its account's rollups: the domain's row is in
 * the directory (`DB`), its rollups in the account's database, so this reads the rollups alone.
 */
export async function domainRates(db: AccountDb, domain: { accountId: string; name: string }): Promise<DomainRates> {
  const row = await statement(
    db,
    sql`SELECT COALESCE(SUM(sent), 0) AS sent, COALESCE(SUM(hard_bounces), 0) AS bounces, COALESCE(SUM(complaints), 0) AS complaints
      FROM daily_stats WHERE account_id = ${domain.accountId} AND domain = ${domain.name} AND day = ${sqlToday}`,
  ).first<Pick<RatesRow, "sent" | "bounces" | "complaints">>();
  const sent = row?.sent ?? 0;
  const hardBounces = row?.bounces ?? 0;
  const complaints = row?.complaints ?? 0;
  return { sent, hardBounces, complaints, bounceRate: rate(hardBounces, sent), complaintRate: rate(complaints, sent) };
}

/**
 * Holds (and pauses the warm-up of) every domain among `domainIds` (all domains that sent today when omitted) whose
 * rates crossed a limit. Each change is a conditional UPDATE, so running twice holds or pauses once.
 */
export async function evaluateReputation(ctx: Ctx, domainIds?: readonly string[]): Promise<void> {
  const { env, db } = ctx;
  if (domainIds && domainIds.length === 0) return;
  const { results } = await statement(db, ratesQuery(domainIds)).all<RatesRow>();
  const minSent = config(env).reputationMinSent;
  const over = results.flatMap((row) => {
    if (row.sent < minSent) return [];
    const bounceRate = rate(row.bounces, row.sent);
    const complaintRate = rate(row.complaints, row.sent);
    const reasons = [
      ...(complaintRate > COMPLAINT_RATE_LIMIT ? [`complaint rate ${percent(complaintRate)} is over ${percent(COMPLAINT_RATE_LIMIT)}`] : []),
      ...(bounceRate > BOUNCE_RATE_LIMIT ? [`bounce rate ${percent(bounceRate)} is over ${percent(BOUNCE_RATE_LIMIT)}`] : []),
    ];
    return reasons.length > 0 ? [{ row, reason: `Today's ${reasons.join(" and ")} (${row.sent} sent)` }] : [];
  });
  if (over.length === 0) return;
  const pauses = over.map(({ row, reason }) => ({
    row,
    reason,
    // The pause's event joins the hold and the pause in one batch: no crash in between can lose it.
    transition: warmupTransition(db, { id: row.id, accountId: row.account_id, name: row.name }, "active", "paused", reason),
  }));
  await batch(
    db,
    pauses.flatMap(({ row, reason, transition }) => [
      statement(
        db,
        sql`UPDATE domains SET reputation_status = 'held', reputation_reason = ${reason}, reputation_held_at = ${sqlNow}
          WHERE id = ${row.id} AND reputation_status = 'ok'`,
      ),
      transition.event,
      statement(
        db,
        sql`UPDATE domains SET warmup_status = 'paused', warmup_paused_reason = ${reason} WHERE id = ${row.id} AND warmup_status = 'active'`,
      ),
    ]),
  );
  await dispatchEventInputs(
    ctx,
    pauses.map(({ transition }) => transition.input),
  );
}

const percent = (value: number) => `${(value * 100).toFixed(value < 0.01 ? 2 : 1)}%`;

/** Clears a held domain (an operator's decision; domains are in the directory, `DB`); false when it was not held. */
export async function clearReputationHold(db: SharedDb, domainId: string): Promise<boolean> {
  const result = await statement(
    db,
    sql`UPDATE domains SET reputation_status = 'ok', reputation_reason = NULL, reputation_held_at = NULL WHERE id = ${domainId} AND reputation_status = 'held'`,
  ).run();
  return result.meta.changes > 0;
}
