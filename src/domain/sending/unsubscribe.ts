import { bytesToBase64Url, hmacSha256Hex, timingSafeEqualString } from "../../lib/crypto";
import { and, eq, sql } from "drizzle-orm";
import type { Config } from "../../config";
import { findInAccountDatabases, inDatabase, statement, type AccountDb, type Ctx, batch } from "../../db/client";
import { hintedDatabase } from "../../db/hints";
import { contacts, messageRecipients, messages, suppressions, topics } from "../../db/schema";
import { nowIso } from "../../lib/ids";
import { asProvider, providerOfDomain, recipientDomain } from "../reports/providers";
import { rollupStatements, sendingDomain } from "../reports/rollups";
import { eventStatement } from "../events/events";
import { normalizeSuppressionEmail, suppressionStatements } from "../suppressions/suppressions";
import { topicChoiceStatements, topicSubscriptionsOf } from "../topics/topics";
import { parseMailbox } from "./addresses";

type Keys = Pick<Config, "encryptionKey">;

// The token names one recipient of one message and is signed, so a link cannot be edited to unsubscribe someone
// else. The signing key is derived from DKIM_ENCRYPTION_KEY (already a secret) with its own label. Last in it is the
// tag of the account database the message is in (src/db/hints.ts); tokens made before account databases have none.
const signingKey = (config: Keys) => `unsubscribe:${config.encryptionKey}`;
const signatureLength = 32;

function base64UrlToString(value: string): string {
  const base64 = value.replace(/-/g, "+").replace(/_/g, "/");
  return new TextDecoder().decode(Uint8Array.from(atob(base64), (char) => char.charCodeAt(0)));
}

/** What an unsubscribe link names: one recipient of one message, and where that message is (`tag`, a hint). */
export type UnsubscribeTarget = { messageId: string; email: string; tag: string | undefined };

export async function unsubscribeToken(config: Keys, target: { messageId: string; email: string; tag: string }): Promise<string> {
  const payload = bytesToBase64Url(new TextEncoder().encode(JSON.stringify([target.messageId, target.email, target.tag])));
  const signature = (await hmacSha256Hex(signingKey(config), payload)).slice(0, signatureLength);
  return `${payload}.${signature}`;
}

export async function readUnsubscribeToken(config: Keys, token: string): Promise<UnsubscribeTarget | undefined> {
  const [payload, signature, extra] = token.split(".");
  if (!payload || !signature || extra !== undefined || payload.length > 1000) return undefined;
  const expected = (await hmacSha256Hex(signingKey(config), payload)).slice(0, signatureLength);
  if (!(await timingSafeEqualString(signature, expected))) return undefined;
  try {
    const fields = JSON.parse(base64UrlToString(payload)) as unknown[];
    const [messageId, email, tag] = fields;
    if (typeof messageId !== "string" || typeof email !== "string") return undefined;
    if (fields.length === 2) return { messageId, email, tag: undefined };
    return fields.length === 3 && typeof tag === "string" ? { messageId, email, tag } : undefined;
  } catch {
    return undefined;
  }
}

/** The `/u/<token>` link of one recipient of a message in the database tagged `tag`. */
export async function unsubscribeUrl(config: Pick<Config, "encryptionKey" | "siteUrl">, target: { messageId: string; email: string; tag: string }) {
  return new URL(`/u/${await unsubscribeToken(config, target)}`, config.siteUrl).href;
}

export async function listUnsubscribeHeaders(
  config: Pick<Config, "encryptionKey" | "siteUrl">,
  target: { messageId: string; recipient: string; tag: string },
) {
  // The recipient may be written `Name <address>`; the link must name the address, which is what gets suppressed.
  const parsed = parseMailbox(target.recipient);
  const email = parsed.ok ? parsed.mailbox.address : target.recipient;
  const url = await unsubscribeUrl(config, { messageId: target.messageId, email, tag: target.tag });
  // RFC 8058 one-click: mailbox providers POST `List-Unsubscribe=One-Click` to the https URL.
  return { "List-Unsubscribe": `<${url}>`, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" };
}

/**
 * The context of the account database holding the message a link names: the one its tag names, else (a link made
 * before account databases, or before the account moved) the first that has it. Undefined when none has it.
 */
export async function unsubscribeCtx(ctx: Ctx, target: UnsubscribeTarget): Promise<Ctx | undefined> {
  const found = await findInAccountDatabases(
    ctx.env,
    hintedDatabase(ctx.env, target.tag),
    (db) => db.select({ accountId: messages.accountId }).from(messages).where(eq(messages.id, target.messageId)).get(),
    (message) => message.accountId,
  );
  return found && inDatabase(ctx, found.database);
}

/** What the person behind a link asked for: the one-click unsubscribe, or the preference page's choices. */
export type UnsubscribeChoice =
  | { kind: "one_click" }
  /** `before`: the page's state the choices were made on (the caller read it to build them), so it is not read again. */
  | { kind: "preferences"; topics: Record<string, boolean>; allMarketing: boolean; before: Preferences };

/** What the link's page shows: the account's topics with this address's choices, and whether it left all marketing. */
export type Preferences = {
  accountId: string;
  email: string;
  /** The topic of the message the link came from, if it named one that still exists. */
  topicId: string | null;
  topics: { id: string; name: string; description: string | null; subscribed: boolean }[];
  unsubscribedFromAll: boolean;
};

type LinkedMessage = {
  accountId: string;
  campaignId: string | null;
  fromAddress: string;
  testMode: boolean;
  stream: "transactional" | "broadcast";
  topicId: string | null;
  provider: string | null;
};

async function linkedMessage(db: AccountDb, target: { messageId: string; email: string }): Promise<LinkedMessage | undefined> {
  return db
    .select({
      accountId: messages.accountId,
      campaignId: messages.campaignId,
      fromAddress: messages.fromAddress,
      testMode: messages.testMode,
      stream: messages.stream,
      // Only a topic that still exists: a deleted one's links leave all marketing.
      topicId: sql<string | null>`(SELECT t.id FROM topics AS t WHERE t.id = ${messages.topicId})`,
      provider: messageRecipients.provider,
    })
    .from(messages)
    .leftJoin(messageRecipients, and(eq(messageRecipients.messageId, messages.id), eq(messageRecipients.email, target.email)))
    .where(eq(messages.id, target.messageId))
    .get();
}

/** The contacts of the address in the account (one at most: contacts are unique per address, matched as suppressions are). */
const contactsOfAddress = (accountId: string, email: string) =>
  and(eq(contacts.accountId, accountId), sql`lower(${contacts.emailKey}) = ${normalizeSuppressionEmail(email)}`);

/** The preference page's content for a link; undefined when its message no longer exists. */
export async function preferencesOf(db: AccountDb, target: { messageId: string; email: string }): Promise<Preferences | undefined> {
  const message = await linkedMessage(db, target);
  if (!message) return undefined;
  const [accountTopics, contactRows, leftAll] = await db.batch([
    db.select().from(topics).where(eq(topics.accountId, message.accountId)).orderBy(topics.createdAt, topics.id),
    db.select({ id: contacts.id }).from(contacts).where(contactsOfAddress(message.accountId, target.email)).limit(1),
    db
      .select({ scope: suppressions.scope })
      .from(suppressions)
      .where(and(eq(suppressions.accountId, message.accountId), eq(suppressions.email, normalizeSuppressionEmail(target.email)))),
  ]);
  const contactId = contactRows[0]?.id;
  const choices = contactId ? ((await topicSubscriptionsOf(db, message.accountId, [contactId])).get(contactId) ?? {}) : {};
  return {
    accountId: message.accountId,
    email: target.email,
    topicId: message.topicId,
    topics: accountTopics.map((topic) => ({
      id: topic.id,
      name: topic.name,
      description: topic.description,
      subscribed: choices[topic.id] ?? topic.defaultSubscribed,
    })),
    unsubscribedFromAll: leftAll.some((entry) => entry.scope !== "transactional"),
  };
}

/**
 * Carries out what the recipient a token names asked for, in one batch, and records an `unsubscribed` event when
 * they left something (once per message, recipient and topic). One click leaves the message's topic when it has one,
 * else all marketing: the address is suppressed for broadcast mail (never for receipts and resets) and its contacts
 * become `unsubscribed`. The preference page sets each topic as chosen, and leaves (or rejoins) all marketing.
 * Undefined when the message no longer exists.
 */
export async function unsubscribeRecipient(
  ctx: Ctx,
  target: { messageId: string; email: string },
  choice: UnsubscribeChoice = { kind: "one_click" },
): Promise<{ accountId: string; dedupeKeys: string[]; left: { topicId: string | null }[] } | undefined> {
  const { db } = ctx;
  const message = await linkedMessage(db, target);
  if (!message) return undefined;
  const contactIds = (await db.select({ id: contacts.id }).from(contacts).where(contactsOfAddress(message.accountId, target.email)).all()).map(
    (row) => row.id,
  );
  const key = {
    accountId: message.accountId,
    domain: sendingDomain(message.fromAddress),
    provider: asProvider(message.provider) ?? providerOfDomain(recipientDomain(target.email)),
    campaignId: message.campaignId,
    stream: message.stream,
  };
  const statements: D1PreparedStatement[] = [];
  const left: { topicId: string | null }[] = [];
  const leave = (topicId: string | null) => {
    left.push({ topicId });
    const dedupeKey = `unsubscribed:${target.messageId}:${target.email.toLowerCase()}${topicId ? `:${topicId}` : ""}`;
    statements.push(
      // Counted once per recipient, message and topic: before the event is written, while it does not exist yet.
      ...(message.testMode
        ? []
        : rollupStatements(
            db,
            key,
            { unsubscribes: 1 },
            sql`NOT EXISTS (SELECT 1 FROM events WHERE account_id = ${message.accountId} AND dedupe_key = ${dedupeKey})`,
          )),
      eventStatement(db, {
        accountId: message.accountId,
        type: "unsubscribed",
        subjectId: target.messageId,
        dedupeKey,
        data: {
          message_id: target.messageId,
          campaign_id: message.campaignId,
          email: target.email,
          topic_id: topicId,
          method: choice.kind === "one_click" ? "one_click" : "preferences",
        },
      }),
    );
    return dedupeKey;
  };
  const dedupeKeys: string[] = [];
  const leaveAll = () => {
    statements.push(
      ...suppressionStatements(db, {
        accountId: message.accountId,
        email: target.email,
        reason: "unsubscribe",
        scope: "broadcast",
        sourceMessageId: target.messageId,
      }),
    );
    dedupeKeys.push(leave(null));
  };

  if (choice.kind === "one_click") {
    if (message.topicId && contactIds.length > 0) {
      for (const contactId of contactIds) statements.push(...topicChoiceStatements(db, message.accountId, contactId, { [message.topicId]: false }));
      dedupeKeys.push(leave(message.topicId));
    } else {
      leaveAll();
    }
  } else {
    const { before } = choice;
    for (const contactId of contactIds) statements.push(...topicChoiceStatements(db, message.accountId, contactId, choice.topics));
    for (const topic of before.topics) {
      if (topic.subscribed && choice.topics[topic.id] === false) dedupeKeys.push(leave(topic.id));
    }
    if (choice.allMarketing && !before.unsubscribedFromAll) leaveAll();
    if (!choice.allMarketing && before.unsubscribedFromAll) statements.push(...rejoinStatements(db, message.accountId, target.email));
  }
  if (statements.length > 0) await batch(db, statements);
  return { accountId: message.accountId, dedupeKeys, left };
}

/**
 * The person asks for marketing again on the preference page: their own unsubscribe is lifted (not a bounce, a
 * complaint or an entry the account made) and contacts it had made `unsubscribed` are subscribed again.
 */
function rejoinStatements(db: AccountDb, accountId: string, email: string): D1PreparedStatement[] {
  const key = normalizeSuppressionEmail(email);
  return [
    statement(
      db,
      db
        .update(contacts)
        .set({ status: "subscribed", updatedAt: nowIso() })
        .where(
          and(
            contactsOfAddress(accountId, email),
            eq(contacts.status, "unsubscribed"),
            sql`NOT EXISTS (SELECT 1 FROM suppressions AS s WHERE s.account_id = ${accountId} AND s.email = ${key} AND s.reason <> 'unsubscribe' AND s.scope <> 'transactional')`,
          ),
        ),
    ),
    statement(
      db,
      db.delete(suppressions).where(and(eq(suppressions.accountId, accountId), eq(suppressions.email, key), eq(suppressions.reason, "unsubscribe"))),
    ),
  ];
}
