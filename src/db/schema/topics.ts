import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

// What an account's marketing mail is about ("Newsletter", "Product updates"): a contact subscribes to each, and an
// unsubscribe from one topic's mail leaves that topic only.
export const topics = sqliteTable(
  "topics",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    description: text("description"),
    // Whether a contact who never chose is subscribed (opt-out topic) or not (opt-in topic).
    defaultSubscribed: integer("default_subscribed", { mode: "boolean" }).notNull().default(true),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("topics_account").on(t.accountId, t.createdAt), uniqueIndex("topics_account_name").on(t.accountId, t.name)],
);

// A contact's own choice for a topic; no row means the topic's default.
export const contactTopics = sqliteTable(
  "contact_topics",
  {
    contactId: text("contact_id").notNull(),
    topicId: text("topic_id").notNull(),
    accountId: text("account_id").notNull(),
    subscribed: integer("subscribed", { mode: "boolean" }).notNull(),
    updatedAt: updatedAt(),
  },
  (t) => [primaryKey({ columns: [t.contactId, t.topicId] }), index("contact_topics_topic").on(t.topicId, t.subscribed)],
);
