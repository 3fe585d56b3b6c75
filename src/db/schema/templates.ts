import { index, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

export const templates = sqliteTable(
  "templates",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    subject: text("subject").notNull(),
    html: text("html"),
    text: text("text"),
    variables: text("variables", { mode: "json" }).$type<string[]>().notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("templates_account").on(t.accountId, t.createdAt)],
);
