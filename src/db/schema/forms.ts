import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

// A public sign-up form (POST {SITE_URL}/subscribe/<id>): the lists and topics it subscribes to, and with double
// opt-in the sender of its confirmation mail.
export const forms = sqliteTable(
  "forms",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    lists: text("lists", { mode: "json" }).$type<string[]>().notNull(),
    topics: text("topics", { mode: "json" }).$type<string[]>().notNull(),
    doubleOptIn: integer("double_opt_in", { mode: "boolean" }).notNull().default(true),
    senderId: text("sender_id"),
    redirectUrl: text("redirect_url"),
    fields: text("fields", { mode: "json" }).$type<string[]>().notNull(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("forms_account").on(t.accountId, t.createdAt)],
);
