import { index, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

export type SegmentCondition = { field: string; op: string; value?: unknown };

// A saved audience: contacts matching all (or any) of the conditions, evaluated when used, never materialised.
export const segments = sqliteTable(
  "segments",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    match: text("match", { enum: ["all", "any"] }).notNull(),
    conditions: text("conditions", { mode: "json" }).$type<SegmentCondition[]>().notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("segments_account").on(t.accountId, t.createdAt)],
);
