// The account's events of some types, newest first, by offset: what a peer's list of bounces reads
// (docs/migrating.md). Reports never scan events; this serves one page of a list a person asked for.

import type { AccountDb } from "../../db/client";
import { and, desc, eq, inArray } from "drizzle-orm";
import { events } from "../../db/schema";
import type { EventType } from "./events";

export type EventRow = Pick<typeof events.$inferSelect, "id" | "type" | "subjectId" | "data" | "createdAt">;

/** `limit + 1` rows from `offset`, so the caller can tell whether more follow. */
export function eventsOfTypes(db: AccountDb, accountId: string, types: EventType[], page: { offset: number; limit: number }): Promise<EventRow[]> {
  return db
    .select({ id: events.id, type: events.type, subjectId: events.subjectId, data: events.data, createdAt: events.createdAt })
    .from(events)
    .where(and(eq(events.accountId, accountId), inArray(events.type, types)))
    .orderBy(desc(events.createdAt), desc(events.id))
    .limit(page.limit + 1)
    .offset(page.offset)
    .all();
}
