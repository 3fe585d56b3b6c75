// Received mail at rest (docs/inbound.md): this module owns the inbound_emails queries, the R2 keys beside each row
// (raw bytes, one object per attachment, the body when it is too large for the row) and the signed download links
// of attachments that webhooks carry instead of bytes.

import { and, eq, gte, lte, sql } from "drizzle-orm";
import type { Config } from "../../config";
import { findInAccountDatabases, statement, type AccountDb, type Ctx } from "../../db/client";
import { hintedDatabase } from "../../db/hints";
import { inboundEmails } from "../../db/schema";
import { hmacSha256Hex, timingSafeEqualString } from "../../lib/crypto";
import { dateFilterBound } from "../../lib/pagination";
import { keysetPage } from "../pagination";
import { deleteOrphanedObjects } from "../../lib/r2";
import { findOwned, owned } from "../owned";

export type InboundRow = typeof inboundEmails.$inferSelect;

export const rawKey = (id: string) => `inbound/${id}/raw.eml`;
export const attachmentKey = (id: string, index: number) => `inbound/${id}/attachments/${index}`;
export const bodyKey = (id: string) => `inbound/${id}/body.json`;

/** Every R2 object stored for a row. */
export const objectKeys = (row: Pick<InboundRow, "id" | "attachments" | "bodyKey">) => [
  rawKey(row.id),
  ...row.attachments.map((_, index) => attachmentKey(row.id, index)),
  ...(row.bodyKey ? [row.bodyKey] : []),
];

export type InboundFilters = {
  to?: string;
  from?: string;
  /** YYYY-MM-DD (from the start of that day) or an ISO timestamp, inclusive. */
  receivedAfter?: string;
  /** YYYY-MM-DD (to the end of that day) or an ISO timestamp, inclusive. */
  receivedBefore?: string;
};

/** A page of the account's received mail, newest first (`limit + 1` rows, for `pageOf`). */
export async function listInbound(db: AccountDb, accountId: string, filters: InboundFilters, page: { cursor?: string; limit: number }) {
  const keyset = keysetPage(inboundEmails, page.cursor);
  return db
    .select()
    .from(inboundEmails)
    .where(
      and(
        eq(inboundEmails.accountId, accountId),
        filters.to ? eq(inboundEmails.envelopeTo, filters.to.trim().toLowerCase()) : undefined,
        filters.from ? eq(inboundEmails.fromAddress, filters.from.trim().toLowerCase()) : undefined,
        filters.receivedAfter ? gte(inboundEmails.createdAt, dateFilterBound(filters.receivedAfter, "start")) : undefined,
        filters.receivedBefore ? lte(inboundEmails.createdAt, dateFilterBound(filters.receivedBefore, "end")) : undefined,
        keyset.where,
      ),
    )
    .orderBy(...keyset.orderBy)
    .limit(page.limit + 1)
    .all();
}

export async function findInbound(db: AccountDb, accountId: string, id: string): Promise<InboundRow | undefined> {
  return findOwned(db, inboundEmails, accountId, id);
}

/** The text and HTML bodies: from the row, or from R2 when they were too large for it. */
export async function bodiesOf(env: Env, row: InboundRow): Promise<{ text: string | null; html: string | null }> {
  if (!row.bodyKey) return { text: row.text, html: row.html };
  const object = await env.BLOBS.get(row.bodyKey);
  if (!object) return { text: null, html: null };
  return object.json<{ text: string | null; html: string | null }>();
}

/** Deletes one of the account's received messages with its R2 objects; false if there is no such message. */
export async function deleteInbound(ctx: Ctx, accountId: string, id: string): Promise<boolean> {
  const { env, db } = ctx;
  const deleted = await db
    .delete(inboundEmails)
    .where(owned(inboundEmails, accountId, id))
    .returning({ id: inboundEmails.id, attachments: inboundEmails.attachments, bodyKey: inboundEmails.bodyKey })
    .get();
  if (!deleted) return false;
  await deleteOrphanedObjects(env.BLOBS, objectKeys(deleted), "inbound: objects left in R2");
  return true;
}

const INBOUND_PER_PAGE = 200;
const INBOUND_PAGES_PER_RUN = 10;

/**
 * Retention (src/domain/retention/purge.ts): received mail older than `cutoff` goes with its R2 objects, oldest first,
 * at most 2,000 per run. Its `email.received` events belong to no stored message and go with the other such events.
 */
export async function purgeInbound(ctx: Ctx, cutoff: string): Promise<number> {
  const { env, db } = ctx;
  let purged = 0;
  for (let page = 0; page < INBOUND_PAGES_PER_RUN; page++) {
    const { results } = await statement(
      db,
      sql`DELETE FROM inbound_emails WHERE id IN (SELECT id FROM inbound_emails WHERE created_at < ${cutoff} ORDER BY created_at LIMIT ${INBOUND_PER_PAGE})
        RETURNING id, attachments, body_key AS bodyKey`,
    ).all<{ id: string; attachments: string; bodyKey: string | null }>();
    await deleteOrphanedObjects(
      env.BLOBS,
      results.flatMap((row) =>
        objectKeys({ id: row.id, attachments: JSON.parse(row.attachments) as unknown[] as InboundRow["attachments"], bodyKey: row.bodyKey }),
      ),
      "inbound: objects left in R2",
    );
    purged += results.length;
    if (results.length < INBOUND_PER_PAGE) break;
  }
  return purged;
}

// ---------------------------------------------------------------------------------------------------------------
// Signed attachment links: `/inbound-files/<id>/<n>?expires=<unix>&signature=<hex>`, usable without a key until
// they expire. The signature covers the id, the index and the expiry, with a key derived from DKIM_ENCRYPTION_KEY
// under its own label, so a link can be neither extended nor pointed at another file. A link made since account
// databases also carries `db=<tag>` (src/db/hints.ts; none for `DB`), unsigned: it only says where to look first.

/** Longer than a webhook delivery's retries (about 21 hours), so the last retry's links still work. */
export const DOWNLOAD_LINK_TTL_SECONDS = 3 * 86_400;
const signatureLength = 32;
const signingKey = (config: Pick<Config, "encryptionKey">) => `inbound-files:${config.encryptionKey}`;
export const downloadPath = (id: string, index: number) => `/inbound-files/${id}/${index}`;

export async function signedDownloadUrl(
  config: Pick<Config, "encryptionKey" | "siteUrl">,
  { id, tag }: { id: string; tag: string },
  index: number,
  now = Date.now(),
): Promise<{ url: string; expiresAt: string }> {
  const expires = Math.floor(now / 1000) + DOWNLOAD_LINK_TTL_SECONDS;
  const signature = (await hmacSha256Hex(signingKey(config), `${id}.${index}.${expires}`)).slice(0, signatureLength);
  const url = new URL(downloadPath(id, index), config.siteUrl);
  url.searchParams.set("expires", String(expires));
  url.searchParams.set("signature", signature);
  if (tag !== "") url.searchParams.set("db", tag);
  return { url: url.toString(), expiresAt: new Date(expires * 1000).toISOString() };
}

/** Whether a link's signature is ours for this file and it has not expired. */
export async function downloadLinkValid(
  config: Pick<Config, "encryptionKey">,
  link: { id: string; index: number; expires: string | undefined; signature: string | undefined },
  now = Date.now(),
): Promise<boolean> {
  if (!link.expires || !/^\d{1,12}$/.test(link.expires) || !link.signature || link.signature.length > 128) return false;
  if (Number(link.expires) * 1000 < now) return false;
  const expected = (await hmacSha256Hex(signingKey(config), `${link.id}.${link.index}.${link.expires}`)).slice(0, signatureLength);
  return timingSafeEqualString(link.signature, expected);
}

/**
 * A row by id alone, for a signed link (the signature stands in for the account's key): in the database the link's
 * tag names, else in the others (a link made before account databases, or before the account moved).
 */
export async function findInboundById(env: Env, tag: string | undefined, id: string): Promise<InboundRow | undefined> {
  const found = await findInAccountDatabases(
    env,
    hintedDatabase(env, tag),
    (db) => db.select().from(inboundEmails).where(eq(inboundEmails.id, id)).get(),
    (row) => row.accountId,
  );
  return found?.found;
}
