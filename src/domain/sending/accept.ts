import { and, eq, inArray, sql } from "drizzle-orm";
import { statement, type AccountDb, batch, type Ctx } from "../../db/client";
import { messageRecipients, messages, type domains, type suppressions, type templates } from "../../db/schema";
import { findAccount, type Account } from "../accounts/accounts";
import { verifiedDomainQuery } from "../domains/domains";
import { eventStatement, type EventInput } from "../events/events";
import { chargedGuard, chargeStatements, refundStatements, wasApplied } from "../credits/ledger";
import { normalizeSuppressionEmail, scopeBlocks, suppressionsAmongQuery, type MessageStream } from "../suppressions/suppressions";
import { templateContentQuery } from "../templates/templates";
import { dispatchEvents } from "../webhooks/dispatch";
import type { FieldErrors } from "../../errors";
import { inJsonArray } from "../../db/client";
import { isRefusal, type Refusal } from "../refusal";
import { newId } from "../../lib/ids";
import { logError } from "../../lib/log";
import { displayFrom, domainOf } from "./mime";
import { providerOfDomain, recipientDomain } from "../reports/providers";
import { recipientRollupStatements, sendingDomain } from "../reports/rollups";
import { applySendRules } from "./rules";
import { enqueueMessages, type SendRequest } from "./enqueue";
import { checkScheduledAt, scheduledDelay } from "./schedule";
import { contentObjectKey, inlineContentLimit, type MessageContent } from "./content";
import { releaseDailySends, reserveDailySendsAhead, type DailyReservation } from "./daily-limit";
import {
  isIdempotencyRace,
  recordResponseStatement,
  releaseKeyStatement,
  replay,
  replayAfterRace,
  storedResponseStatement,
  type Idempotency,
  type Replayed,
  type StoredResponse,
} from "./idempotency";

export type MessageSource = "api" | "smtp";

export type StoredTemplate = Pick<typeof templates.$inferSelect, "subject" | "html" | "text">;

export type Composed = { subject: string; content: MessageContent };

/** A send request after parsing, whichever door it came through (POST /send or the SMTP relay). */
export type AcceptInput = {
  source: MessageSource;
  /** Transactional (the default of POST /send and the relay) or broadcast: whose suppressions apply (docs/streams.md). */
  stream: MessageStream;
  /** Broadcast mail's subscription topic: its unsubscribe link leaves that topic only. */
  topicId?: string;
  /** Transactional mail that asked for one-click List-Unsubscribe (`unsubscribe: true`); broadcast mail always has it. */
  listUnsubscribe?: boolean;
  from: { name?: string; address: string };
  /** Recipients as given (`address` or `Name <address>`); acceptMessage de-duplicates and caps them (rules.ts). */
  recipients: string[];
  /** `Name <address>` or a bare address (`mailboxText`): the Reply-To header is written from it. */
  replyTo?: string;
  tags: string[];
  metadata: Record<string, string>;
  templateId?: string;
  /** Open pixel and click rewriting at delivery (docs/tracking.md); off when absent. */
  tracking?: { opens: boolean; clicks: boolean };
  /** A scheduled send: stored and charged now, not sent before this time (schedule.ts). */
  scheduledAt?: Date;
  /** Builds subject and content once the template (if any) is loaded with the other reads, or says which fields are wrong. */
  compose(template: StoredTemplate | undefined): Composed | { errors: FieldErrors };
};

export type Sender = { account: Account; testMode: boolean };

export type SendAccepted = {
  id: string;
  recipients: { email: string; status: "queued" | "suppressed" }[];
  credits_charged: number;
  status: "queued" | "scheduled" | "suppressed";
  /** Only on a scheduled send. */
  scheduled_at?: string;
  test_mode: boolean;
};

/** The answer to a batch, as POST /send/batch gives it and its Idempotency-Key replays it: one result per item, in order. */
export type BatchAccepted = { data: SendAccepted[] };

/** Why nothing was accepted. In a batch, field keys start with the item's index (`3.to.0`) and `index` names the item. */
export type AcceptRefusal =
  | { kind: "invalid"; errors: FieldErrors }
  | { kind: "domain_not_verified"; domain: string; index?: number }
  | { kind: "insufficient_credits"; needed: number; available: number }
  /** Stored and charged, but the queue refused it twice: undone (failed, refunded, Idempotency-Key freed). */
  | { kind: "queue_unavailable" }
  // The daily sending limit, or an Idempotency-Key reused with another body or still in progress.
  | Refusal;

export type AcceptOutcome = { kind: "accepted"; body: SendAccepted; replayed: boolean } | AcceptRefusal;
export type BatchOutcome = { kind: "accepted"; body: BatchAccepted; replayed: boolean } | AcceptRefusal;

/** The most messages one POST /send/batch accepts: one queue sendBatch's worth. */
export const batchLimit = 100;

/**
 * The one pipeline every message enters: checks the sending domain, suppressions, idempotency and the daily
 * limit, then charges, stores the message and its recipients and records suppression events in ONE D1 batch
 * (one transaction), and only then enqueues it. A charge that fails leaves nothing behind; a stored message is
 * always charged exactly once.
 */
export async function acceptMessage(ctx: Ctx, sender: Sender, input: AcceptInput, idempotency?: Idempotency): Promise<AcceptOutcome> {
  const outcome = await acceptAll(ctx, sender, [input], idempotency, false);
  if (outcome.kind !== "accepted") return outcome;
  // A single send's Idempotency-Key stores the bare answer (as it did before batches existed).
  return { kind: "accepted", body: outcome.bodies[0]!, replayed: outcome.replayed };
}

/**
 * Up to `batchLimit` messages through the same pipeline, all or none, in the same two D1 round trips as one message
 * (one batch of reads, one transaction of writes) and one queue sendBatch: any invalid item, an unverified domain
 * or a balance short of the whole batch's charge refuses all of them with nothing stored or charged. `inputs` holds 1
 * to `batchLimit` messages: SendBatchRequestSchema refuses any other count before this is called.
 */
export async function acceptMessages(ctx: Ctx, sender: Sender, inputs: AcceptInput[], idempotency?: Idempotency): Promise<BatchOutcome> {
  const outcome = await acceptAll(ctx, sender, inputs, idempotency, true);
  if (outcome.kind !== "accepted") return outcome;
  return { kind: "accepted", body: { data: outcome.bodies }, replayed: outcome.replayed };
}

type Planned = {
  input: AcceptInput;
  id: string;
  subject: string;
  serialized: string;
  inline: boolean;
  tags: string[];
  recipients: { email: string; status: "queued" | "suppressed"; reason: string | undefined; provider: string | null }[];
  charge: number;
  domainId: string;
  accepted: SendAccepted;
};

type Accepted = { kind: "accepted"; bodies: SendAccepted[]; replayed: boolean };

async function acceptAll(
  ctx: Ctx,
  sender: Sender,
  inputs: AcceptInput[],
  idempotency: Idempotency | undefined,
  isBatch: boolean,
): Promise<Accepted | AcceptRefusal> {
  const { env, db } = ctx;
  const { account } = sender;
  const now = new Date();
  // In a batch every field error is keyed by its item's index, so the client knows which one to fix.
  const key = (index: number, field: string) => (isBatch ? `${index}.${field}` : field);
  const errors: FieldErrors = {};
  const checked = inputs.map((input, index) => {
    const rules = applySendRules(input, input.source === "smtp" ? "rcpt_to" : "to");
    if (!rules.ok) for (const [field, messages] of Object.entries(rules.errors)) errors[key(index, field)] = messages;
    return rules.ok ? { recipients: rules.recipients, tags: rules.tags, normalized: rules.recipients.map(normalizeSuppressionEmail) } : undefined;
  });
  if (Object.keys(errors).length > 0) return { kind: "invalid", errors };
  const items = checked.map((item) => item!);

  // The daily limit's Durable Object is asked meanwhile (for every recipient; settled below once suppressions are
  // known). Every way out before then gives it back.
  const daily = reserveDailySendsAhead(env, account, sender.testMode ? 0 : items.reduce((total, item) => total + item.recipients.length, 0));
  const orCancel = async <T>(work: () => T | Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      await daily.cancel();
      throw error;
    }
  };

  // Round trip 1: everything the decision needs, read together. Raw D1 rows, keyed by column name. A batch reads
  // each of its from domains and templates once, and the suppressions of all its recipients in one query.
  const domainNames = [...new Set(inputs.map((input) => domainOf(input.from.address).toLowerCase()))];
  const templateIds = [...new Set(inputs.flatMap((input) => (input.templateId ? [input.templateId] : [])))];
  const results = await orCancel(() =>
    batch(db, [
      statement(db, suppressionsAmongQuery(db, account.id, [...new Set(items.flatMap((item) => item.normalized))])),
      ...(idempotency ? [storedResponseStatement(db, account.id, idempotency)] : []),
      ...domainNames.map((name) => statement(db, verifiedDomainQuery(ctx.shared, account.id, name))),
      ...templateIds.map((id) => statement(db, templateContentQuery(db, account.id, id))),
    ]),
  );
  // Why each suppressed address is on the list for each stream, as its relay.suppressed event says; the widest
  // scope's reason when several entries apply (`all` sorts first).
  const entries = (results[0]?.results ?? []) as Pick<typeof suppressions.$inferSelect, "email" | "reason" | "scope">[];
  const suppressedFor = (stream: MessageStream) =>
    new Map(
      entries
        .filter((row) => scopeBlocks(row.scope, stream))
        .sort((a, b) => a.scope.localeCompare(b.scope))
        .reverse()
        .map((row) => [row.email, row.reason]),
    );
  const suppressedIn = { transactional: suppressedFor("transactional"), broadcast: suppressedFor("broadcast") };
  const previous = idempotency ? (results[1]?.results[0] as StoredResponse | undefined) : undefined;
  const domainsAt = idempotency ? 2 : 1;
  const domainOfName = new Map(
    domainNames.map((name, i) => [name, results[domainsAt + i]?.results[0] as Pick<typeof domains.$inferSelect, "id" | "name"> | undefined]),
  );
  const templateOf = new Map(templateIds.map((id, i) => [id, results[domainsAt + domainNames.length + i]?.results[0] as StoredTemplate | undefined]));

  if (previous && idempotency) {
    await daily.cancel();
    return replayedOutcome(replay<SendAccepted | BatchAccepted>(previous, idempotency));
  }
  const unverified = inputs.findIndex((input) => !domainOfName.get(domainOf(input.from.address).toLowerCase()));
  if (unverified >= 0) {
    await daily.cancel();
    return { kind: "domain_not_verified", domain: domainOf(inputs[unverified]!.from.address), ...(isBatch ? { index: unverified } : {}) };
  }
  const composed = await orCancel(() =>
    inputs.map((input, index) => {
      // After the replay above: a retry of an accepted scheduled send gets its first answer even once the time passed.
      const late = input.scheduledAt && checkScheduledAt(input.scheduledAt, now);
      if (late) errors[key(index, "scheduled_at")] = [late];
      const template = input.templateId ? templateOf.get(input.templateId) : undefined;
      if (input.templateId && !template) {
        errors[key(index, "template_id")] = [`No template ${input.templateId} in this account`];
        return undefined;
      }
      const result = input.compose(template);
      if ("errors" in result) for (const [field, messages] of Object.entries(result.errors)) errors[key(index, field)] = messages;
      return "errors" in result ? undefined : result;
    }),
  );
  if (Object.keys(errors).length > 0) {
    await daily.cancel();
    return { kind: "invalid", errors };
  }

  const planned: Planned[] = inputs.map((input, index) => {
    const { subject, content } = composed[index]!;
    const item = items[index]!;
    const id = newId("msg");
    const suppressed = suppressedIn[input.stream];
    const recipients = item.recipients.map((email, i) => ({
      email,
      status: suppressed.has(item.normalized[i]!) ? ("suppressed" as const) : ("queued" as const),
      reason: suppressed.get(item.normalized[i]!),
      // Only what the domain name tells (no DNS here); delivery looks up the MX of the rest.
      provider: providerOfDomain(recipientDomain(email)) ?? null,
    }));
    const deliverable = recipients.filter((recipient) => recipient.status === "queued").length;
    const charge = sender.testMode ? 0 : deliverable;
    const serialized = JSON.stringify(content);
    return {
      input,
      id,
      subject,
      serialized,
      inline: serialized.length <= inlineContentLimit,
      tags: item.tags,
      recipients,
      charge,
      domainId: domainOfName.get(domainOf(input.from.address).toLowerCase())!.id,
      accepted: {
        id,
        recipients: recipients.map(({ email, status }) => ({ email, status })),
        credits_charged: charge,
        status: deliverable === 0 ? "suppressed" : input.scheduledAt ? "scheduled" : "queued",
        ...(input.scheduledAt && deliverable > 0 ? { scheduled_at: input.scheduledAt.toISOString() } : {}),
        test_mode: sender.testMode,
      },
    };
  });
  const total = planned.reduce((sum, plan) => sum + plan.charge, 0);
  const bodies = planned.map((plan) => plan.accepted);

  // The daily limit is settled before the content is written: a refusal here must find nothing in R2 to clean up.
  const day = await daily.settle(total);
  if (isRefusal(day)) return day;
  const stored = planned.filter((plan) => !plan.inline);
  // A refused or failed acceptance must not leave its content behind in R2.
  const discardContent = () => Promise.all(stored.map((plan) => env.BLOBS.delete(contentObjectKey(plan.id))));
  try {
    await Promise.all(
      stored.map((plan) => env.BLOBS.put(contentObjectKey(plan.id), plan.serialized, { httpMetadata: { contentType: "application/json" } })),
    );
  } catch (error) {
    if (day) await releaseDailySends(env, account, day);
    await discardContent();
    throw error;
  }

  // Round trip 2: the charges and everything they pay for, in one transaction. The first charged message's charge
  // needs the whole batch's total available and every other charge needs that one, so a short balance charges
  // nothing; every row is guarded by that first charge, so then nothing at all is written.
  const anchor = planned.find((plan) => plan.charge > 0);
  const paid = anchor ? chargedGuard("send", anchor.id) : undefined;
  const events: EventInput[] = planned.flatMap((plan) =>
    plan.recipients
      .filter((recipient) => recipient.status === "suppressed")
      .map((recipient) => ({
        accountId: account.id,
        type: "relay.suppressed" as const,
        subjectId: plan.id,
        dedupeKey: `relay.suppressed:${plan.id}:${recipient.email}`,
        data: {
          message_id: plan.id,
          from: displayFrom(plan.input.from.name, plan.input.from.address),
          subject: plan.subject,
          source: plan.input.source,
          stream: plan.input.stream,
          tags: plan.tags,
          metadata: plan.input.metadata,
          recipient: recipient.email,
          reason: recipient.reason,
        },
      })),
  );
  const writes = [
    ...planned.flatMap((plan) =>
      plan.charge > 0 ? messageCharge(db, account.id, plan, plan === anchor ? { available: total } : { when: paid }) : [],
    ),
    ...planned.flatMap((plan) => messageWrites(db, account.id, sender.testMode, plan, paid)),
    ...events.map((event) => eventStatement(db, event, sql`EXISTS (SELECT 1 FROM messages WHERE id = ${event.subjectId})`)),
    ...(idempotency
      ? [
          recordResponseStatement(
            db,
            account.id,
            idempotency,
            { status: 202, body: isBatch ? ({ data: bodies } satisfies BatchAccepted) : bodies[0] },
            { table: messages, id: planned[0]!.id },
          ),
        ]
      : []),
  ];

  let written: D1Result[];
  try {
    written = await batch(db, writes);
  } catch (error) {
    if (day) await releaseDailySends(env, account, day);
    await discardContent();
    if (idempotency && isIdempotencyRace(error)) {
      return replayedOutcome(await replayAfterRace<SendAccepted | BatchAccepted>(db, account.id, idempotency));
    }
    throw error;
  }
  if (anchor && !wasApplied(written[0]!)) {
    if (day) await releaseDailySends(env, account, day);
    await discardContent();
    // The caller's account row may come from the key cache (seconds old): the figure shown is read now.
    const current = (await findAccount(ctx.shared, account.id)) ?? account;
    return { kind: "insufficient_credits", needed: total, available: Math.max(0, current.sendBalance - current.sendReserved) };
  }

  const queued = await enqueueOrUndo(ctx, account, planned, day, idempotency, now);
  if (!queued) return { kind: "queue_unavailable" };
  if (events.length > 0) {
    ctx.waitUntil(
      dispatchEvents(
        ctx,
        account.id,
        events.map((event) => event.dedupeKey),
      ),
    );
  }
  return { kind: "accepted", bodies, replayed: false };
}

/** A stored answer as acceptAll's outcome: a single send stored its bare body, a batch `{ data }`. */
function replayedOutcome(replayed: Replayed<SendAccepted | BatchAccepted> | Refusal): Accepted | Refusal {
  if (isRefusal(replayed)) return replayed;
  return { kind: "accepted", bodies: "data" in replayed.body ? replayed.body.data : [replayed.body], replayed: true };
}

function messageCharge(db: AccountDb, accountId: string, plan: Planned, options: Parameters<typeof chargeStatements>[2]) {
  return chargeStatements(db, { accountId, balance: "send", amount: plan.charge, referenceId: plan.id, note: "send" }, options);
}

/** One message's rows: the message (only if the batch's charge went through), its recipients, tags and report counts. */
function messageWrites(db: AccountDb, accountId: string, testMode: boolean, plan: Planned, paid: ReturnType<typeof chargedGuard> | undefined) {
  const { input, id } = plan;
  const messageStored = sql`EXISTS (SELECT 1 FROM messages WHERE id = ${id})`;
  const status = plan.accepted.status;
  const suppressedEmails = plan.recipients.filter((recipient) => recipient.status === "suppressed").map((recipient) => recipient.email);
  return [
    statement(
      db,
      sql`INSERT INTO messages (id, account_id, source, status, from_address, from_name, domain_id, reply_to, subject, tags, metadata,
          content, content_key, credits_charged, test_mode, track_opens, track_clicks, scheduled_at, stream, topic_id, list_unsubscribe)
        SELECT ${id}, ${accountId}, ${input.source}, ${status}, ${input.from.address}, ${input.from.name ?? null}, ${plan.domainId},
          ${input.replyTo ?? null}, ${plan.subject}, ${JSON.stringify(plan.tags)}, ${JSON.stringify(input.metadata)}, ${plan.inline ? plan.serialized : null},
          ${plan.inline ? null : contentObjectKey(id)}, ${plan.charge}, ${testMode ? 1 : 0},
          ${input.tracking?.opens ? 1 : 0}, ${input.tracking?.clicks ? 1 : 0}, ${plan.accepted.scheduled_at ?? null},
          ${input.stream}, ${input.topicId ?? null}, ${input.listUnsubscribe ? 1 : 0}
        ${paid ? sql`WHERE ${paid}` : sql``}`,
    ),
    statement(
      db,
      sql`INSERT INTO message_recipients (message_id, email, account_id, status, provider)
        SELECT ${id}, value ->> '$.email', ${accountId}, value ->> '$.status', value ->> '$.provider'
        FROM json_each(${JSON.stringify(plan.recipients)}) WHERE ${messageStored}`,
    ),
    // Suppressed recipients count in the reports (a new message: this batch runs once); test mode is never counted.
    ...(testMode
      ? []
      : recipientRollupStatements(
          db,
          { accountId, domain: sendingDomain(input.from.address), campaignId: null, stream: input.stream },
          { suppressed: 1 },
          { messageId: id, emails: suppressedEmails, statuses: ["suppressed"] },
        )),
    ...(plan.tags.length > 0
      ? [
          statement(
            db,
            sql`INSERT INTO message_tags (message_id, account_id, tag)
              SELECT ${id}, ${accountId}, value FROM json_each(${JSON.stringify(plan.tags)}) WHERE ${messageStored}`,
          ),
        ]
      : []),
  ];
}

/**
 * The messages are stored and charged; one that cannot be queued must not stay `queued` with nobody to send it.
 * What is due now, or within the queue's delay limit (a delayed queue message), goes in one sendBatch; a later
 * scheduled send is the cron's (schedule.ts). One retry, then the acceptance is undone (failed, refunded per
 * recipient, idempotency key freed) and the client gets a 429 with Retry-After. The undo only applies while a
 * message is still waiting, so a send that did reach the queue after all is never refunded. Returns false if undone.
 */
async function enqueueOrUndo(
  ctx: Ctx,
  account: Account,
  planned: Planned[],
  day: DailyReservation | undefined,
  idempotency: Idempotency | undefined,
  now: Date,
): Promise<boolean> {
  const { env, db } = ctx;
  const requests: SendRequest[] = planned.flatMap((plan) => {
    if (plan.accepted.status === "suppressed") return [];
    if (!plan.input.scheduledAt) return [{ id: plan.id }];
    const delaySeconds = scheduledDelay(plan.input.scheduledAt, now);
    return delaySeconds === undefined ? [] : [{ id: plan.id, delaySeconds }];
  });
  if (requests.length === 0) return true;
  for (let attempt = 1; ; attempt++) {
    const { refused, error } = await enqueueMessages(env, requests);
    if (refused.length === 0) return true;
    if (attempt === 2) {
      logError("send queue unavailable; undoing the acceptance", { message_ids: refused, error: String(error) });
      break;
    }
  }
  const ids = planned.filter((plan) => plan.accepted.status !== "suppressed").map((plan) => plan.id);
  try {
    const claimed = await db
      .update(messages)
      .set({ status: "failed", smtpResponse: "not queued: queue unavailable" })
      .where(and(inJsonArray(messages.id, ids), inArray(messages.status, ["queued", "scheduled"])))
      .returning({ id: messages.id });
    const undone = new Set(claimed.map((row) => row.id));
    if (undone.size > 0) {
      await batch(db, [
        statement(
          db,
          db
            .update(messageRecipients)
            .set({ status: "failed" })
            .where(and(inJsonArray(messageRecipients.messageId, [...undone]), eq(messageRecipients.status, "queued"))),
        ),
        // The consumer's refund reference per recipient, so the ledger's unique index never lets both apply.
        ...planned
          .filter((plan) => undone.has(plan.id) && plan.charge > 0)
          .flatMap((plan) =>
            plan.recipients
              .filter((recipient) => recipient.status === "queued")
              .flatMap((recipient) =>
                refundStatements(db, {
                  accountId: account.id,
                  balance: "send",
                  amount: 1,
                  referenceId: `${plan.id}:${recipient.email}`,
                  note: "queue unavailable",
                }),
              ),
          ),
        ...(idempotency ? [releaseKeyStatement(db, account.id, idempotency)] : []),
      ]);
      if (day) await releaseDailySends(env, account, day);
    }
  } catch (error) {
    // Stored, charged and not queued: visible in the log with its ids so an operator can requeue or refund them.
    logError("undoing unqueued messages failed; they stay queued", { message_ids: ids, error: String(error) });
  }
  return false;
}
