// What an open or a click records, after the pixel or the redirect has answered: one D1 read (the message and its
// recipient, in the account database the token's tag names; in the others only when it is not there: a token made
// before account databases, or before its account moved), then ONE batch with the rollups, the recipient's and contact's engagement and the event, then the
// webhook dispatch. Statements that count something only once (unique opens and clicks) are guarded by the event
// that records the fact and placed before it, as unsubscribe.ts does: the first hit finds no event and counts, every
// later one finds it.

import { and, eq, sql, type SQL } from "drizzle-orm";
import { findInAccountDatabases, inDatabase, sqlNow, statement, type AccountDb, type Ctx, batch } from "../../db/client";
import { hintedDatabase } from "../../db/hints";
import { messageRecipients, messages } from "../../db/schema";
import { sha256Hex } from "../../lib/crypto";
import { logError } from "../../lib/log";
import { eventStatement, type EventInput } from "../events/events";
import { asProvider, providerOfDomain, recipientDomain } from "../reports/providers";
import { rollupStatements, sendingDomain, type RollupKey } from "../reports/rollups";
import { eventData } from "../sending/outcome";
import { dispatchEvents } from "../webhooks/dispatch";
import { isScanner, machineOpenReason, type Client } from "./machine";
import type { ClickTarget, OpenTarget } from "./tokens";

type TrackedMessage = NonNullable<Awaited<ReturnType<typeof loadMessage>>>;

function loadMessage(db: AccountDb, target: OpenTarget) {
  const recipientJoin = target.recipient === null ? sql`0` : sql`lower(${messageRecipients.email}) = lower(${target.recipient})`;
  return db
    .select({
      id: messages.id,
      accountId: messages.accountId,
      source: messages.source,
      stream: messages.stream,
      fromAddress: messages.fromAddress,
      fromName: messages.fromName,
      subject: messages.subject,
      tags: messages.tags,
      metadata: messages.metadata,
      campaignId: messages.campaignId,
      testMode: messages.testMode,
      sentAt: messages.sentAt,
      provider: messageRecipients.provider,
      email: messageRecipients.email,
    })
    .from(messages)
    .leftJoin(messageRecipients, and(eq(messageRecipients.messageId, messages.id), recipientJoin))
    .where(eq(messages.id, target.messageId))
    .get();
}

/** The message a token names and the context of its account's database; undefined when no database has it. */
async function findMessage(ctx: Ctx, target: OpenTarget): Promise<{ ctx: Ctx; message: TrackedMessage } | undefined> {
  const found = await findInAccountDatabases(
    ctx.env,
    hintedDatabase(ctx.env, target.tag),
    (db) => loadMessage(db, target),
    (message) => message.accountId,
  );
  return found && { ctx: inDatabase(ctx, found.database), message: found.found };
}

// Test-mode messages are never counted in reports, as everywhere else.
const rollups = (db: AccountDb, message: TrackedMessage, key: RollupKey, counts: Parameters<typeof rollupStatements>[2], guard?: SQL) =>
  message.testMode ? [] : rollupStatements(db, key, counts, guard);

function rollupKey(message: TrackedMessage, recipient: string | null): RollupKey {
  return {
    accountId: message.accountId,
    domain: sendingDomain(message.fromAddress),
    provider: asProvider(message.provider) ?? (recipient === null ? undefined : providerOfDomain(recipientDomain(recipient))),
    campaignId: message.campaignId,
    stream: message.stream,
  };
}

// Keys name the recipient as the token does; `*` is the whole audience of a multi-recipient message.
const recipientKey = (recipient: string | null) => recipient?.toLowerCase() ?? "*";

const eventExists = (accountId: string, dedupeKey: string) =>
  sql`EXISTS (SELECT 1 FROM events WHERE account_id = ${accountId} AND dedupe_key = ${dedupeKey})`;

/** The recipient's engagement and their contact's last activity; nothing for a multi-recipient message. */
function engagementStatements(db: AccountDb, message: TrackedMessage, recipient: string | null, kind: "open" | "click"): D1PreparedStatement[] {
  if (recipient === null) return [];
  const recipientUpdate =
    kind === "open"
      ? sql`opens = opens + 1, opened_at = COALESCE(opened_at, ${sqlNow})`
      : sql`clicks = clicks + 1, clicked_at = COALESCE(clicked_at, ${sqlNow})`;
  return [
    statement(
      db,
      sql`UPDATE message_recipients SET ${recipientUpdate}, updated_at = ${sqlNow}
        WHERE message_id = ${message.id} AND lower(email) = lower(${recipient})`,
    ),
    statement(
      db,
      sql`UPDATE contacts SET last_activity_at = ${sqlNow} WHERE account_id = ${message.accountId} AND lower(email_key) = lower(${recipient})`,
    ),
  ];
}

function trackingEventData(message: TrackedMessage, recipient: string | null, client: Client, extra: Record<string, unknown> = {}) {
  return eventData(message, {
    ...(message.testMode ? { test: true } : {}),
    recipient,
    user_agent: client.userAgent,
    ip: client.ip,
    ...extra,
  });
}

async function write(ctx: Ctx, message: TrackedMessage, statements: D1PreparedStatement[], event?: EventInput): Promise<void> {
  const { db } = ctx;
  const all = event ? [...statements, eventStatement(db, event)] : statements;
  if (all.length === 0) return;
  await batch(db, all);
  if (event) await dispatchEvents(ctx, message.accountId, [event.dedupeKey]);
}

/**
 * A fetch of the open pixel. A person's first open per recipient emits `opened` and counts a unique open; every
 * person's open is counted. A machine's (Apple MPP, scanners, prefetch right after sending) only adds to
 * `machine_opens`. `at` is when the pixel was fetched. `unrouted`: the request's context, before the message's account
 * database is known. Never throws: the pixel has been served already.
 */
export async function recordOpen(unrouted: Ctx, target: OpenTarget, client: Client, at: Date): Promise<void> {
  try {
    const found = await findMessage(unrouted, target);
    if (!found) return;
    const { ctx, message } = found;
    const { db } = ctx;
    const key = rollupKey(message, target.recipient);
    if (machineOpenReason(client, message.sentAt, at)) {
      await write(ctx, message, rollups(db, message, key, { machine_opens: 1 }));
      return;
    }
    const dedupeKey = `opened:${message.id}:${recipientKey(target.recipient)}`;
    await write(
      ctx,
      message,
      [
        ...rollups(db, message, key, { unique_opens: 1 }, sql`NOT ${eventExists(message.accountId, dedupeKey)}`),
        ...rollups(db, message, key, { opens: 1 }),
        ...engagementStatements(db, message, target.recipient, "open"),
      ],
      {
        accountId: message.accountId,
        type: "opened",
        subjectId: message.id,
        dedupeKey,
        data: trackingEventData(message, target.recipient, client),
      },
    );
  } catch (error) {
    logError("recording an open failed", { message_id: target.messageId, error: String(error) });
  }
}

/**
 * A follow of a tracked link. Every click by a person is counted; the recipient's first click on any link counts a
 * unique click, their first on this link emits `clicked` (and, for a campaign, a unique click of the link). Clicks
 * by scanners are not counted. Never throws: the redirect has been answered already.
 */
export async function recordClick(unrouted: Ctx, target: ClickTarget, client: Client): Promise<void> {
  try {
    if (isScanner(client)) return;
    const found = await findMessage(unrouted, target);
    if (!found) return;
    const { ctx, message } = found;
    const { db } = ctx;
    const key = rollupKey(message, target.recipient);
    const prefix = `clicked:${message.id}:${recipientKey(target.recipient)}:`;
    const dedupeKey = `${prefix}${(await sha256Hex(target.url)).slice(0, 32)}`;
    // Any `clicked` event of this recipient: keys sharing the prefix, found as a range of the (account, key) index.
    const clickedBefore = sql`EXISTS (SELECT 1 FROM events WHERE account_id = ${message.accountId}
      AND dedupe_key >= ${prefix} AND dedupe_key < ${`${prefix.slice(0, -1)};`})`;
    const linkClickedBefore = eventExists(message.accountId, dedupeKey);
    await write(
      ctx,
      message,
      [
        ...rollups(db, message, key, { unique_clicks: 1 }, sql`NOT ${clickedBefore}`),
        ...rollups(db, message, key, { clicks: 1 }),
        ...(message.campaignId && !message.testMode
          ? [
              statement(
                db,
                sql`INSERT INTO campaign_links (campaign_id, url, clicks, unique_clicks)
                  VALUES (${message.campaignId}, ${target.url}, 1, CASE WHEN ${linkClickedBefore} THEN 0 ELSE 1 END)
                  ON CONFLICT (campaign_id, url) DO UPDATE SET clicks = clicks + 1, unique_clicks = unique_clicks + excluded.unique_clicks`,
              ),
            ]
          : []),
        ...engagementStatements(db, message, target.recipient, "click"),
      ],
      {
        accountId: message.accountId,
        type: "clicked",
        subjectId: message.id,
        dedupeKey,
        data: trackingEventData(message, target.recipient, client, { url: target.url }),
      },
    );
  } catch (error) {
    logError("recording a click failed", { message_id: target.messageId, error: String(error) });
  }
}
