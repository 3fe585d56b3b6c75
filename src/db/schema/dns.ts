import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const dnsCache = sqliteTable(
  "dns_cache",
  {
    name: text("name").notNull(),
    type: text("type").notNull(),
    answer: text("answer", { mode: "json" }).$type<unknown>().notNull(),
    expiresAt: integer("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.name, t.type] })],
);
