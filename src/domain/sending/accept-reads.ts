// The accept path's first D1 round trip (accept.ts): everything its decision needs, read in one batch, and what the
// rows say. A batch of messages reads each of its from domains and templates once, and the suppressions of all its
// recipients in one query.

import { statement, batch, type Ctx } from "../../db/client";
import type { suppressions, templates } from "../../db/schema";
import { verifiedDomainsOf, type VerifiedDomain } from "../domains/lookup";
import { scopeBlocks, suppressionsAmongQuery, type MessageStream } from "../suppressions/suppressions";
import { templateContentQuery } from "../templates/templates";
import { storedResponseStatement, type Idempotency, type StoredResponse } from "./idempotency";
import { domainOf } from "./mime";

export type StoredTemplate = Pick<typeof templates.$inferSelect, "subject" | "html" | "text">;

/** What the reads found. */
export type Known = {
  /** Per stream, the suppressed addresses among the recipients (normalized) and why each is suppressed. */
  suppressedIn: Record<MessageStream, Map<string, string>>;
  /** The answer already stored for the Idempotency-Key, if any. */
  previous: StoredResponse | undefined;
  /** The account's verified domain of each from address (lower-cased domain name), undefined when it has none. */
  domainOfName: Map<string, VerifiedDomain | undefined>;
  /** The templates named, by id; undefined for an id the account does not have. */
  templateOf: Map<string, StoredTemplate | undefined>;
};

/** The lower-cased domain of a from address: the key of `Known.domainOfName`. */
export const fromDomain = (address: string) => domainOf(address).toLowerCase();

/**
 * Round trip 1: the recipients' suppressions, the Idempotency-Key's stored answer and the templates, in the account's
 * database; beside it, the from domains, from `DB` unless this isolate read them lately (domains/lookup.ts).
 */
export async function readForDecision(
  ctx: Ctx,
  accountId: string,
  request: { fromAddresses: string[]; templateIds: string[]; recipients: string[]; idempotency: Idempotency | undefined },
): Promise<Known> {
  const { db } = ctx;
  const { idempotency } = request;
  const domainNames = [...new Set(request.fromAddresses.map(fromDomain))];
  const templateIds = [...new Set(request.templateIds)];
  // Raw D1 rows, keyed by column name.
  const [results, verified] = await Promise.all([
    batch(db, [
      statement(db, suppressionsAmongQuery(db, accountId, [...new Set(request.recipients)])),
      ...(idempotency ? [storedResponseStatement(db, accountId, idempotency)] : []),
      ...templateIds.map((id) => statement(db, templateContentQuery(db, accountId, id))),
    ]),
    verifiedDomainsOf(ctx.shared, accountId, domainNames),
  ]);
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
  const templatesAt = idempotency ? 2 : 1;
  return {
    suppressedIn: { transactional: suppressedFor("transactional"), broadcast: suppressedFor("broadcast") },
    previous: idempotency ? (results[1]?.results[0] as StoredResponse | undefined) : undefined,
    domainOfName: new Map(domainNames.map((name) => [name, verified.get(name)])),
    templateOf: new Map(templateIds.map((id, i) => [id, results[templatesAt + i]?.results[0] as StoredTemplate | undefined])),
  };
}
