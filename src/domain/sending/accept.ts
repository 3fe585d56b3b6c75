import { and, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { statement } from "../../db/client";
import { messageRecipients, messages, type domains, type suppressions, type templates } from "../../db/schema";
import { findAccount, type Account } from "../accounts/accounts";
import { verifiedDomainQuery } from "../domains/domains";
import { eventStatement, type EventInput } from "../events/events";
import { chargedGuard, chargeStatements, refundStatements, wasApplied } from "../credits/ledger";
import { normalizeSuppressionEmail, suppressionsAmongQuery } from "../suppressions/suppressions";
import { templateContentQuery } from "../templates/templates";
import { dispatchEvents } from "../webhooks/dispatch";
import { AppError, orRefuse, validationError } from "../../errors";
import { newId } from "../../lib/ids";
import { logError } from "../../lib/log";
import { displayFrom, domainOf } from "./mime";
import { providerOfDomain, recipientDomain } from "../reports/providers";
import { recipientRollupStatements, sendingDomain } from "../reports/rollups";
import { applySendRules } from "./rules";
import { contentObjectKey, inlineContentLimit, type MessageContent, type SendQueueMessage } from "./content";
import { releaseDailySends, reserveDailySendsAhead, type DailyReservation } from "./daily-limit";
import {
  isIdempotencyRace,
  recordResponseStatement,
  releaseKeyStatement,
  replay,
  replayAfterRace,
  storedResponseStatement,
  type Idempotency,
  type StoredResponse,
} from "./idempotency";

export type MessageSource = "api" | "smtp";

export type StoredTemplate = Pick<typeof templates.$inferSelect, "subject" | "html" | "text">;

/** A send request after parsing, whichever door it came through (POST /send or the SMTP relay). */
export type AcceptInput = {
  source: MessageSource;
  from: { name?: string; address: string };
  /** Recipients as given (`address` or `Name <address>`); acceptMessage de-duplicates and caps them (rules.ts). */
  recipients: string[];
  replyTo?: string;
  tags: string[];
  metadata: Record<string, string>;
  templateId?: string;
  /** Open pixel and click rewriting at delivery (docs/tracking.md); off when absent. */
  tracking?: { opens: boolean; clicks: boolean };
  /** Builds subject and content once the template (if any) is loaded with the other reads. */
  compose(template: StoredTemplate | undefined): { subject: string; content: MessageContent };
};

export type Sender = { account: Account; testMode: boolean };

export type SendAccepted = {
  id: string;
  recipients: { email: string; status: "queued" | "suppressed" }[];
  credits_charged: number;
  status: "queued" | "suppressed";
  test_mode: boolean;
};

export type AcceptResult = { status: number; body: SendAccepted; replayed: boolean };

export type WaitUntil = { waitUntil(promise: Promise<unknown>): void };

/**
 * The one pipeline every message enters: checks the sending domain, suppressions, idempotency and the daily
 * limit, then charges, stores the message and its recipients and records suppression events in ONE D1 batch
 * (one transaction), and only then enqueues it. A charge that fails leaves nothing behind; a stored message is
 * always charged exactly once.
 */
export async function acceptMessage(env: Env, ctx: WaitUntil, sender: Sender, input: AcceptInput, idempotency?: Idempotency): Promise<AcceptResult> {
  const { account } = sender;
  const d1 = env.DB;
  const fromDomain = domainOf(input.from.address);
  const rules = applySendRules(input, input.source === "smtp" ? "rcpt_to" : "to");
  if (!rules.ok) throw validationError(rules.errors);
  const { tags } = rules;
  const normalized = rules.recipients.map(normalizeSuppressionEmail);

  // The daily limit's Durable Object is asked meanwhile (for every recipient; settled below once suppressions are
  // known). Every way out before then gives it back.
  const daily = reserveDailySendsAhead(env, account, sender.testMode ? 0 : rules.recipients.length);
  const orCancel = async <T>(work: () => T | Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      await daily.cancel();
      throw error;
    }
  };

  // Round trip 1: everything the decision needs, read together. Raw D1 rows, keyed by column name.
  const db = drizzle(d1);
  const results = await orCancel(() =>
    d1.batch([
      statement(d1, verifiedDomainQuery(db, account.id, fromDomain)),
      statement(d1, suppressionsAmongQuery(db, account.id, normalized)),
      ...(idempotency ? [storedResponseStatement(d1, account.id, idempotency)] : []),
      ...(input.templateId ? [statement(d1, templateContentQuery(db, account.id, input.templateId))] : []),
    ]),
  );
  const domain = results[0]?.results[0] as Pick<typeof domains.$inferSelect, "id" | "name"> | undefined;
  // Why each suppressed address is on the list, as its relay.suppressed event says.
  const suppressed = new Map(
    ((results[1]?.results ?? []) as Pick<typeof suppressions.$inferSelect, "email" | "reason">[]).map((row) => [row.email, row.reason]),
  );
  const previous = idempotency ? (results[2]?.results[0] as StoredResponse | undefined) : undefined;
  const template = input.templateId ? (results[idempotency ? 3 : 2]?.results[0] as StoredTemplate | undefined) : undefined;

  if (previous && idempotency) {
    await daily.cancel();
    return { ...orRefuse(replay<SendAccepted>(previous, idempotency)), replayed: true };
  }
  if (!domain) {
    await daily.cancel();
    throw new AppError(
      "domain_not_verified",
      `The from domain ${fromDomain} is not a verified sending domain of this account; add it with POST /api/v1/domains and verify it`,
    );
  }
  if (input.templateId && !template) {
    await daily.cancel();
    throw validationError({ template_id: [`No template ${input.templateId} in this account`] });
  }
  const { subject, content } = await orCancel(() => input.compose(template));

  const messageId = newId("msg");
  const recipients = rules.recipients.map((email, i) => ({
    email,
    status: suppressed.has(normalized[i]!) ? ("suppressed" as const) : ("queued" as const),
    reason: suppressed.get(normalized[i]!),
    // Only what the domain name tells (no DNS here); delivery looks up the MX of the rest.
    provider: providerOfDomain(recipientDomain(email)) ?? null,
  }));
  const deliverable = recipients.filter((recipient) => recipient.status === "queued");
  const charge = sender.testMode ? 0 : deliverable.length;
  const status = deliverable.length > 0 ? "queued" : "suppressed";
  const accepted: SendAccepted = {
    id: messageId,
    recipients: recipients.map(({ email, status }) => ({ email, status })),
    credits_charged: charge,
    status,
    test_mode: sender.testMode,
  };

  // The daily limit is settled before the content is written: a refusal here must find nothing in R2 to clean up.
  const day = orRefuse(await daily.settle(charge));
  const serialized = JSON.stringify(content);
  const inline = serialized.length <= inlineContentLimit;
  if (!inline) {
    try {
      await env.BLOBS.put(contentObjectKey(messageId), serialized, { httpMetadata: { contentType: "application/json" } });
    } catch (error) {
      if (day) await releaseDailySends(env, account, day);
      throw error;
    }
  }

  // Round trip 2: the charge and everything it pays for, in one transaction. Rows after the ledger entry are
  // guarded by its existence, so a short balance writes nothing at all.
  const events: EventInput[] = recipients
    .filter((recipient) => recipient.status === "suppressed")
    .map((recipient) => ({
      accountId: account.id,
      type: "relay.suppressed",
      subjectId: messageId,
      dedupeKey: `relay.suppressed:${messageId}:${recipient.email}`,
      data: {
        message_id: messageId,
        from: displayFrom(input.from.name, input.from.address),
        subject,
        source: input.source,
        tags,
        metadata: input.metadata,
        recipient: recipient.email,
        reason: recipient.reason,
      },
    }));
  const messageStored = sql`EXISTS (SELECT 1 FROM messages WHERE id = ${messageId})`;
  const writes = [
    ...(charge > 0 ? chargeStatements(d1, { accountId: account.id, balance: "send", amount: charge, referenceId: messageId, note: "send" }) : []),
    statement(
      d1,
      sql`INSERT INTO messages (id, account_id, source, status, from_address, from_name, domain_id, reply_to, subject, tags, metadata,
          content, content_key, credits_charged, test_mode, track_opens, track_clicks)
        SELECT ${messageId}, ${account.id}, ${input.source}, ${status}, ${input.from.address}, ${input.from.name ?? null}, ${domain.id},
          ${input.replyTo ?? null}, ${subject}, ${JSON.stringify(tags)}, ${JSON.stringify(input.metadata)}, ${inline ? serialized : null},
          ${inline ? null : contentObjectKey(messageId)}, ${charge}, ${sender.testMode ? 1 : 0},
          ${input.tracking?.opens ? 1 : 0}, ${input.tracking?.clicks ? 1 : 0}
        ${charge > 0 ? sql`WHERE ${chargedGuard("send", messageId)}` : sql``}`,
    ),
    statement(
      d1,
      sql`INSERT INTO message_recipients (message_id, email, account_id, status, provider)
        SELECT ${messageId}, value ->> '$.email', ${account.id}, value ->> '$.status', value ->> '$.provider'
        FROM json_each(${JSON.stringify(recipients)}) WHERE ${messageStored}`,
    ),
    // Suppressed recipients count in the reports (a new message: this batch runs once); test mode is never counted.
    ...(sender.testMode
      ? []
      : recipientRollupStatements(
          d1,
          { accountId: account.id, domain: sendingDomain(input.from.address), campaignId: null },
          { suppressed: 1 },
          {
            messageId,
            emails: recipients.filter((recipient) => recipient.status === "suppressed").map((recipient) => recipient.email),
            statuses: ["suppressed"],
          },
        )),
    ...(tags.length > 0
      ? [
          statement(
            d1,
            sql`INSERT INTO message_tags (message_id, account_id, tag)
              SELECT ${messageId}, ${account.id}, value FROM json_each(${JSON.stringify(tags)}) WHERE ${messageStored}`,
          ),
        ]
      : []),
    ...events.map((event) => eventStatement(d1, event)),
    ...(idempotency
      ? [recordResponseStatement(d1, account.id, idempotency, { status: 202, body: accepted }, { table: messages, id: messageId })]
      : []),
  ];

  // A refused or failed acceptance must not leave its content behind in R2.
  const discardContent = () => (inline ? Promise.resolve() : env.BLOBS.delete(contentObjectKey(messageId)));
  let written: D1Result[];
  try {
    written = await d1.batch(writes);
  } catch (error) {
    if (day) await releaseDailySends(env, account, day);
    await discardContent();
    if (idempotency && isIdempotencyRace(error))
      return { ...orRefuse(await replayAfterRace<SendAccepted>(d1, account.id, idempotency)), replayed: true };
    throw error;
  }
  if (charge > 0 && !wasApplied(written[0]!)) {
    if (day) await releaseDailySends(env, account, day);
    await discardContent();
    // The caller's account row may come from the key cache (seconds old): the figure shown is read now.
    const current = (await findAccount(db, account.id)) ?? account;
    const available = current.sendBalance - current.sendReserved;
    throw new AppError("insufficient_credits", `Not enough sending credits: this message needs ${charge}, ${Math.max(0, available)} available`);
  }

  if (deliverable.length > 0) {
    await enqueueOrUndo(env, account, messageId, charge > 0 ? deliverable.map((recipient) => recipient.email) : [], day, idempotency);
  }
  if (events.length > 0) {
    ctx.waitUntil(
      dispatchEvents(
        env,
        account.id,
        events.map((event) => event.dedupeKey),
      ),
    );
  }
  return { status: 202, body: accepted, replayed: false };
}

/**
 * The message is stored and charged; if it cannot be queued it must not stay `queued` with nobody to send it.
 * One retry, then the acceptance is undone (failed, refunded per recipient, idempotency key freed) and the client
 * gets a 503 to retry with back-off. The undo only applies while the message is still `queued`, so a send that did
 * reach the queue after all is never refunded.
 */
async function enqueueOrUndo(
  env: Env,
  account: Account,
  messageId: string,
  charged: string[],
  day: DailyReservation | undefined,
  idempotency: Idempotency | undefined,
) {
  const body: SendQueueMessage = { message_id: messageId };
  for (let attempt = 1; ; attempt++) {
    try {
      await env.SEND_QUEUE.send(body, { contentType: "json" });
      return;
    } catch (error) {
      if (attempt === 2) {
        logError("send queue unavailable; undoing the acceptance", { message_id: messageId, error: String(error) });
        break;
      }
    }
  }
  try {
    const db = drizzle(env.DB);
    const claimed = await db
      .update(messages)
      .set({ status: "failed", smtpResponse: "not queued: queue unavailable" })
      .where(and(eq(messages.id, messageId), eq(messages.status, "queued")))
      .run();
    if (claimed.meta.changes === 1) {
      await env.DB.batch([
        statement(
          env.DB,
          db
            .update(messageRecipients)
            .set({ status: "failed" })
            .where(and(eq(messageRecipients.messageId, messageId), eq(messageRecipients.status, "queued"))),
        ),
        // The consumer's refund reference per recipient, so the ledger's unique index never lets both apply.
        ...charged.flatMap((email) =>
          refundStatements(env.DB, {
            accountId: account.id,
            balance: "send",
            amount: 1,
            referenceId: `${messageId}:${email}`,
            note: "queue unavailable",
          }),
        ),
        ...(idempotency ? [releaseKeyStatement(env.DB, account.id, idempotency)] : []),
      ]);
      if (day) await releaseDailySends(env, account, day);
    }
  } catch (error) {
    // Stored, charged and not queued: visible in the log with its id so an operator can requeue or refund it.
    logError("undoing an unqueued message failed; it stays queued", { message_id: messageId, error: String(error) });
  }
  throw new AppError("upstream_unavailable", "The message could not be queued; nothing was charged. Retry with back-off");
}
