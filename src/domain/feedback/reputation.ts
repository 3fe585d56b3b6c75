// The reputation guard and warm-up pauses. Gmail and Yahoo ask bulk senders to keep spam complaints under 0.3% and
// treat bounce rates over a few percent as list abuse; a domain past either rate today (UTC, from the report rollups,
// once it has sent REPUTATION_MIN_SENT recipients) is `held`: new campaign sends from it are refused until an operator
// clears it (POST /admin/v1/domains/{id}/reputation/clear). Its active warm-up, if any, is paused the same way.
//
// The rollups are in the account's database, `domains` in `DB`: the rates are read in the one, the holds and pauses
// written in the other, and the pauses' events back in the account's (see applyWarmupChanges).

import { and, eq, sql } from "drizzle-orm";
import { config } from "../../config";
import { sqlNow, sqlToday, statement, type AccountDb, type Ctx, type SharedDb } from "../../db/client";
import { domains } from "../../db/schema";
import { forgetCachedDomain, sendingDomainsByIds } from "../domains/lookup";
import { applyWarmupChanges } from "./warmup";

type RatedDomain = Pick<typeof domains.$inferSelect, "id" | "accountId" | "name">;

export const BOUNCE_RATE_LIMIT = 0.05;
export const COMPLAINT_RATE_LIMIT = 0.003;

export type DomainRates = { sent: number; hardBounces: number; complaints: number; bounceRate: number; complaintRate: number };

type RatesRow = { account_id: string; domain: string; sent: number; bounces: number; complaints: number };

const rate = (part: number, whole: number) => (whole > 0 ? part / whole : 0);
const pairKey = (accountId: string, name: string) => `${accountId}\n${name}`;

/** Domains whose rates one cron run (per account database) looks at; the rest wait for the next run. */
const SWEEP_DOMAINS_MAX = 500;

const totals = sql`COALESCE(SUM(s.sent), 0) AS sent, COALESCE(SUM(s.hard_bounces), 0) AS bounces, COALESCE(SUM(s.complaints), 0) AS complaints`;

/** Today's sent, hard bounces and complaints of each of these domains (by account and name) that sent today. */
async function ratesOf(db: AccountDb, pairs: readonly { accountId: string; name: string }[]): Promise<RatesRow[]> {
  if (pairs.length === 0) return [];
  const wanted = JSON.stringify(pairs.map(({ accountId, name }) => ({ a: accountId, d: name })));
  const { results } = await statement(
    db,
    sql`SELECT s.account_id, s.domain, ${totals}
      FROM json_each(${wanted}) AS w JOIN daily_stats s ON s.account_id = w.value ->> '$.a' AND s.domain = w.value ->> '$.d' AND s.day = ${sqlToday}
      GROUP BY s.account_id, s.domain`,
  ).all<RatesRow>();
  return results;
}

/** Today's rates of one domain of the account (zeros when it sent nothing today). */
export async function domainRates(db: AccountDb, domain: { accountId: string; name: string }): Promise<DomainRates> {
  const [row] = await ratesOf(db, [domain]);
  const sent = row?.sent ?? 0;
  const hardBounces = row?.bounces ?? 0;
  const complaints = row?.complaints ?? 0;
  return { sent, hardBounces, complaints, bounceRate: rate(hardBounces, sent), complaintRate: rate(complaints, sent) };
}

const domainColumns = { id: domains.id, accountId: domains.accountId, name: domains.name };

/**
 * Holds (and pauses the warm-up of) every domain among `domainIds` whose rates crossed a limit, or, without ids (the
 * cron, once per account database), every domain of `ctx.db`'s accounts that did today. Each change is a conditional
 * UPDATE, so running twice holds or pauses once.
 */
export async function evaluateReputation(ctx: Ctx, domainIds?: readonly string[]): Promise<void> {
  const { env, db, shared } = ctx;
  if (domainIds && domainIds.length === 0) return;
  const minSent = config(env).reputationMinSent;
  let found: RatedDomain[];
  let rates: RatesRow[];
  if (domainIds) {
    // Feedback batches call this with their domains: from the isolate's cache, not a read of `DB` per batch.
    found = [...(await sendingDomainsByIds(shared, domainIds)).values()];
    rates = await ratesOf(db, found);
  } else {
    // Only the domains over a limit today matter: the account database finds them, the directory names them.
    rates = (
      await statement(
        db,
        sql`SELECT s.account_id, s.domain, ${totals} FROM daily_stats s WHERE s.day = ${sqlToday}
          GROUP BY s.account_id, s.domain
          HAVING sent >= ${minSent} AND (bounces > sent * ${BOUNCE_RATE_LIMIT} OR complaints > sent * ${COMPLAINT_RATE_LIMIT})
          LIMIT ${SWEEP_DOMAINS_MAX}`,
      ).all<RatesRow>()
    ).results;
    found = await domainsByName(shared, rates);
  }
  const byName = new Map(found.map((domain) => [pairKey(domain.accountId, domain.name), domain]));
  const over = rates.flatMap((row) => {
    const domain = byName.get(pairKey(row.account_id, row.domain));
    if (!domain || row.sent < minSent) return [];
    const bounceRate = rate(row.bounces, row.sent);
    const complaintRate = rate(row.complaints, row.sent);
    const reasons = [
      ...(complaintRate > COMPLAINT_RATE_LIMIT ? [`complaint rate ${percent(complaintRate)} is over ${percent(COMPLAINT_RATE_LIMIT)}`] : []),
      ...(bounceRate > BOUNCE_RATE_LIMIT ? [`bounce rate ${percent(bounceRate)} is over ${percent(BOUNCE_RATE_LIMIT)}`] : []),
    ];
    return reasons.length > 0 ? [{ domain, reason: `Today's ${reasons.join(" and ")} (${row.sent} sent)` }] : [];
  });
  if (over.length === 0) return;
  await applyWarmupChanges(
    ctx,
    over.map(({ domain, reason }) => ({
      domain,
      previous: "active",
      status: "paused",
      reason,
      // The hold goes with the pause: applied together, taken back together if the pause's event cannot be stored.
      alongside: [
        {
          apply: sql`UPDATE domains SET reputation_status = 'held', reputation_reason = ${reason}, reputation_held_at = ${sqlNow}
            WHERE id = ${domain.id} AND reputation_status = 'ok' RETURNING id`,
          undo: sql`UPDATE domains SET reputation_status = 'ok', reputation_reason = NULL, reputation_held_at = NULL
            WHERE id = ${domain.id} AND reputation_status = 'held' AND reputation_reason = ${reason}`,
        },
      ],
      apply: sql`UPDATE domains SET warmup_status = 'paused', warmup_paused_reason = ${reason} WHERE id = ${domain.id} AND warmup_status = 'active' RETURNING id`,
      undo: sql`UPDATE domains SET warmup_status = 'active', warmup_paused_reason = NULL
        WHERE id = ${domain.id} AND warmup_status = 'paused' AND warmup_paused_reason = ${reason}`,
    })),
  );
}

/** The directory's domains named by these rollup rows (account and domain name). */
async function domainsByName(shared: SharedDb, rows: readonly RatesRow[]): Promise<RatedDomain[]> {
  if (rows.length === 0) return [];
  const wanted = JSON.stringify(rows.map((row) => ({ a: row.account_id, d: row.domain })));
  return shared
    .select(domainColumns)
    .from(domains)
    .innerJoin(sql`json_each(${wanted}) AS w`, sql`${domains.accountId} = w.value ->> '$.a' AND ${domains.name} = w.value ->> '$.d'`)
    .all();
}

const percent = (value: number) => `${(value * 100).toFixed(value < 0.01 ? 2 : 1)}%`;

/** Clears a held domain (an operator's decision); false when it was not held. */
export async function clearReputationHold(shared: SharedDb, domainId: string): Promise<boolean> {
  const cleared = await shared
    .update(domains)
    .set({ reputationStatus: "ok", reputationReason: null, reputationHeldAt: null })
    .where(and(eq(domains.id, domainId), eq(domains.reputationStatus, "held")))
    .returning({ id: domains.id });
  forgetCachedDomain(domainId);
  return cleared.length > 0;
}
