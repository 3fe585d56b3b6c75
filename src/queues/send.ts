import { eventStatement, type EventInput } from "../domain/events/events";
import { refundStatements } from "../domain/credits/ledger";
import type { DnsRecordCheck } from "../db/schema";
import { decryptDkimKey, ed25519Selector } from "../domain/domains/domains";
import { loadContent, sendQueueMessageSchema, type MessageContent } from "../domain/sending/content";
import { importDkimPrivateKey, signDkim, type DkimPrivateKey } from "../domain/sending/dkim";
import { buildMessageId, buildMimeMessage, displayFrom, formatRfc5322Date, MimeError } from "../domain/sending/mime";
import { sendRetryPolicy } from "../domain/sending/recovery";
import { renderTemplate } from "../domain/sending/render";
import { listUnsubscribeHeaders } from "../domain/sending/unsubscribe";
import { suppressionStatements } from "../domain/suppressions/suppressions";
import { smtpTransportFromEnv } from "../domain/transport/smtp";
import type { RecipientOutcome, SendOutcome, Transport } from "../domain/transport/types";
import { dispatchEvents } from "../domain/webhooks/dispatch";
import { logError } from "../lib/log";

type MessageRow = {
  id: string;
  account_id: string;
  source: "api" | "smtp" | "campaign";
  status: string;
  from_address: string;
  from_name: string | null;
  domain_id: string;
  reply_to: string | null;
  subject: string;
  tags: string;
  metadata: string;
  content: string | null;
  content_key: string | null;
  test_mode: number;
  attempts: number;
};
type RecipientRow = { message_id: string; email: string; status: string };
type DomainKeyRow = {
  id: string;
  name: string;
  dkim_selector: string;
  dkim_private_key: string;
  dkim_ed25519_private_key: string | null;
  records: string;
};
/** The domain's signing keys: RSA always, Ed25519 once its DNS record has been found. */
type SigningKeys = { rsa: DkimPrivateKey; ed25519?: DkimPrivateKey };

const encoder = new TextEncoder();

/** What happened to one message in this batch: the D1 statements recording it and what to tell the queue. */
type Disposition = { statements: D1PreparedStatement[]; events: EventInput[]; retryDelaySeconds?: number };

const connectionsPerBatch = (env: Env) => Math.max(1, Math.min(10, Number(env.SMTP_CONNECTIONS_PER_BATCH) || 5));

/**
 * Delivers a batch over a few reused SMTP connections (RSET between messages). A message is sent only while its row says
 * `queued`/`deferred`, so an at-least-once redelivery of an already handled message does nothing, and the outcome
 * of the whole batch is written in one D1 batch before any queue message is acknowledged.
 */
export async function consumeSendBatch(
  batch: MessageBatch<unknown>,
  env: Env,
  openTransport: () => Transport = () => smtpTransportFromEnv(env),
): Promise<void> {
  const wanted = new Map<string, Message<unknown>>();
  for (const queued of batch.messages) {
    const parsed = sendQueueMessageSchema.safeParse(queued.body);
    if (parsed.success) wanted.set(parsed.data.message_id, queued);
    else {
      logError("send queue: unreadable message body dropped", { body: queued.body });
      queued.ack();
    }
  }
  if (wanted.size === 0) return;

  // Round trip 1 claims every message that still has recipients to deliver (queued/deferred → sending) and reads
  // what sending needs. The claim is one conditional UPDATE, so of two consumers holding copies of one queue
  // message (queues deliver at least once) only one gets the row back, and a redelivery after the outcome is
  // recorded finds nothing to claim. A claim that fails sends nothing and the batch is retried.
  const ids = JSON.stringify([...wanted.keys()]);
  const [claimedRows, recipientRows, domainRows] = await env.DB.batch([
    env.DB.prepare(
      `UPDATE messages SET status = 'sending', claimed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
       WHERE id IN (SELECT value FROM json_each(?1)) AND status IN ('queued', 'deferred')
         AND EXISTS (SELECT 1 FROM message_recipients r WHERE r.message_id = messages.id AND r.status IN ('queued', 'deferred'))
       RETURNING *`,
    ).bind(ids),
    env.DB.prepare(
      `SELECT message_id, email, status FROM message_recipients
       WHERE message_id IN (SELECT value FROM json_each(?1)) AND status IN ('queued', 'deferred')`,
    ).bind(ids),
    env.DB.prepare(
      `SELECT id, name, dkim_selector, dkim_private_key, dkim_ed25519_private_key, records FROM domains
       WHERE id IN (SELECT domain_id FROM messages WHERE id IN (SELECT value FROM json_each(?1)))`,
    ).bind(ids),
  ]);
  const recipientsOf = new Map<string, string[]>();
  for (const row of (recipientRows?.results ?? []) as RecipientRow[]) {
    recipientsOf.set(row.message_id, [...(recipientsOf.get(row.message_id) ?? []), row.email]);
  }
  const domains = new Map(((domainRows?.results ?? []) as DomainKeyRow[]).map((row) => [row.id, row]));
  // Keys are decrypted and imported once per domain per batch.
  const keys = new Map<string, Promise<SigningKeys>>();
  const signingKeys = (domain: DomainKeyRow) => {
    let key = keys.get(domain.id);
    if (!key) {
      key = loadSigningKeys(env, domain);
      keys.set(domain.id, key);
    }
    return key;
  };

  const dispositions = new Map<string, Disposition>();
  const deliverable: { message: MessageRow; pending: string[] }[] = [];
  for (const message of (claimedRows?.results ?? []) as MessageRow[]) {
    const pending = recipientsOf.get(message.id) ?? [];
    if (message.test_mode) dispositions.set(message.id, simulate(env, message, pending));
    else deliverable.push({ message, pending });
  }

  // A few connections share the batch (as a pooled SMTP client does); each is reused for its share of the
  // messages with RSET in between, so a batch opens at most `lanes` connections, never one per message.
  const laneCount = Math.min(connectionsPerBatch(env), deliverable.length);
  const lanes = Array.from({ length: laneCount }, (_, lane) => deliverable.filter((_, i) => i % laneCount === lane));
  await Promise.all(
    lanes.map(async (work) => {
      const transport = openTransport();
      try {
        for (const { message, pending } of work) {
          const domain = domains.get(message.domain_id);
          let outcome: SendOutcome;
          try {
            if (!domain) throw new MimeError("invalid_address", "from", "the sending domain was removed");
            const content = await loadContent(env, { content: message.content, contentKey: message.content_key });
            const raw = await buildSignedMessage(env, message, content, domain, await signingKeys(domain));
            outcome = await transport.send({ mailFrom: message.from_address, rcptTo: pending }, raw);
          } catch (error) {
            if (error instanceof MimeError) {
              // The message itself is unsendable: retrying cannot help.
              outcome = { ok: false, kind: "permanent", stage: "message", connectionError: false, code: 554, response: `554 5.6.0 ${error.message}` };
            } else {
              // Our side failed for this message (content missing in R2, a key that will not decrypt): retry this one
              // alone, and still record what the rest of the batch did, so nothing already sent is sent again.
              logError("send consumer: preparing a message failed", { message_id: message.id, error: String(error) });
              outcome = { ok: false, kind: "temporary", stage: "message", connectionError: false, code: 0, response: `451 4.3.0 not sent: ${String(error)}` };
            }
          }
          dispositions.set(message.id, recordOutcome(env, message, pending, outcome));
        }
      } finally {
        await transport.close();
      }
    }),
  );

  const statements = [...dispositions.values()].flatMap((disposition) => disposition.statements);
  if (statements.length > 0 && !(await recordWithRetries(env, statements))) {
    // The messages were handed over (or refused) but the outcome could not be written. Redelivering the queue
    // messages could not help: their rows say `sending`, so nothing would be sent again, and the outcome is gone.
    // They are acknowledged; the cron turns the stale claims into `unknown` (see sweepStaleClaims).
    for (const queued of wanted.values()) queued.ack();
    return;
  }
  await dispatchAll(env, [...dispositions.values()].flatMap((disposition) => disposition.events));

  for (const [id, queued] of wanted) {
    const delaySeconds = dispositions.get(id)?.retryDelaySeconds;
    if (delaySeconds === undefined) queued.ack();
    else queued.retry({ delaySeconds });
  }
}

const outcomeWriteDelaysMs = [250, 500, 1_000, 2_000, 4_000];

/**
 * Writes a batch's outcome, retrying a failing D1 (a locked or briefly unavailable database) for about 8 s: the
 * messages are already with the provider, and a lost outcome leaves them `unknown`. Every statement is idempotent
 * (absolute values, guarded refunds, de-duplicated events), so a write that did apply but reported an error is
 * safe to repeat. False when every attempt failed.
 */
async function recordWithRetries(env: Env, statements: D1PreparedStatement[]): Promise<boolean> {
  for (let attempt = 0; ; attempt++) {
    try {
      await env.DB.batch(statements);
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

async function dispatchAll(env: Env, events: EventInput[]) {
  const byAccount = new Map<string, string[]>();
  for (const event of events) byAccount.set(event.accountId, [...(byAccount.get(event.accountId) ?? []), event.dedupeKey]);
  await Promise.all([...byAccount].map(([accountId, keys]) => dispatchEvents(env, accountId, keys)));
}

async function loadSigningKeys(env: Env, domain: DomainKeyRow): Promise<SigningKeys> {
  const rsa = await importDkimPrivateKey(await decryptDkimKey({ dkimPrivateKey: domain.dkim_private_key }, env));
  const records = JSON.parse(domain.records) as DnsRecordCheck[];
  const published = records.some((record) => record.purpose === "dkim_ed25519" && record.status === "verified");
  if (!domain.dkim_ed25519_private_key || !published) return { rsa };
  return { rsa, ed25519: await importDkimPrivateKey(await decryptDkimKey({ dkimPrivateKey: domain.dkim_ed25519_private_key }, env)) };
}

async function buildSignedMessage(env: Env, message: MessageRow, content: MessageContent, domain: DomainKeyRow, keys: SigningKeys): Promise<Uint8Array> {
  let unsigned: Uint8Array;
  if (content.kind === "raw") {
    unsigned = withRequiredHeaders(Uint8Array.from(atob(content.raw), (char) => char.charCodeAt(0)), message);
  } else {
    const variables = content.variables;
    unsigned = encoder.encode(
      buildMimeMessage({
        from: { name: message.from_name ?? undefined, address: message.from_address },
        to: content.to,
        replyTo: message.reply_to ?? undefined,
        subject: message.subject,
        html: content.html === undefined ? undefined : renderTemplate(content.html, variables, { html: true }),
        text: content.text === undefined ? undefined : renderTemplate(content.text, variables, { html: false }),
        attachments: content.attachments.map((attachment) => ({
          filename: attachment.filename,
          contentBase64: attachment.content,
          contentType: attachment.content_type,
        })),
        // One-click unsubscribe names one recipient, so it is only offered on single-recipient messages.
        headers: content.to.length === 1 ? await listUnsubscribeHeaders(env, message.id, content.to[0]!) : undefined,
        messageId: buildMessageId(message.id, message.from_address),
        date: new Date(),
      }),
    );
  }
  // Both signatures cover the same unsigned message; receivers that do not know ed25519-sha256 ignore that one.
  const signature =
    (keys.ed25519 ? await signDkim(unsigned, { domain: domain.name, selector: ed25519Selector(domain.dkim_selector), privateKey: keys.ed25519 }) : "") +
    (await signDkim(unsigned, { domain: domain.name, selector: domain.dkim_selector, privateKey: keys.rsa }));
  const signatureBytes = encoder.encode(signature);
  const signed = new Uint8Array(signatureBytes.length + unsigned.length);
  signed.set(signatureBytes, 0);
  signed.set(unsigned, signatureBytes.length);
  return signed;
}

/** A relayed message keeps its own headers; only a missing Message-ID or Date is added (RFC 5322 requires Date). */
function withRequiredHeaders(raw: Uint8Array, message: MessageRow): Uint8Array {
  const text = new TextDecoder("latin1").decode(raw.subarray(0, Math.min(raw.length, 64 * 1024)));
  const headerEnd = text.search(/\r?\n\r?\n/);
  const header = headerEnd >= 0 ? text.slice(0, headerEnd) : text;
  const add: string[] = [];
  if (!/^message-id:/im.test(header)) add.push(`Message-ID: ${buildMessageId(message.id, message.from_address)}`);
  if (!/^date:/im.test(header)) add.push(`Date: ${formatRfc5322Date(new Date())}`);
  if (add.length === 0) return raw;
  const prefix = encoder.encode(`${add.join("\r\n")}\r\n`);
  const out = new Uint8Array(prefix.length + raw.length);
  out.set(prefix, 0);
  out.set(raw, prefix.length);
  return out;
}

function eventData(message: MessageRow, extra: Record<string, unknown>) {
  return {
    message_id: message.id,
    from: displayFrom(message.from_name, message.from_address),
    subject: message.subject,
    source: message.source,
    tags: JSON.parse(message.tags) as string[],
    metadata: JSON.parse(message.metadata) as Record<string, string>,
    ...extra,
  };
}

/** 5.7.x is policy (content filter, reputation, authentication): the address may well exist. */
function bounceType(rejection: { enhanced?: string }): "hard" | "blocked" {
  return rejection.enhanced?.startsWith("5.7.") ? "blocked" : "hard";
}

/** Turns the SMTP outcome for the pending recipients into state changes, refunds, suppressions and events. */
function recordOutcome(env: Env, message: MessageRow, pending: string[], outcome: SendOutcome, final = false): Disposition {
  const attempt = message.attempts + 1;
  // Recipients the server did not answer for individually share the outcome of the whole transaction. A failed
  // transaction delivered to nobody, whatever RCPT said.
  const individual = new Map((outcome.perRecipient ?? []).filter((result) => outcome.ok || !result.ok).map((result) => [result.recipient, result]));
  const perRecipient: RecipientOutcome[] = pending.map(
    (recipient) =>
      individual.get(recipient) ??
      (outcome.ok
        ? { recipient, ok: true, code: outcome.code, response: outcome.response }
        : { recipient, ok: false, kind: outcome.kind, stage: outcome.stage, code: outcome.code, enhanced: outcome.enhanced, response: outcome.response }),
  );
  const accepted = perRecipient.filter((r) => r.ok).map((r) => r.recipient);
  const rejected = perRecipient.filter((r): r is Extract<RecipientOutcome, { ok: false }> => !r.ok);
  const { baseSeconds, maxAttempts } = sendRetryPolicy(env);
  const canRetry = !final && attempt < maxAttempts;
  const bounced = rejected.filter((r) => r.kind === "permanent");
  // A temporary refusal becomes final once the attempts are used up.
  const deferred = canRetry ? rejected.filter((r) => r.kind === "temporary") : [];
  const failed = canRetry ? [] : rejected.filter((r) => r.kind === "temporary");

  const statements: D1PreparedStatement[] = [];
  const events: EventInput[] = [];
  const setRecipients = (emails: string[], status: string, response: string) => {
    if (emails.length === 0) return;
    statements.push(
      env.DB.prepare(
        `UPDATE message_recipients SET status = ?1, smtp_response = ?2, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
         WHERE message_id = ?3 AND email IN (SELECT value FROM json_each(?4)) AND status IN ('queued', 'deferred', 'unknown')`,
      ).bind(status, response, message.id, JSON.stringify(emails)),
    );
  };
  const refund = (email: string, why: string) => {
    if (message.test_mode) return;
    statements.push(...refundStatements(env.DB, { accountId: message.account_id, balance: "send", amount: 1, referenceId: `${message.id}:${email}`, note: why }));
  };

  if (accepted.length > 0) {
    const response = perRecipient.find((r) => r.ok)?.response ?? outcome.response;
    setRecipients(accepted, "sent", response);
    events.push({
      accountId: message.account_id,
      type: "relay.sent",
      subjectId: message.id,
      dedupeKey: `relay.sent:${message.id}:${attempt}`,
      data: eventData(message, { recipients: accepted, smtp_response: response }),
    });
  }
  for (const rejection of bounced) {
    setRecipients([rejection.recipient], "bounced", rejection.response);
    refund(rejection.recipient, "permanent failure");
    // 5.1.x: the mailbox or domain does not exist; sending there again would only hurt the sender's reputation.
    // Only when the refusal is about this recipient: its own RCPT reply, or a transaction it was alone in (a 5.1.x
    // to MAIL FROM is about the sender).
    const stage = rejection.stage ?? "rcpt";
    const aboutRecipient = stage === "rcpt" || ((stage === "data" || stage === "message") && pending.length === 1);
    if (aboutRecipient && rejection.enhanced?.startsWith("5.1.")) {
      statements.push(...suppressionStatements(env.DB, { accountId: message.account_id, email: rejection.recipient, reason: "bounce", sourceMessageId: message.id }));
    }
    events.push({
      accountId: message.account_id,
      type: "relay.bounced",
      subjectId: message.id,
      dedupeKey: `relay.bounced:${message.id}:${rejection.recipient}`,
      data: eventData(message, { recipient: rejection.recipient, bounce_type: bounceType(rejection), smtp_code: rejection.code, enhanced_code: rejection.enhanced ?? null, smtp_response: rejection.response }),
    });
  }
  setRecipients(deferred.map((r) => r.recipient), "deferred", deferred[0]?.response ?? "");
  for (const rejection of failed) {
    setRecipients([rejection.recipient], "failed", rejection.response);
    refund(rejection.recipient, "delivery failed after retries");
  }
  if (failed.length > 0) {
    events.push({
      accountId: message.account_id,
      type: "relay.failed",
      subjectId: message.id,
      dedupeKey: `relay.failed:${message.id}`,
      data: eventData(message, { recipients: failed.map((r) => r.recipient), attempts: attempt, smtp_response: failed[0]!.response }),
    });
  }

  // The message's status follows all its recipients, including those an earlier attempt already sent.
  statements.push(
    env.DB.prepare(
      `UPDATE messages SET attempts = ?1, smtp_response = ?2,
         sent_at = CASE WHEN ?3 THEN COALESCE(sent_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) ELSE sent_at END,
         status = (SELECT CASE
             WHEN SUM(status IN ('queued', 'deferred')) > 0 THEN 'deferred'
             WHEN SUM(status IN ('sent', 'delivered', 'complained')) > 0 THEN 'sent'
             WHEN SUM(status = 'unknown') > 0 THEN 'unknown'
             WHEN SUM(status = 'bounced') > 0 THEN 'bounced'
             ELSE 'failed' END
           FROM message_recipients WHERE message_id = ?4 AND status != 'suppressed'),
         updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
       WHERE id = ?4`,
    ).bind(attempt, outcome.response, accepted.length > 0 ? 1 : 0, message.id),
  );
  for (const event of events) statements.push(eventStatement(env.DB, event));
  return { statements, events, retryDelaySeconds: deferred.length > 0 ? baseSeconds * 2 ** (attempt - 1) : undefined };
}

/**
 * Test mode (sk_test_ keys): nothing leaves the system. The recipient's local part picks the outcome, as with
 * SES's mailbox simulator: `bounced@…` bounces (5.1.1), `complained@…` is delivered then complains, anything else
 * is delivered. Suppression lists are not touched.
 */
function simulate(env: Env, message: MessageRow, pending: string[]): Disposition {
  const statements: D1PreparedStatement[] = [];
  const events: EventInput[] = [];
  const localPart = (email: string) => email.slice(0, email.lastIndexOf("@")).toLowerCase();
  const bounced = pending.filter((email) => localPart(email) === "bounced");
  const delivered = pending.filter((email) => localPart(email) !== "bounced");
  const event = (type: EventInput["type"], key: string, extra: Record<string, unknown>) =>
    events.push({ accountId: message.account_id, type, subjectId: message.id, dedupeKey: `${type}:${message.id}${key}`, data: eventData(message, { ...extra, test: true }) });

  if (delivered.length > 0) {
    statements.push(
      env.DB.prepare(`UPDATE message_recipients SET status = 'delivered', smtp_response = '250 2.0.0 simulated' WHERE message_id = ?1 AND email IN (SELECT value FROM json_each(?2))`).bind(
        message.id,
        JSON.stringify(delivered),
      ),
    );
    event("relay.sent", ":1", { recipients: delivered, smtp_response: "250 2.0.0 simulated" });
    for (const email of delivered) event("relay.delivered", `:${email}`, { recipient: email });
    for (const email of delivered.filter((address) => localPart(address) === "complained")) event("relay.complained", `:${email}`, { recipient: email });
  }
  for (const email of bounced) {
    statements.push(
      env.DB.prepare(`UPDATE message_recipients SET status = 'bounced', smtp_response = '550 5.1.1 simulated bounce' WHERE message_id = ?1 AND email = ?2`).bind(message.id, email),
    );
    event("relay.bounced", `:${email}`, { recipient: email, bounce_type: "hard", smtp_code: 550, enhanced_code: "5.1.1", smtp_response: "550 5.1.1 simulated bounce" });
  }
  statements.push(
    env.DB.prepare(
      `UPDATE messages SET status = ?1, attempts = attempts + 1, smtp_response = ?2, sent_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
         updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?3`,
    ).bind(delivered.length > 0 ? "delivered" : "bounced", delivered.length > 0 ? "250 2.0.0 simulated" : "550 5.1.1 simulated bounce", message.id),
  );
  for (const item of events) statements.push(eventStatement(env.DB, item));
  return { statements, events };
}

/**
 * Dead-letter queue: the queue gave up on these messages (the consumer kept throwing). They must not stay `queued`
 * forever: mark what is still pending failed and refund it.
 */
export async function consumeSendDeadLetters(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const ids = batch.messages.flatMap((queued) => {
    const parsed = sendQueueMessageSchema.safeParse(queued.body);
    return parsed.success ? [parsed.data.message_id] : [];
  });
  if (ids.length > 0) {
    const marks = ids.map((_, i) => `?${i + 1}`).join(", ");
    const [messageRows, recipientRows] = await env.DB.batch([
      env.DB.prepare(`SELECT * FROM messages WHERE id IN (${marks}) AND status IN ('queued', 'deferred')`).bind(...ids),
      env.DB.prepare(`SELECT message_id, email, status FROM message_recipients WHERE message_id IN (${marks}) AND status IN ('queued', 'deferred')`).bind(...ids),
    ]);
    const pendingOf = new Map<string, string[]>();
    for (const row of (recipientRows?.results ?? []) as RecipientRow[]) pendingOf.set(row.message_id, [...(pendingOf.get(row.message_id) ?? []), row.email]);
    const dispositions = ((messageRows?.results ?? []) as MessageRow[]).map((message) =>
      recordOutcome(
        env,
        message,
        pendingOf.get(message.id) ?? [],
        { ok: false, kind: "temporary", stage: "connect", connectionError: true, code: 0, response: "delivery abandoned after repeated processing errors" },
        true,
      ),
    );
    const statements = dispositions.flatMap((disposition) => disposition.statements);
    if (statements.length > 0) await env.DB.batch(statements);
    await dispatchAll(env, dispositions.flatMap((disposition) => disposition.events));
  }
  batch.ackAll();
}
