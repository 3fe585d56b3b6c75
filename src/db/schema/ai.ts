import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

export const aiRequestStatuses = ["queued", "running", "completed", "failed"] as const;

// A request for AI-generated campaign drafts: stored, generated from a queue, its variations saved as draft campaigns.
export const aiRequests = sqliteTable(
  "ai_requests",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    status: text("status", { enum: aiRequestStatuses }).notNull().default("queued"),
    input: text("input", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    result: text("result", { mode: "json" }).$type<Record<string, unknown>>(),
    campaignIds: text("campaign_ids", { mode: "json" }).$type<string[]>().notNull(),
    error: text("error"),
    inputTokens: integer("input_tokens"),
    outputTokens: integer("output_tokens"),
    attempts: integer("attempts").notNull().default(0),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
    completedAt: text("completed_at"),
  },
  (t) => [
    index("ai_requests_account").on(t.accountId, t.createdAt),
    // The monthly quota counts completed generations per account.
    index("ai_requests_account_completed").on(t.accountId, t.status, t.completedAt),
  ],
);
