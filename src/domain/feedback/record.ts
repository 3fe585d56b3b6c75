// Asynchronous delivery feedback (a DSN or ARF report mailed back, a Cloudflare Email Sending event, an SES
// notification) applied to the message and recipient it is about, the same way whatever its source:
//   delivered   → recipient `delivered`, `delivered`/`relay.delivered` event (counted in the reports when the
//                 transport's hand-off was not already counted as delivered)
//   bounced     → hard/blocked: recipient `bounced`, `bounced`/`relay.bounced` event; hard also suppresses the
//                 address. soft: counted (soft_bounces, once per recipient) and kept: the provider is still retrying,
//                 or gave up on a temporary failure and the address may work tomorrow.
//                 The credit is refunded only when the report's origin is verified (refundingSources): a DSN or ARF
//                 report is mail anyone who received the message can write, so it never moves credits.
//   complained  → recipient `complained`, address suppressed (its contacts leave the audience), `complained`/
//                 `relay.complained` event
// Everything is written in one D1 batch per call; each row of delivery_feedback, the recipient's status transitions
// and the ledger's unique references make a report received twice change nothing the second time.

import { eq, or, sql } from "drizzle-orm";
import { accountDatabaseNames, type DatabaseName, inDatabase, inJsonArray, placementOf, sqlNow, statement, type Ctx, batch } from "../../db/client";
import { accountMoving } from "../../errors";
import { deliveryFeedback, messageRecipients, messages } from "../../db/schema";
import { sha256Hex } from "../../lib/crypto";
import { logWarning } from "../../lib/log";
import { chargedGuard, refundStatements } from "../credits/ledger";
import { recipientReference } from "../campaigns/fanout";
import { eventStatement, type EventInput, type EventType } from "../events/events";
import { recipientRollupStatements, rollupStatements, sendingDomain, type RollupCounts } from "../reports/rollups";
import { asProvider } from "../reports/providers";
import { eventData, statusOfRecipients } from "../sending/outcome";
import { suppressionStatements } from "../suppressions/suppressions";
import { dispatchEventInputs } from "../webhooks/dispatch";
import { evaluateReputation } from "./reputation";

type FeedbackSource = "dsn" | "arf" | "cloudflare" | "ses";

export type Feedback = {
  /** Our message id (VERP token, SES), or the provider's id of one recipient's copy (Cloudflare Email Sending). */
  target: { messageId: string } | { providerMessageId: string };
  recipient: string;
  kind: "delivered" | "deferred" | "bounced" | "complained";
  bounceType?: "hard" | "soft" | "blocked";
  /** RFC 3463 status (`5.1.1`), when the report gives one. */
  status?: string;
  /** The receiving server's words: a Diagnostic-Code, an SES diagnosticCode, a Cloudflare category. */
  diagnostic?: string;
  /** A soft bounce the provider gave up on (retries exhausted): failed for good, refunded, but not suppressed. */
  final?: boolean;
  /** ARF Feedback-Type (`abuse`, `fraud`…) or the provider's complaint type. */
  feedbackType?: string;
  source: FeedbackSource;
  /** The report's own id (a DSN's Message-ID, an event id): with the recipient and kind, what makes it one report. */
  sourceId: string;
};

export type FeedbackResult = { recorded: number; ignored: number };

/**
 * Sources whose origin is verified (an SNS signature, Cloudflare's own event queue): their bounces refund the
 * recipient's credit. A mailed report (dsn, arf) proves only that someone could write to the bounce domain, and its
 * token only that they received the message: it may bounce, suppress and report that recipient, never refund it.
 */
const refundingSources: ReadonlySet<FeedbackSource> = new Set(["ses", "cloudflare"]);

// A recipient's status before the report, for each kind: only these move. A `sent` recipient's hand-off was accepted;
// `delivered` ones can still bounce late (a DSN after an accepting relay) or complain.
const movesFrom = {
  delivered: ["sent"],
  bounced: ["sent", "delivered", "unknown"],
  complained: ["sent", "delivered", "unknown"],
} as const;

/**
 * Applies reports that name a provider's message id (and nothing of the account) in the account databases that hold
 * those ids: each database is asked once for the ids not found yet, in order, until every one is found, and each one's
 * reports are recorded in it. `ctx` need not be routed to an account. Reports nobody holds are dropped and logged.
 */
export async function recordProviderFeedback(ctx: Ctx, reports: (Feedback & { target: { providerMessageId: string } })[]): Promise<FeedbackResult> {
  let missing = [...new Set(reports.map((report) => report.target.providerMessageId))];
  const result: FeedbackResult = { recorded: 0, ignored: 0 };
  for (const name of accountDatabaseNames(ctx.env)) {
    if (missing.length === 0) break;
    const rows = await inDatabase(ctx, name)
      .db.selectDistinct({ id: messageRecipients.providerMessageId, accountId: messages.accountId })
      .from(messageRecipients)
      .innerJoin(messages, eq(messages.id, messageRecipients.messageId))
      .where(inJsonArray(messageRecipients.providerMessageId, missing))
      .all();
    if (rows.length === 0) continue;
    missing = missing.filter((id) => !rows.some((row) => row.id === id));
    // Recorded where the directory places each account, not where a row was found: that may be a move's leftover
    // source. A moving account's reports wait (the batch is retried): a write now would be left behind.
    const heldIn = new Map<DatabaseName, Set<string | null>>();
    for (const accountId of new Set(rows.map((row) => row.accountId))) {
      const placement = await placementOf(ctx.env, accountId);
      if (!placement) continue;
      if (placement.movingTo !== null) throw accountMoving();
      const ids = heldIn.get(placement.database) ?? new Set();
      for (const row of rows) if (row.accountId === accountId) ids.add(row.id);
      heldIn.set(placement.database, ids);
    }
    for (const [database, held] of heldIn) {
      const recorded = await recordFeedback(
        inDatabase(ctx, database),
        reports.filter((report) => held.has(report.target.providerMessageId)),
      );
      result.recorded += recorded.recorded;
      result.ignored += recorded.ignored;
    }
  }
  const unknown = reports.filter((report) => missing.includes(report.target.providerMessageId));
  for (const report of unknown) {
    logWarning("feedback dropped: no such message recipient", { source: report.source, target: report.target, recipient: report.recipient });
  }
  result.ignored += unknown.length;
  return result;
}

/**
 * Applies reports to their messages in `ctx`'s account database; reports about unknown messages or recipients are
 * dropped and logged.
 */
export async function recordFeedback(ctx: Ctx, reports: Feedback[]): Promise<FeedbackResult> {
  const { db } = ctx;
  if (reports.length === 0) return { recorded: 0, ignored: 0 };
  const messageIds = reports.flatMap((report) => ("messageId" in report.target ? [report.target.messageId] : []));
  const providerIds = reports.flatMap((report) => ("providerMessageId" in report.target ? [report.target.providerMessageId] : []));
  const recipients = await db
    .select({
      messageId: messageRecipients.messageId,
      email: messageRecipients.email,
      status: messageRecipients.status,
      provider: messageRecipients.provider,
      providerMessageId: messageRecipients.providerMessageId,
      message: messages,
    })
    .from(messageRecipients)
    .innerJoin(messages, eq(messages.id, messageRecipients.messageId))
    .where(
      or(
        messageIds.length > 0 ? inJsonArray(messageRecipients.messageId, messageIds) : undefined,
        providerIds.length > 0 ? inJsonArray(messageRecipients.providerMessageId, providerIds) : undefined,
      ),
    )
    .all();

  const statements: D1PreparedStatement[] = [];
  // Each event with the recipient status it reports: written only if the recipient is in it once the batch has run
  // (a late `delivered` for a recipient that already bounced reports nothing).
  const events: { event: EventInput; status: string }[] = [];
  const domainIds = new Set<string>();
  const touched = new Set<string>();
  let ignored = 0;
  for (const report of reports) {
    const wanted = report.recipient.trim().toLowerCase();
    const row = recipients.find(
      (candidate) =>
        ("messageId" in report.target
          ? candidate.messageId === report.target.messageId
          : candidate.providerMessageId === report.target.providerMessageId) && candidate.email.toLowerCase() === wanted,
    );
    // Test-mode messages never left: a report about one is somebody else's mail or a forgery.
    if (!row || row.message.testMode) {
      ignored++;
      logWarning("feedback dropped: no such message recipient", { source: report.source, target: report.target, recipient: report.recipient });
      continue;
    }
    const { message } = row;
    domainIds.add(message.domainId);
    const feedbackId = `fb_${(await sha256Hex(`${report.source}\n${report.sourceId}\n${report.kind}\n${wanted}`)).slice(0, 32)}`;
    const campaign = message.source === "campaign";
    const key = { accountId: message.accountId, domain: sendingDomain(message.fromAddress), campaignId: message.campaignId, stream: message.stream };
    const count = (counts: RollupCounts, from: readonly string[]) =>
      recipientRollupStatements(db, key, counts, { messageId: message.id, emails: [row.email], statuses: from });
    const setStatus = (status: string, from: readonly string[]) =>
      statement(
        db,
        sql`UPDATE message_recipients SET status = ${status}, smtp_response = ${report.diagnostic ?? report.status ?? report.kind}, updated_at = ${sqlNow}
          WHERE message_id = ${message.id} AND email = ${row.email} AND status IN (SELECT value FROM json_each(${JSON.stringify(from)}))`,
      );
    const event = (type: EventType, status: string, extra: Record<string, unknown>) =>
      events.push({
        status,
        event: {
          accountId: message.accountId,
          type,
          subjectId: message.id,
          dedupeKey: `${type}:${message.id}:${row.email}`,
          data: eventData(message, { recipient: row.email, feedback_source: report.source, ...extra }),
        },
      });
    const feedbackRow = db
      .insert(deliveryFeedback)
      .values({
        id: feedbackId,
        accountId: message.accountId,
        messageId: message.id,
        recipient: row.email,
        kind: report.kind,
        bounceType: report.bounceType ?? null,
        source: report.source,
        detail: report.diagnostic ?? report.feedbackType ?? null,
      })
      .onConflictDoNothing();

    if (report.kind === "delivered") {
      // A smarthost's acceptance was counted as delivered; a copy with a provider id (Cloudflare) was only `sent`.
      if (row.providerMessageId) statements.push(...count({ delivered: 1 }, movesFrom.delivered));
      statements.push(setStatus("delivered", movesFrom.delivered));
      event(campaign ? "delivered" : "relay.delivered", "delivered", { smtp_response: report.diagnostic ?? null });
    } else if (report.kind === "complained") {
      statements.push(...count({ complaints: 1 }, movesFrom.complained), setStatus("complained", movesFrom.complained));
      statements.push(
        ...suppressionStatements(db, {
          accountId: message.accountId,
          email: row.email,
          reason: "complaint",
          // A complaint about marketing keeps marketing away and lets receipts and resets through; one about a
          // receipt keeps every stream away (docs/streams.md): Postmark stops that stream, SendGrid stops all mail.
          scope: message.stream === "broadcast" ? "broadcast" : "all",
          sourceMessageId: message.id,
        }),
      );
      event(campaign ? "complained" : "relay.complained", "complained", { feedback_type: report.feedbackType ?? "abuse" });
    } else if (report.kind === "bounced" && (report.bounceType !== "soft" || report.final)) {
      const bounceType = report.bounceType ?? "hard";
      statements.push(...count(bounceType === "soft" ? { soft_bounces: 1, failed: 1 } : { hard_bounces: 1 }, movesFrom.bounced));
      // Refunded once: the ledger's unique reference is the one a synchronous bounce of this recipient would use. A
      // campaign recipient is charged only when sent: one whose outcome was lost (`unknown`) had its credit released
      // with the campaign's settlement, and is not refunded on top of that.
      if (refundingSources.has(report.source) && movesFrom.bounced.some((status) => status === row.status)) {
        statements.push(
          ...refundStatements(
            db,
            { accountId: message.accountId, balance: "send", amount: 1, referenceId: `${message.id}:${row.email}`, note: "permanent failure" },
            campaign && message.campaignId ? chargedGuard("send", recipientReference(message.campaignId, message.id)) : undefined,
          ),
        );
      }
      statements.push(setStatus("bounced", movesFrom.bounced));
      if (bounceType === "hard") {
        statements.push(
          ...suppressionStatements(db, {
            accountId: message.accountId,
            email: row.email,
            reason: "bounce",
            scope: "all",
            sourceMessageId: message.id,
          }),
        );
      }
      event(campaign ? "bounced" : "relay.bounced", "bounced", {
        bounce_type: bounceType,
        smtp_code: smtpCode(report.diagnostic),
        enhanced_code: report.status ?? null,
        smtp_response: report.diagnostic ?? null,
      });
    } else {
      // A soft bounce or a delay: counted once per recipient (before its first such feedback row exists), however
      // many reports come, the recipient kept. Report ids cannot be what counts: a mailed report chooses its own.
      statements.push(
        ...rollupStatements(
          db,
          { ...key, provider: asProvider(row.provider) },
          { soft_bounces: 1 },
          sql`NOT EXISTS (SELECT 1 FROM delivery_feedback WHERE message_id = ${message.id} AND recipient = ${row.email} AND kind = ${report.kind})`,
        ),
      );
    }
    statements.push(statement(db, feedbackRow));
    touched.add(message.id);
  }
  // Each message's status follows its recipients, as after a delivery attempt: once, after all of its reports.
  for (const messageId of touched) {
    statements.push(
      statement(
        db,
        sql`UPDATE messages SET status = ${statusOfRecipients(messageId)}, updated_at = ${sqlNow}
         WHERE id = ${messageId} AND status NOT IN ('queued', 'sending', 'deferred')`,
      ),
    );
  }
  for (const { event: item, status } of events) {
    const email = String(item.data.recipient);
    statements.push(
      eventStatement(
        db,
        item,
        sql`EXISTS (SELECT 1 FROM message_recipients WHERE message_id = ${item.subjectId} AND email = ${email} AND status = ${status})`,
      ),
    );
  }
  if (statements.length > 0) await batch(db, statements);

  await dispatchEventInputs(
    ctx,
    events.map(({ event: item }) => item),
  );
  // Bounces and complaints move the domains' rates: hold or pause them now rather than at the next cron.
  if (reports.some((report) => report.kind === "bounced" || report.kind === "complained")) await evaluateReputation(ctx, [...domainIds]);
  return { recorded: reports.length - ignored, ignored };
}

/** The reply code a diagnostic starts with (`smtp; 550 5.1.1 …` → 550). */
function smtpCode(diagnostic: string | undefined): number | null {
  const match = diagnostic?.match(/(?:^|[;\s])([245]\d\d)[\s-]/);
  return match ? Number(match[1]) : null;
}
