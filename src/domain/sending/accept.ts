import { sql } from "drizzle-orm";
import { statement, type AccountDb, batch, type Ctx } from "../../db/client";
import { messages } from "../../db/schema";
import type { Account } from "../accounts/accounts";
import { eventStatement, type EventInput } from "../events/events";
import { availableCredits, chargedGuard, chargeStatements, wasApplied } from "../credits/ledger";
import { normalizeSuppressionEmail, type MessageStream } from "../suppressions/suppressions";
import { dispatchEvents } from "../webhooks/dispatch";
import type { FieldErrors } from "../../errors";
import { isRefusal, type Refusal } from "../refusal";
import { newId } from "../../lib/ids";
import { displayFrom, domainOf } from "./mime";
import { providerOfDomain, recipientDomain } from "../reports/providers";
import { recipientRollupStatements, sendingDomain } from "../reports/rollups";
import { applySendRules } from "./rules";
import { checkScheduledAt } from "./schedule";
import { contentObjectKey, inlineContentLimit, type MessageContent } from "./content";
import { releaseDailySends, reserveDailySendsAhead } from "./daily-limit";
import { enqueueOrUndo } from "./accept-enqueue";
import { fromDomain, readForDecision, type Known, type StoredTemplate } from "./accept-reads";
import { isIdempotencyRace, recordResponseStatement, replay, replayAfterRace, type Idempotency, type Replayed } from "./idempotency";

export type MessageSource = "api" | "smtp";

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

/** An input that passed the send rules: its recipients de-duplicated and capped, and their suppression keys. */
type Checked = { recipients: string[]; tags: string[]; normalized: string[] };

/** A field error's key: in a batch prefixed with its item's index (`3.to.0`), so the client knows which one to fix. */
type FieldKey = (index: number, field: string) => string;

/**
 * The pipeline as its steps: check the inputs, read what the decision needs (round trip 1, accept-reads.ts), answer
 * from the reads (a replay, an unverified domain), compose and plan each message, settle the daily limit, store large
 * content, write everything in one transaction (round trip 2), enqueue or undo (accept-enqueue.ts), and hand the
 * suppression events to the webhooks. A step that refuses leaves nothing behind: the daily reservation is given back
 * and content removed from R2.
 */
async function acceptAll(
  ctx: Ctx,
  sender: Sender,
  inputs: AcceptInput[],
  idempotency: Idempotency | undefined,
  isBatch: boolean,
): Promise<Accepted | AcceptRefusal> {
  const { env } = ctx;
  const { account } = sender;
  const now = new Date();
  const key: FieldKey = (index, field) => (isBatch ? `${index}.${field}` : field);

  const items = checkInputs(inputs, key);
  if ("kind" in items) return items;

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

  const known = await orCancel(() =>
    readForDecision(ctx, account.id, {
      fromAddresses: inputs.map((input) => input.from.address),
      templateIds: inputs.flatMap((input) => (input.templateId ? [input.templateId] : [])),
      recipients: items.flatMap((item) => item.normalized),
      idempotency,
    }),
  );
  const answered = await orCancel(() => answerFromReads(known, inputs, idempotency, isBatch));
  if (answered) {
    await daily.cancel();
    return answered;
  }
  const composed = await orCancel(() => composeAll(inputs, known, key, now));
  if ("kind" in composed) {
    await daily.cancel();
    return composed;
  }

  const planned = inputs.map((input, index) => planMessage(sender, input, items[index]!, composed[index]!, known));
  const total = planned.reduce((sum, plan) => sum + plan.charge, 0);

  // The daily limit is settled before the content is written: a refusal here must find nothing in R2 to clean up.
  const day = await daily.settle(total);
  if (isRefusal(day)) return day;
  const stored = planned.filter((plan) => !plan.inline);
  // From here a refused or failed acceptance gives its share of the daily limit back and leaves no content in R2.
  const giveBack = async () => {
    if (day) await releaseDailySends(env, account, day);
    await Promise.all(stored.map((plan) => env.BLOBS.delete(contentObjectKey(plan.id))));
  };
  await storeContent(env, stored, giveBack);

  const events = suppressionEvents(account.id, planned);
  const unwritten = await writeAcceptance(ctx, sender, { planned, total, events, idempotency, isBatch }, giveBack);
  if (unwritten) return unwritten;

  const queued = await enqueueOrUndo(ctx, account, planned, day, idempotency, now);
  if (!queued) return { kind: "queue_unavailable" };
  if (events.length > 0) {
    // After the answer: a webhook endpoint's speed must not hold up the send.
    ctx.waitUntil(
      dispatchEvents(
        ctx,
        account.id,
        events.map((event) => event.dedupeKey),
      ),
    );
  }
  return { kind: "accepted", bodies: planned.map((plan) => plan.accepted), replayed: false };
}

/** Before any I/O: the send rules (recipients, tags) for every input; any error refuses them all. */
function checkInputs(inputs: AcceptInput[], key: FieldKey): Checked[] | { kind: "invalid"; errors: FieldErrors } {
  const errors: FieldErrors = {};
  const checked = inputs.map((input, index) => {
    const rules = applySendRules(input, input.source === "smtp" ? "rcpt_to" : "to");
    if (!rules.ok) for (const [field, messages] of Object.entries(rules.errors)) errors[key(index, field)] = messages;
    return rules.ok ? { recipients: rules.recipients, tags: rules.tags, normalized: rules.recipients.map(normalizeSuppressionEmail) } : undefined;
  });
  if (Object.keys(errors).length > 0) return { kind: "invalid", errors };
  return checked.map((item) => item!);
}

/**
 * The answers the reads give at once: the stored answer of a reused Idempotency-Key (before anything else,
 * so a retry gets its first answer), else a from domain that is not a verified domain of the account.
 */
function answerFromReads(
  known: Known,
  inputs: AcceptInput[],
  idempotency: Idempotency | undefined,
  isBatch: boolean,
): Accepted | AcceptRefusal | undefined {
  if (known.previous && idempotency) return replayedOutcome(replay<SendAccepted | BatchAccepted>(known.previous, idempotency));
  const unverified = inputs.findIndex((input) => !known.domainOfName.get(fromDomain(input.from.address)));
  if (unverified < 0) return undefined;
  return { kind: "domain_not_verified", domain: domainOf(inputs[unverified]!.from.address), ...(isBatch ? { index: unverified } : {}) };
}

/** Each message's subject and content, built from its template when it names one, or every field error. */
function composeAll(inputs: AcceptInput[], known: Known, key: FieldKey, now: Date): Composed[] | { kind: "invalid"; errors: FieldErrors } {
  const errors: FieldErrors = {};
  const composed = inputs.map((input, index) => {
    // After the replay: a retry of an accepted scheduled send gets its first answer even once the time passed.
    const late = input.scheduledAt && checkScheduledAt(input.scheduledAt, now);
    if (late) errors[key(index, "scheduled_at")] = [late];
    const template = input.templateId ? known.templateOf.get(input.templateId) : undefined;
    if (input.templateId && !template) {
      errors[key(index, "template_id")] = [`No template ${input.templateId} in this account`];
      return undefined;
    }
    const result = input.compose(template);
    if ("errors" in result) for (const [field, messages] of Object.entries(result.errors)) errors[key(index, field)] = messages;
    return "errors" in result ? undefined : result;
  });
  if (Object.keys(errors).length > 0) return { kind: "invalid", errors };
  return composed.map((message) => message!);
}

/** One message as it will be stored and answered: its id, which recipients are suppressed, what it costs. */
function planMessage(sender: Sender, input: AcceptInput, item: Checked, { subject, content }: Composed, known: Known): Planned {
  const id = newId("msg");
  const suppressed = known.suppressedIn[input.stream];
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
    domainId: known.domainOfName.get(fromDomain(input.from.address))!.id,
    accepted: {
      id,
      recipients: recipients.map(({ email, status }) => ({ email, status })),
      credits_charged: charge,
      status: deliverable === 0 ? "suppressed" : input.scheduledAt ? "scheduled" : "queued",
      ...(input.scheduledAt && deliverable > 0 ? { scheduled_at: input.scheduledAt.toISOString() } : {}),
      test_mode: sender.testMode,
    },
  };
}

/** A `relay.suppressed` event per suppressed recipient, written with the message (only if it is stored). */
function suppressionEvents(accountId: string, planned: Planned[]): EventInput[] {
  return planned.flatMap((plan) =>
    plan.recipients
      .filter((recipient) => recipient.status === "suppressed")
      .map((recipient) => ({
        accountId,
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
}

/** Content too large for the message row goes to R2 first: the row written next names its object. */
async function storeContent(env: Env, stored: Planned[], giveBack: () => Promise<void>): Promise<void> {
  try {
    await Promise.all(
      stored.map((plan) => env.BLOBS.put(contentObjectKey(plan.id), plan.serialized, { httpMetadata: { contentType: "application/json" } })),
    );
  } catch (error) {
    await giveBack();
    throw error;
  }
}

type Acceptance = {
  planned: Planned[];
  /** What the messages cost together. */
  total: number;
  events: EventInput[];
  idempotency: Idempotency | undefined;
  isBatch: boolean;
};

/**
 * Round trip 2: the charges and everything they pay for, as one transaction. Undefined when all was written; else
 * the refusal (a balance short of `total`), or the answer of the request that won a race for the Idempotency-Key.
 */
async function writeAcceptance(
  ctx: Ctx,
  sender: Sender,
  acceptance: Acceptance,
  giveBack: () => Promise<void>,
): Promise<Accepted | AcceptRefusal | undefined> {
  const { db } = ctx;
  const { account } = sender;
  const { statements, anchor } = acceptanceWrites(db, sender, acceptance);
  let written: D1Result[];
  try {
    written = await batch(db, statements);
  } catch (error) {
    await giveBack();
    if (acceptance.idempotency && isIdempotencyRace(error)) {
      return replayedOutcome(await replayAfterRace<SendAccepted | BatchAccepted>(db, account.id, acceptance.idempotency));
    }
    throw error;
  }
  if (!anchor || wasApplied(written[0]!)) return undefined;
  await giveBack();
  return { kind: "insufficient_credits", needed: acceptance.total, available: Math.max(0, await availableCredits(db, account.id, "send")) };
}

/**
 * Round trip 2's statements. The first charged message's charge (`anchor`) needs the whole batch's total available
 * and every other charge needs that one, so a short balance charges nothing; every row is guarded by that first
 * charge, so then nothing at all is written.
 */
function acceptanceWrites(
  db: AccountDb,
  sender: Sender,
  { planned, total, events, idempotency, isBatch }: Acceptance,
): { statements: D1PreparedStatement[]; anchor: Planned | undefined } {
  const accountId = sender.account.id;
  const anchor = planned.find((plan) => plan.charge > 0);
  const paid = anchor ? chargedGuard("send", anchor.id) : undefined;
  const bodies = planned.map((plan) => plan.accepted);
  const statements = [
    ...planned.flatMap((plan) =>
      plan.charge > 0 ? messageCharge(db, accountId, plan, plan === anchor ? { available: total } : { when: paid }) : [],
    ),
    ...planned.flatMap((plan) => messageWrites(db, accountId, sender.testMode, plan, paid)),
    ...events.map((event) => eventStatement(db, event, sql`EXISTS (SELECT 1 FROM messages WHERE id = ${event.subjectId})`)),
    ...(idempotency
      ? [
          recordResponseStatement(
            db,
            accountId,
            idempotency,
            { status: 202, body: isBatch ? ({ data: bodies } satisfies BatchAccepted) : bodies[0] },
            { table: messages, id: planned[0]!.id },
          ),
        ]
      : []),
  ];
  return { statements, anchor };
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
