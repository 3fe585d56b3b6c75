// Idempotency-Key records of POST /send and POST /ai/campaign: the first response to a key is stored with a hash of
// its request and replayed for 24 hours (ARCHITECTURE.md). This module owns the idempotency_keys queries; the
// creating code runs them inside its own batches so a record exists exactly when the row it answers for does.

import { and, eq, lt, sql } from "drizzle-orm";
import { statement, type AccountDb } from "../../db/client";
import { type aiRequests, idempotencyKeys, type messages } from "../../db/schema";
import { refused, type Refusal } from "../refusal";

export type Idempotency = { key: string; route: string; requestHash: string };

/** A stored response as the lookup's raw D1 row has it (column names); accept writes all three together. */
export type StoredResponse = { request_hash: string; response_status: number; response_body: string };

// Idempotency keys are honoured for 24 hours (ARCHITECTURE.md); the cron frees them afterwards.
const idempotencyWindowHours = 24;

const sameKey = (accountId: string, idempotency: Idempotency) =>
  and(eq(idempotencyKeys.accountId, accountId), eq(idempotencyKeys.route, idempotency.route), eq(idempotencyKeys.key, idempotency.key));

/** The stored response for this key, as a statement for the caller's batch (raw row: `StoredResponse`). */
export function storedResponseStatement(db: AccountDb, accountId: string, idempotency: Idempotency): D1PreparedStatement {
  const query = db
    .select({
      request_hash: idempotencyKeys.requestHash,
      response_status: idempotencyKeys.responseStatus,
      response_body: idempotencyKeys.responseBody,
    })
    .from(idempotencyKeys)
    .where(sameKey(accountId, idempotency));
  return statement(db, query);
}

export async function findStoredResponse(db: AccountDb, accountId: string, idempotency: Idempotency): Promise<StoredResponse | undefined> {
  return (await storedResponseStatement(db, accountId, idempotency).first<StoredResponse>()) ?? undefined;
}

/** The row a response is about: a message, or an AI request. */
export type CreatedRow = { table: typeof messages | typeof aiRequests; id: string };

/**
 * Records the response for this key, only if `created` was written in the same batch. A second request with the key
 * that got here first makes the batch fail on the primary key (`isIdempotencyRace`).
 */
export function recordResponseStatement(
  db: AccountDb,
  accountId: string,
  idempotency: Idempotency,
  response: { status: number; body: unknown },
  created: CreatedRow,
): D1PreparedStatement {
  return statement(
    db,
    sql`INSERT INTO idempotency_keys (account_id, route, key, request_hash, response_status, response_body)
      SELECT ${accountId}, ${idempotency.route}, ${idempotency.key}, ${idempotency.requestHash}, ${response.status}, ${JSON.stringify(response.body)}
      WHERE EXISTS (SELECT 1 FROM ${created.table} WHERE id = ${created.id})`,
  );
}

/** Frees the key, so the client can retry an acceptance that was undone. */
export function releaseKeyStatement(db: AccountDb, accountId: string, idempotency: Idempotency): D1PreparedStatement {
  return statement(db, db.delete(idempotencyKeys).where(sameKey(accountId, idempotency)));
}

export const isIdempotencyRace = (error: unknown) => error instanceof Error && /UNIQUE constraint failed: idempotency_keys/.test(error.message);

export type Replayed<Body> = { status: number; body: Body };

/** The stored response again, or a refusal when the key came with another request body. */
export function replay<Body>(previous: StoredResponse, idempotency: Idempotency): Replayed<Body> | Refusal {
  if (previous.request_hash !== idempotency.requestHash) {
    return refused("idempotency_conflict", "This Idempotency-Key was already used with a different request body");
  }
  return { status: previous.response_status, body: JSON.parse(previous.response_body) as Body };
}

/** Two requests with one key raced: the loser answers with the winner's stored response. */
export async function replayAfterRace<Body>(db: AccountDb, accountId: string, idempotency: Idempotency): Promise<Replayed<Body> | Refusal> {
  const row = await findStoredResponse(db, accountId, idempotency);
  if (!row) return refused("conflict", "A request with this Idempotency-Key is in progress; retry shortly");
  return replay(row, idempotency);
}

export async function purgeExpiredKeys(db: AccountDb): Promise<void> {
  await db
    .delete(idempotencyKeys)
    .where(lt(idempotencyKeys.createdAt, sql`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${`-${idempotencyWindowHours} hours`})`))
    .run();
}
