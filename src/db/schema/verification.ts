import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

export const verificationJobs = sqliteTable(
  "verification_jobs",
  {
    id: text("id").primaryKey(),
    // The standalone verification API shows integer ids.
    seq: integer("seq").notNull(),
    accountId: ownerAccount(),
    // `contacts` (POST /contacts/verify) and `campaign` (a campaign's pre-send checks) write each result onto its contact.
    source: text("source", { enum: ["api", "batch", "contacts", "campaign"] }).notNull(),
    name: text("name"),
    // The campaign whose fan-out waits for this job; its completion wakes that campaign's progress object.
    campaignId: text("campaign_id"),
    status: text("status", { enum: ["pending", "processing", "completed", "failed"] }).notNull(),
    total: integer("total").notNull(),
    processed: integer("processed").notNull().default(0),
    chargeable: integer("chargeable").notNull().default(0),
    creditsCharged: integer("credits_charged").notNull().default(0),
    counts: text("counts", { mode: "json" }).$type<Record<string, number>>().notNull(),
    inputKey: text("input_key"),
    error: text("error"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
    completedAt: text("completed_at"),
  },
  (t) => [
    uniqueIndex("verification_jobs_seq").on(t.seq),
    index("verification_jobs_account").on(t.accountId, t.createdAt),
    // The cron's sweep for jobs whose queue message was lost.
    index("verification_jobs_status_updated").on(t.status, t.updatedAt),
  ],
);

export const verificationResults = sqliteTable(
  "verification_results",
  {
    jobId: text("job_id").notNull(),
    position: integer("position").notNull(),
    email: text("email").notNull(),
    result: text("result").notNull(),
    status: text("status").notNull(),
    detail: text("detail", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.position] })],
);
