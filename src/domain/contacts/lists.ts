import { getTableColumns, sql } from "drizzle-orm";
import { lists } from "../../db/schema";

// Counted per list in the same query as the lists themselves (correlated subqueries over the list_members
// primary key). Counting costs a read per member; counters kept in the row would drift with every upsert path.
// The outer column is spelled out: drizzle writes a single-table select's columns unqualified ("id"), which inside
// a subquery joining contacts would mean contacts.id.
const contactCount = sql<number>`(SELECT count(*) FROM list_members AS m WHERE m.list_id = "lists"."id")`.mapWith(Number);
const subscriberCount = sql<number>`(SELECT count(*) FROM list_members AS m JOIN contacts AS c ON c.id = m.contact_id
  WHERE m.list_id = "lists"."id" AND c.status = 'subscribed')`.mapWith(Number);

export const listSelection = { ...getTableColumns(lists), contactCount, subscriberCount };
export type ListWithCounts = typeof lists.$inferSelect & { contactCount: number; subscriberCount: number };

export function serializeList(row: ListWithCounts) {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    contact_count: row.contactCount,
    subscriber_count: row.subscriberCount,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}
