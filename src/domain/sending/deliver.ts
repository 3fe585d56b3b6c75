// Delivery of accepted messages: claim, build, sign, hand to the transport, record the outcome. The send queue's
// consumer only parses queue messages and tells the queue what to do with each.

import { and, eq, inArray, isNotNull, lte, or, sql } from "drizzle-orm";
import { config } from "../../config";
import { messageRecipients, messages } from "../../db/schema";
import { sendingDomainsByIds } from "../domains/lookup";
import { logError } from "../../lib/log";
import { smtpTransportFromConfig } from "../transport/smtp";
import { CloudflareEmailTransport } from "../transport/cloudflare";
import { envelopesOf } from "../feedback/return-path";
import { holdPastWarmupCaps } from "../feedback/warmup";
import { sendCopies } from "../transport/copies";
import type { Envelope, SendFailure, Transport } from "../transport/types";
import { dispatchEventInputs } from "../webhooks/dispatch";
import { loadContent, rawObjectKey } from "./content";
import { enqueueMessages } from "./enqueue";
import { scheduledDelay } from "./schedule";
import { MimeError } from "./mime";
import { recordOutcome, recordSkipped, simulate, type Disposition, type MessageRow } from "./outcome";
import { campaignRecipientReads, campaignRecipientsOf, type CampaignRecipient } from "../campaigns/delivery";
import { notifyCampaigns } from "../campaigns/fanout";
import { buildSignedMessage, loadSigningKeys, type SigningDomain, type SigningKeys } from "./signed-message";
import { inJsonArray, sqlNow, type AccountDb, type Ctx, batch } from "../../db/client";
import { tagOf } from "../../db/hints";
import { recipientDomain, resolveProviders } from "../reports/providers";

const pending = ["queued", "deferred"] as const;

/** Per message id, what the queue should do: nothing (acknowledge) or retry after the delay. */
export type DeliveryResult = Map<string, { retryDelaySeconds: number }>;

export type DeliveryOptions = {
  /** Opens one connection to the provider; by default the transport TRANSPORT names. */
  openTransport?: () => Transport;
  /**
   * Takes the work that follows a recorded outcome (webhook dispatch, campaign progress) off the batch's path, so the
   * queue hands over the next batch sooner. Both have their own sweeps if that work is lost. Without it, delivery
   * awaits that work before returning.
   */
  waitUntil?: (promise: Promise<unknown>) => void;
};

/**
 * Claims the messages among `ids` that still have recipients to deliver (queued/deferred, or scheduled and due →
 * sending). One conditional UPDATE: of two consumers holding copies of one queue message, only one gets the row back,
 * and a cancel (schedule.ts) that got there first leaves nothing to claim.
 */
function claim(db: AccountDb, ids: string[]) {
  return db
    .update(messages)
    .set({ status: "sending", claimedAt: sqlNow, updatedAt: sqlNow })
    .where(
      and(
        inJsonArray(messages.id, ids),
        or(
          inArray(messages.status, pending),
          and(eq(messages.status, "scheduled"), isNotNull(messages.scheduledAt), lte(messages.scheduledAt, sqlNow)),
        ),
        sql`EXISTS (SELECT 1 FROM ${messageRecipients} WHERE ${messageRecipients.messageId} = ${messages.id} AND ${inArray(messageRecipients.status, pending)})`,
      ),
    )
    .returning();
}

/**
 * Delivers the given messages over a few reused connections (RSET between messages). Round trip 1 claims every
 * message that still has recipients to deliver (queued/deferred → sending) and reads what sending needs. The claim
 * is one conditional UPDATE, so of two consumers holding copies of one queue message (queues deliver at least once)
 * only one gets the row back, and a redelivery after the outcome is recorded finds nothing to claim. A claim that
 * fails sends nothing and throws, so the batch is retried. Outcomes are written at the end, or sooner when a message
 * holds the batch up (outcomeWriter).
 */
export async function deliverMessages(ctx: Ctx, ids: string[], options: DeliveryOptions = {}): Promise<DeliveryResult> {
  const { env } = ctx;
  const openTransport = options.openTransport ?? (() => transportFromConfig(env));
  // A few connections share the batch (as a pooled SMTP client does), each reused with RSET between messages. They
  // are set up while the batch is claimed: a smarthost's TCP, TLS, EHLO and AUTH take as long as the claim or
  // longer, and a consumer pays them per batch (sockets do not outlive the invocation). A transport that cannot be
  // built (configuration) throws here, before anything is claimed, so the queue retries the batch.
  const transports = Array.from({ length: Math.min(config(env).send.connectionsPerBatch, ids.length) }, () => openTransport());
  for (const transport of transports) transport.warm();
  try {
    return await deliverClaimed(ctx, ids, transports, options.waitUntil);
  } finally {
    // Lanes close their own; this is for a failure on the way (closing twice is harmless).
    await Promise.all(transports.map((transport) => transport.close()));
  }
}

async function deliverClaimed(ctx: Ctx, ids: string[], transports: Transport[], waitUntil: DeliveryOptions["waitUntil"]): Promise<DeliveryResult> {
  const { env, db } = ctx;
  const [claimed, notDue, recipientRows, campaignRows, campaignContacts] = await db.batch([
    claim(db, ids),
    // Scheduled sends left unclaimed: their time was moved later since this queue message was sent.
    db
      .select({ id: messages.id, scheduledAt: messages.scheduledAt })
      .from(messages)
      .where(and(inJsonArray(messages.id, ids), eq(messages.status, "scheduled"), isNotNull(messages.scheduledAt))),
    db
      .select({ messageId: messageRecipients.messageId, email: messageRecipients.email, provider: messageRecipients.provider })
      .from(messageRecipients)
      .where(and(inJsonArray(messageRecipients.messageId, ids), inArray(messageRecipients.status, pending))),
    ...campaignRecipientReads(db, ids),
  ]);
  const campaignRecipients = campaignRecipientsOf(claimed, [campaignRows, campaignContacts]);
  // The copy for the old time of a moved send gets a fresh queue message for the rest of the wait (a retry would count
  // against max_retries); past the queue's delay limit it is the cron's.
  const now = new Date();
  const putBack = notDue.flatMap((row) => {
    const delaySeconds = scheduledDelay(new Date(row.scheduledAt!), now);
    return delaySeconds === undefined ? [] : [{ id: row.id, delaySeconds: Math.max(1, delaySeconds) }];
  });
  const requeued = putBack.length > 0 ? enqueueMessages(ctx, putBack) : undefined;

  const recipientsOf = new Map<string, string[]>();
  for (const row of recipientRows) recipientsOf.set(row.messageId, [...(recipientsOf.get(row.messageId) ?? []), row.email]);
  // The signing domains are in `DB`: one more round trip, unless this isolate read them lately (domains/lookup.ts).
  const domainsById = await sendingDomainsByIds(
    ctx.shared,
    claimed.map((message) => message.domainId),
  );
  // The reports' mailbox providers of the recipients not classified yet (test mode is not counted), looked up while
  // the batch is being sent: only recording an outcome waits for them.
  const counted = new Set(claimed.filter((message) => !message.testMode).map((message) => message.id));
  const providersLookup = resolveProviders(
    ctx,
    recipientRows.filter((row) => row.provider === null && counted.has(row.messageId)).map((row) => recipientDomain(row.email)),
  );
  // Keys are decrypted and imported once per domain per batch.
  const keys = new Map<string, Promise<SigningKeys>>();
  const signingKeys = (domain: SigningDomain) => {
    let key = keys.get(domain.id);
    if (!key) {
      key = loadSigningKeys(env, domain);
      keys.set(domain.id, key);
    }
    return key;
  };

  const outcomes = outcomeWriter(ctx);
  const deliverable: { message: MessageRow; recipients: string[]; campaignRecipient?: CampaignRecipient }[] = [];
  for (const message of claimed) {
    const recipients = recipientsOf.get(message.id) ?? [];
    const campaignRecipient = campaignRecipients.get(message.id);
    if (campaignRecipient && "skip" in campaignRecipient) {
      const providers = campaignRecipient.skip === "suppressed" ? await providersLookup : undefined;
      outcomes.add(message.id, recordSkipped(ctx, message, recipients, campaignRecipient.skip, campaignRecipient.reason, providers));
    } else if (message.testMode) outcomes.add(message.id, simulate(ctx, message, recipients));
    else deliverable.push({ message, recipients, campaignRecipient });
  }

  // Past a warm-up cap, messages wait for tomorrow instead of going out now (their queue messages are replaced).
  const held = await holdPastWarmupCaps(
    ctx,
    deliverable.map(({ message, recipients }) => ({
      id: message.id,
      domainId: message.domainId,
      recipients: recipients.length,
      nextAttemptAt: message.nextAttemptAt,
    })),
    domainsById,
  );
  const sending = deliverable.filter(({ message }) => !held.has(message.id));

  // Messages are rendered and signed ahead of the lanes, in order, while less than PREPARED_AHEAD_BYTES of them wait:
  // the first ones while the connections are being set up, the rest while earlier ones are on the wire. Each connection
  // takes the next message as it finishes one (a slow connection holds back only its own share) and hands it over
  // before the previous one's outcome is known, so the transport can pipeline it behind the previous final dot.
  // Links and return paths name the database the batch's messages are in, so clicks and bounces find them at once.
  const tag = tagOf(ctx.db);
  const ahead = prepareAhead(sending, (work) =>
    prepareOne(env, tag, work.message, work.recipients, domainsById.get(work.message.domainId), signingKeys, work.campaignRecipient),
  );
  // The bytes of each attempt are being stored in R2 (for /raw) while it is sent. Neither its record nor the lane's next
  // message waits for the store: with R2's latency (tens of ms a put) that held a lane to one message per put. The
  // record names the key the bytes go to; a store that fails is logged and leaves /raw answering as for a message not
  // built yet. The prepared bytes count against PREPARED_AHEAD_BYTES until stored.
  const stores: Promise<unknown>[] = [];
  await Promise.all([
    ...transports.slice(0, sending.length).map(async (transport) => {
      let previous: Promise<void> | undefined;
      for (let next = ahead.take(); next; next = ahead.take()) {
        const { item: work, ready: prepared } = next;
        const ready = await prepared;
        const outcome = "envelopes" in ready ? sendCopies(transport, ready.envelopes, ready.raw) : Promise.resolve(ready);
        await previous;
        previous = outcome.then(async (result) => {
          if ("envelopes" in ready) stores.push(ready.stored.finally(() => ahead.release(ready)));
          else ahead.release(ready);
          // The record shows what this attempt handed over: the subject as rendered for its recipient, and where its
          // bytes are kept (a refused attempt's too, so /raw shows what the provider refused).
          const sent = "envelopes" in ready ? { ...work.message, subject: ready.subject, rawKey: ready.rawKey } : work.message;
          outcomes.add(work.message.id, recordOutcome(ctx, sent, work.recipients, result, false, await providersLookup));
        });
      }
      await previous;
      await transport.close();
    }),
    ...transports.slice(sending.length).map((idle) => idle.close()),
  ]);

  // A message whose outcome could not be written is acknowledged all the same: its row says `sending`, so a retry
  // would send nothing, and the cron turns the stale claim into `unknown` (see sweepStaleClaims).
  const recorded = await outcomes.close();
  const after = Promise.all([
    ...stores,
    dispatchEventInputs(
      ctx,
      [...recorded.values()].flatMap((disposition) => disposition.events),
    ),
    notifyCampaigns(
      env,
      claimed.filter((message) => recorded.has(message.id)),
    ),
  ]);
  if (waitUntil) waitUntil(after);
  else await after;
  const result: DeliveryResult = new Map();
  for (const [id, disposition] of recorded) {
    if (disposition.retryDelaySeconds !== undefined) result.set(id, { retryDelaySeconds: disposition.retryDelaySeconds });
  }
  // Refused by the queue: this queue message waits instead.
  for (const id of (await requeued)?.refused ?? []) result.set(id, { retryDelaySeconds: putBack.find((row) => row.id === id)!.delaySeconds });
  return result;
}

/**
 * How long an outcome may wait for the rest of its batch. A batch that sends in time is written in one D1 batch at
 * its end (locally, writing while sending cost more than it saved: D1 runs on the consumer's own thread there); one
 * held up by a slow provider (up to the 120 s data timeout) writes what it has meanwhile.
 */
const OUTCOME_WAIT_MS = 1_000;

/**
 * Gathers a batch's outcomes and writes them: all at `close`, or, once the oldest unwritten one has waited
 * OUTCOME_WAIT_MS, everything gathered so far. One write at a time; a message's statements always go in one D1 batch,
 * so each message's outcome is written whole or not at all. After a write fails (see recordWithRetries), later
 * outcomes are not attempted: D1 is down, and their messages, like the failed ones, are left `sending` for the sweep.
 * `close` returns the outcomes that were written, by message id.
 */
function outcomeWriter(ctx: Ctx) {
  let waiting: [string, Disposition][] = [];
  const recorded = new Map<string, Disposition>();
  let writing: Promise<void> | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closing = false;
  let failed = false;
  const write = () => {
    clearTimeout(timer);
    timer = undefined;
    if (writing || failed || waiting.length === 0) return;
    const taken = waiting;
    waiting = [];
    writing = store(taken).finally(() => {
      writing = undefined;
      if (closing) write();
      else wait();
    });
  };
  const wait = () => {
    if (!timer && waiting.length > 0) timer = setTimeout(write, OUTCOME_WAIT_MS);
  };
  const store = async (taken: [string, Disposition][]) => {
    const statements = taken.flatMap(([, disposition]) => disposition.statements);
    if (statements.length > 0 && !(await recordWithRetries(ctx, statements))) failed = true;
    else for (const [id, disposition] of taken) recorded.set(id, disposition);
  };
  return {
    add(id: string, disposition: Disposition) {
      waiting.push([id, disposition]);
      wait();
    },
    async close(): Promise<ReadonlyMap<string, Disposition>> {
      closing = true;
      write();
      while (writing) await writing;
      return recorded;
    },
  };
}

/**
 * A message ready to send: its envelopes (one SMTP transaction per recipient with VERP) and bytes, the subject it
 * carries, and the R2 key its bytes are being stored at (`stored` settles once they are, or their store failed).
 */
type Ready = { envelopes: Envelope[]; raw: string | Uint8Array; subject: string; rawKey: string; stored: Promise<void> };
type Prepared = Ready | SendFailure;

const PREPARED_AHEAD_BYTES = 8 * 1024 * 1024;

const preparedSize = (prepared: Prepared) =>
  "envelopes" in prepared ? (typeof prepared.raw === "string" ? prepared.raw.length : prepared.raw.byteLength) : 0;

/**
 * Prepares `items` one after another, ahead of whoever takes them, pausing while the prepared ones not yet released
 * add up to PREPARED_AHEAD_BYTES (one larger message still goes through alone). `take` hands out the items in order.
 */
function prepareAhead<T>(items: readonly T[], prepare: (item: T) => Promise<Prepared>) {
  const slots = items.map((item) => {
    let resolve: (prepared: Prepared) => void = () => {};
    const ready = new Promise<Prepared>((settle) => (resolve = settle));
    return { item, ready, resolve };
  });
  let waiting = 0;
  let space: (() => void) | undefined;
  void (async () => {
    for (const slot of slots) {
      while (waiting >= PREPARED_AHEAD_BYTES) await new Promise<void>((resume) => (space = resume));
      const prepared = await prepare(slot.item);
      waiting += preparedSize(prepared);
      slot.resolve(prepared);
    }
  })();
  let taken = 0;
  return {
    take: () => slots[taken++],
    /** A prepared message is sent (or refused): its bytes no longer count against the budget. */
    release(prepared: Prepared) {
      waiting -= preparedSize(prepared);
      space?.();
      space = undefined;
    },
  };
}

/** The transport TRANSPORT names. */
export function transportFromConfig(env: Env): Transport {
  const settings = config(env);
  return settings.transport === "cloudflare" ? new CloudflareEmailTransport(env.EMAIL) : smtpTransportFromConfig(settings);
}

/** A message ready for the transport, or the outcome that it cannot be sent (never throws). */
async function prepareOne(
  env: Env,
  tag: string,
  message: MessageRow,
  recipients: string[],
  domain: SigningDomain | undefined,
  signingKeys: (domain: SigningDomain) => Promise<SigningKeys>,
  campaignRecipient?: CampaignRecipient,
): Promise<Prepared> {
  try {
    if (!domain) throw new MimeError("invalid_address", "from", "the sending domain was removed");
    const content = await loadContent(env, message);
    const { raw, subject } = await buildSignedMessage(env, message, tag, content, domain, await signingKeys(domain), campaignRecipient, recipients);
    // Cloudflare Email Sending sets its own Return-Path; an SMTP smarthost gets each recipient's copy in its own
    // transaction, with the VERP address that belongs to that recipient alone.
    const settings = config(env);
    const envelopes =
      settings.transport === "smtp"
        ? await envelopesOf(settings, { messageId: message.id, tag }, message.fromAddress, recipients)
        : [{ mailFrom: message.fromAddress, rcptTo: recipients }];
    return { envelopes, raw, subject, rawKey: rawObjectKey(message.id), stored: storeRaw(env, message.id, raw) };
  } catch (error) {
    if (error instanceof MimeError) {
      // The message itself is unsendable: retrying cannot help.
      return { ok: false, kind: "permanent", stage: "message", connectionError: false, code: 554, response: `554 5.6.0 ${error.message}` };
    }
    // Our side failed for this message (content missing in R2, a key that will not decrypt): retry this one alone,
    // and still record what the rest of the batch did, so nothing already sent is sent again.
    logError("send consumer: preparing a message failed", { message_id: message.id, error: String(error) });
    return { ok: false, kind: "temporary", stage: "message", connectionError: false, code: 0, response: `451 4.3.0 not sent: ${String(error)}` };
  }
}

/**
 * Keeps the bytes as they leave, while they are on the wire. A failure here must not hold back the message: the
 * message is sent all the same, and only its raw source and content are missing from the API.
 */
async function storeRaw(env: Env, messageId: string, raw: Uint8Array): Promise<void> {
  try {
    await env.BLOBS.put(rawObjectKey(messageId), raw, { httpMetadata: { contentType: "message/rfc822" } });
  } catch (error) {
    logError("send consumer: storing a message's raw source failed", { message_id: messageId, error: String(error) });
  }
}

/**
 * The queue gave up on these messages (the consumer kept throwing). They must not stay `queued` forever: whatever is
 * still pending is marked failed and refunded. They are claimed first, as a delivery would: a requeued copy being
 * delivered meanwhile owns its message, and abandoning it too would record a failure (and a refund) beside its outcome.
 */
export async function abandonMessages(ctx: Ctx, ids: string[]): Promise<void> {
  const { env, db } = ctx;
  const [messageRows, recipientRows] = await db.batch([
    claim(db, ids),
    db
      .select({ messageId: messageRecipients.messageId, email: messageRecipients.email })
      .from(messageRecipients)
      .where(and(inJsonArray(messageRecipients.messageId, ids), inArray(messageRecipients.status, pending))),
  ]);
  const pendingOf = new Map<string, string[]>();
  for (const row of recipientRows) pendingOf.set(row.messageId, [...(pendingOf.get(row.messageId) ?? []), row.email]);
  const dispositions = messageRows.map((message) =>
    recordOutcome(
      ctx,
      message,
      pendingOf.get(message.id) ?? [],
      {
        ok: false,
        kind: "temporary",
        stage: "connect",
        connectionError: true,
        code: 0,
        response: "delivery abandoned after repeated processing errors",
      },
      true,
    ),
  );
  const statements = dispositions.flatMap((disposition) => disposition.statements);
  if (statements.length > 0) await batch(db, statements);
  await dispatchEventInputs(
    ctx,
    dispositions.flatMap((disposition) => disposition.events),
  );
  await notifyCampaigns(env, messageRows);
}

const outcomeWriteDelaysMs = [250, 500, 1_000, 2_000, 4_000];

/**
 * Writes a batch's outcome, retrying a failing D1 (a locked or briefly unavailable database) for about 8 s: the
 * messages are already with the provider, and a lost outcome leaves them `unknown`. The statements are idempotent,
 * so a write that did apply but reported an error is safe to repeat. False when every attempt failed.
 */
async function recordWithRetries(ctx: Ctx, statements: D1PreparedStatement[]): Promise<boolean> {
  const { db } = ctx;
  for (let attempt = 0; ; attempt++) {
    try {
      await batch(db, statements);
      return true;
    } catch (error) {
      const delay = outcomeWriteDelaysMs[attempt];
      if (delay === undefined) {
        logError("send consumer: recording a batch outcome failed; its messages stay claimed", { error: String(error) });
        return false;
      }
      await scheduler.wait(delay);
    }
  }
}
