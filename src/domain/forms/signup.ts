// A sign-up through a form (docs/forms.md). Without double opt-in the contact is subscribed at once, its consent
// recorded with the poster's IP. With it, a new contact is `pending` (an existing one keeps its status) and gets a
// confirmation email; following its link subscribes it to the form's lists and topics and records the consent.
// A public form lets anyone type anyone's address, so a sign-up never overwrites what a contact already has, and
// nothing but the confirmation (whose link only the mailbox owner gets) joins an existing contact to anything.

import { and, eq, sql } from "drizzle-orm";
import type { Config } from "../../config";
import { sqlNow, statement, type AccountDb, batch, type Ctx } from "../../db/client";
import { tagOf } from "../../db/hints";
import { contacts, senders, suppressions } from "../../db/schema";
import { base64ToBytes, bytesToBase64Url, hmacSha256Hex, timingSafeEqualString } from "../../lib/crypto";
import { newId } from "../../lib/ids";
import { findAccount } from "../accounts/accounts";
import type { ContactAddress } from "../contacts/email";
import { contactTextFields, type ContactTextField } from "../contacts/contacts";
import { acceptMessage } from "../sending/accept";
import { blocksBroadcastSql, scopeBlocks, suppressionsAmongQuery } from "../suppressions/suppressions";
import { locatePublicForm, type FormRow } from "./forms";

type Keys = Pick<Config, "encryptionKey">;

/** How long a confirmation link works. */
export const CONFIRMATION_TTL_SECONDS = 7 * 24 * 60 * 60;

// Signed with a key derived from DKIM_ENCRYPTION_KEY (already a secret) under its own label, so a link cannot be edited
// to confirm another address or form, nor outlive its expiry.
const signingKey = (config: Keys) => `form-confirmation:${config.encryptionKey}`;
const signatureLength = 32;

/**
 * The link's token: the form, the address (its contact key), when it was issued, and the tag of the account database
 * the form is in (src/db/hints.ts; tokens made before account databases have none), signed.
 */
export async function confirmationToken(
  config: Keys,
  form: { formId: string; tag: string },
  emailKey: string,
  issuedAt = new Date(),
): Promise<string> {
  const payload = bytesToBase64Url(
    new TextEncoder().encode(JSON.stringify([form.formId, emailKey, Math.floor(issuedAt.getTime() / 1000), form.tag])),
  );
  const signature = (await hmacSha256Hex(signingKey(config), payload)).slice(0, signatureLength);
  return `${payload}.${signature}`;
}

export type ConfirmationTarget = { formId: string; emailKey: string; issuedAt: Date; tag: string | undefined };
export type ReadToken = { kind: "valid"; target: ConfirmationTarget } | { kind: "expired" } | { kind: "invalid" };

export async function readConfirmationToken(config: Keys, token: string, now = new Date()): Promise<ReadToken> {
  const [payload, signature, extra] = token.split(".");
  if (!payload || !signature || extra !== undefined || payload.length > 1000) return { kind: "invalid" };
  const expected = (await hmacSha256Hex(signingKey(config), payload)).slice(0, signatureLength);
  if (!(await timingSafeEqualString(signature, expected))) return { kind: "invalid" };
  let decoded: unknown;
  try {
    decoded = JSON.parse(new TextDecoder().decode(base64ToBytes(payload)));
  } catch {
    return { kind: "invalid" };
  }
  if (!Array.isArray(decoded)) return { kind: "invalid" };
  const [formId, emailKey, issued, tag] = decoded as unknown[];
  if (typeof formId !== "string" || typeof emailKey !== "string" || typeof issued !== "number") return { kind: "invalid" };
  if (!(decoded.length === 3 || (decoded.length === 4 && typeof tag === "string"))) return { kind: "invalid" };
  if (now.getTime() > (issued + CONFIRMATION_TTL_SECONDS) * 1000) return { kind: "expired" };
  return { kind: "valid", target: { formId, emailKey, issuedAt: new Date(issued * 1000), tag: typeof tag === "string" ? tag : undefined } };
}

export const confirmationUrl = (siteUrl: string, token: string) => new URL(`/subscribe/confirm/${token}`, siteUrl).href;

const contactOf = (accountId: string, emailKey: string) => and(eq(contacts.accountId, accountId), eq(contacts.emailKey, emailKey));

/**
 * Statements that subscribe the contact of an address through a form, for one batch: a `pending` contact becomes
 * `subscribed`; with `confirmed` (the address owner followed the link) their own unsubscribe is lifted too and an
 * `unsubscribed` contact comes back, unless a bounce, complaint or the account's own entry keeps marketing away. A
 * contact that ends up subscribed joins the form's lists and topics and gets the consent record; any other is left
 * as it was, so a form cannot put back someone who left. The contact key is also the address's suppression key
 * (contacts/email.ts).
 */
function subscribeStatements(db: AccountDb, form: FormRow, emailKey: string, ip: string | null, confirmed: boolean): D1PreparedStatement[] {
  const accountId = form.accountId;
  const comesBack = confirmed
    ? sql` OR (${contacts.status} = 'unsubscribed' AND NOT EXISTS (SELECT 1 FROM suppressions AS s
        WHERE s.account_id = ${accountId} AND s.email = ${emailKey} AND ${blocksBroadcastSql}))`
    : sql``;
  const subscribedContact = sql`SELECT c.id FROM contacts AS c WHERE c.account_id = ${accountId} AND c.email_key = ${emailKey} AND c.status = 'subscribed'`;
  return [
    ...(confirmed
      ? [
          statement(
            db,
            db
              .delete(suppressions)
              .where(and(eq(suppressions.accountId, accountId), eq(suppressions.email, emailKey), eq(suppressions.reason, "unsubscribe"))),
          ),
        ]
      : []),
    statement(
      db,
      db
        .update(contacts)
        .set({ status: "subscribed", updatedAt: sql`(${sqlNow})` })
        .where(and(contactOf(accountId, emailKey), sql`(${contacts.status} = 'pending'${comesBack})`)),
    ),
    statement(
      db,
      db
        .update(contacts)
        .set({ consentFormId: form.id, consentedAt: sql`(${sqlNow})`, consentIp: ip })
        .where(and(contactOf(accountId, emailKey), eq(contacts.status, "subscribed"))),
    ),
    // Only lists and topics that are still the account's: one deleted since the form was saved is skipped.
    statement(
      db,
      sql`INSERT INTO list_members (list_id, contact_id)
        SELECT l.id, (${subscribedContact}) FROM lists AS l
        WHERE l.account_id = ${accountId} AND l.id IN (SELECT value FROM json_each(${JSON.stringify(form.lists)}))
          AND EXISTS (${subscribedContact})
        ON CONFLICT (list_id, contact_id) DO NOTHING`,
    ),
    statement(
      db,
      sql`INSERT INTO contact_topics (contact_id, topic_id, account_id, subscribed, updated_at)
        SELECT (${subscribedContact}), t.id, ${accountId}, 1, ${sqlNow} FROM topics AS t
        WHERE t.account_id = ${accountId} AND t.id IN (SELECT value FROM json_each(${JSON.stringify(form.topics)}))
          AND EXISTS (${subscribedContact})
        ON CONFLICT (contact_id, topic_id) DO UPDATE SET subscribed = 1, updated_at = excluded.updated_at`,
    ),
  ];
}

/**
 * Creates the contact of a sign-up with `status`, or leaves an existing one's status alone and only fills the fields
 * it lacks: an address typed into a public form is not proof enough to change what the account already holds.
 */
function signUpContactStatement(
  db: AccountDb,
  accountId: string,
  address: ContactAddress,
  fields: Partial<Record<ContactTextField, string>>,
  status: "pending" | "subscribed",
): D1PreparedStatement {
  const given = contactTextFields.filter((field) => fields[field]);
  const columns = given.map((field) => sql.raw(`, ${field}`));
  const values = given.map((field) => sql`, ${fields[field]}`);
  const fills = given.map((field) => sql.raw(`${field} = coalesce(contacts.${field}, excluded.${field}), `));
  return statement(
    db,
    sql`INSERT INTO contacts (id, account_id, email, email_key, custom_fields, status${sql.join(columns)})
      VALUES (${newId("con")}, ${accountId}, ${address.email}, ${address.key}, '{}', ${status}${sql.join(values)})
      ON CONFLICT (account_id, email_key) DO UPDATE SET ${sql.join(fills)}updated_at = ${sqlNow}`,
  );
}

export type SignUp = {
  form: FormRow;
  address: ContactAddress;
  fields: Partial<Record<ContactTextField, string>>;
  /** The poster's IP (CF-Connecting-IP): the consent record of a form without double opt-in. */
  ip: string | null;
};

/** Done (or quietly dropped, for an address that may not get the form's mail), or the confirmation could not be sent. */
export type SignUpOutcome = { kind: "done" } | { kind: "not_sent"; reason: string };

/**
 * A sign-up through a form. An address whose suppressions keep away the mail it would get (the confirmation, which is
 * transactional; or, without double opt-in, marketing) is left alone and answered like any other, so the public
 * endpoint does not tell who is on the list. The confirmation email goes through acceptMessage: charged like a send.
 */
export async function signUp(ctx: Ctx, config: Pick<Config, "encryptionKey" | "siteUrl">, request: SignUp): Promise<SignUpOutcome> {
  const { db } = ctx;
  const { form, address } = request;
  const [entries, sender] = await db.batch([
    suppressionsAmongQuery(db, form.accountId, [address.suppressionKey]),
    db
      .select()
      .from(senders)
      .where(and(eq(senders.accountId, form.accountId), eq(senders.id, form.senderId ?? ""))),
  ]);
  const stream = form.doubleOptIn ? "transactional" : "broadcast";
  if (entries.some((entry) => scopeBlocks(entry.scope, stream))) return { kind: "done" };

  if (!form.doubleOptIn) {
    await batch(db, [
      signUpContactStatement(db, form.accountId, address, request.fields, "subscribed"),
      ...subscribeStatements(db, form, address.key, request.ip, false),
    ]);
    return { kind: "done" };
  }

  await signUpContactStatement(db, form.accountId, address, request.fields, "pending").run();
  const from = sender[0];
  if (!from) return { kind: "not_sent", reason: `the form's sender ${form.senderId} no longer exists` };
  const account = await findAccount(ctx.shared, form.accountId);
  if (!account) return { kind: "not_sent", reason: "the form's account no longer exists" };
  const url = confirmationUrl(config.siteUrl, await confirmationToken(config, { formId: form.id, tag: tagOf(db) }, address.key));
  const variables = { sender: from.name, url, email: address.email };
  const outcome = await acceptMessage(
    ctx,
    { account, testMode: false },
    {
      source: "api",
      stream: "transactional",
      from: { name: from.name, address: from.email },
      recipients: [address.email],
      replyTo: from.replyTo ?? undefined,
      tags: ["form-confirmation"],
      metadata: { form_id: form.id },
      compose: () => ({
        subject: `Confirm your subscription to ${from.name}`.replace(/[\r\n]+/g, " "),
        content: {
          kind: "compose",
          to: [address.email],
          html: confirmationHtml,
          text: confirmationText,
          variables,
          attachments: [],
        },
      }),
    },
  );
  if (outcome.kind === "accepted") return { kind: "done" };
  const reason =
    outcome.kind === "refused"
      ? outcome.message
      : outcome.kind === "domain_not_verified"
        ? `the sender's domain ${outcome.domain} is not verified`
        : outcome.kind;
  return { kind: "not_sent", reason };
}

// Rendered by the send consumer with the variables above (values HTML-escaped in the HTML part).
const confirmationText = `Please confirm that you want to receive email from {{sender}} at {{email}}:

{{url}}

If you did not sign up, ignore this email: you will not be subscribed. The link works for 7 days.
`;
const confirmationHtml = `<p>Please confirm that you want to receive email from {{sender}} at {{email}}.</p>
<p><a href="{{url}}">Confirm my subscription</a></p>
<p>If you did not sign up, ignore this email: you will not be subscribed. The link works for 7 days.</p>
`;

export type Confirmation =
  | { kind: "invalid" }
  | { kind: "expired" }
  /** The link was followed before: its contact gave its consent through the form since the link was issued. */
  | { kind: "already_confirmed"; email: string }
  | { kind: "ready"; email: string }
  | { kind: "confirmed"; email: string; subscribed: boolean };

type Resolved = { state: Exclude<Confirmation, { kind: "confirmed" }>; form?: FormRow; target?: ConfirmationTarget; ctx?: Ctx };

/** What a link stands for, and the context of its form's account database. `unrouted`: the request's context. */
async function resolve(unrouted: Ctx, config: Keys, token: string): Promise<Resolved> {
  const read = await readConfirmationToken(config, token);
  if (read.kind !== "valid") return { state: read };
  const { target } = read;
  const located = await locatePublicForm(unrouted, target.tag, target.formId);
  // A form deleted since, or a contact the account deleted: the link no longer stands for anything.
  if (!located) return { state: { kind: "invalid" } };
  const { form, ctx } = located;
  const contact = await ctx.db
    .select({ email: contacts.email, consentFormId: contacts.consentFormId, consentedAt: contacts.consentedAt })
    .from(contacts)
    .where(contactOf(form.accountId, target.emailKey))
    .get();
  if (!contact) return { state: { kind: "invalid" } };
  const used = contact.consentFormId === form.id && contact.consentedAt !== null && contact.consentedAt >= target.issuedAt.toISOString();
  return { state: { kind: used ? "already_confirmed" : "ready", email: contact.email }, form, target, ctx };
}

/** What a confirmation link stands for, before it is used: the GET page's content. */
export async function confirmationState(ctx: Ctx, config: Keys, token: string): Promise<Confirmation> {
  return (await resolve(ctx, config, token)).state;
}

/**
 * Follows a confirmation link (the POST of its page): the contact is subscribed to the form's lists and topics with
 * its consent record (this form, now, the confirming IP). A link already used says so and changes nothing.
 */
export async function confirmSignUp(unrouted: Ctx, config: Keys, token: string, ip: string | null): Promise<Confirmation> {
  const { state, form, target, ctx } = await resolve(unrouted, config, token);
  if (state.kind !== "ready" || !form || !target || !ctx) return state;
  const { db } = ctx;
  const results = await batch(db, [
    ...subscribeStatements(db, form, target.emailKey, ip, true),
    statement(db, db.select({ status: contacts.status }).from(contacts).where(contactOf(form.accountId, target.emailKey))),
  ]);
  const after = results.at(-1)?.results[0] as { status: string } | undefined;
  return { kind: "confirmed", email: state.email, subscribed: after?.status === "subscribed" };
}
