import { sql } from "drizzle-orm";
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

export const contacts = sqliteTable(
  "contacts",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    email: text("email").notNull(),
    // Trimmed, domain lower-cased: the create-or-update key.
    emailKey: text("email_key").notNull(),
    firstName: text("first_name"),
    lastName: text("last_name"),
    company: text("company"),
    phone: text("phone"),
    country: text("country"),
    customFields: text("custom_fields", { mode: "json" }).$type<Record<string, string | number | boolean>>().notNull(),
    // `pending` until a double opt-in sign-up is confirmed: no campaign or automation mails it.
    status: text("status", { enum: ["subscribed", "unsubscribed", "bounced", "complained", "pending"] })
      .notNull()
      .default("subscribed"),
    // The consent record of a sign-up form: which form, when the address confirmed and from which IP.
    consentFormId: text("consent_form_id"),
    consentedAt: text("consented_at"),
    consentIp: text("consent_ip"),
    // Last open or click by this contact (tracking), for segments and re-engagement.
    lastActivityAt: text("last_activity_at"),
    // The last verification of the address (POST /contacts/verify or a campaign's pre-send checks): the result
    // (valid, invalid, risky, unknown), the engine status, and when; reused free while younger than VERIFY_FRESH_DAYS.
    verificationResult: text("verification_result", { enum: ["valid", "invalid", "risky", "unknown"] }),
    verificationStatus: text("verification_status"),
    verificationSubStatus: text("verification_sub_status"),
    verifiedAt: text("verified_at"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    uniqueIndex("contacts_account_email").on(t.accountId, t.emailKey),
    index("contacts_account_created").on(t.accountId, t.createdAt),
    // Suppressions are keyed by the fully lower-cased address; this finds every contact of one (bounce, complaint).
    index("contacts_account_email_lower").on(t.accountId, sql`lower(${t.emailKey})`),
  ],
);

export const lists = sqliteTable(
  "lists",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    description: text("description"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("lists_account").on(t.accountId, t.createdAt)],
);

export const listMembers = sqliteTable(
  "list_members",
  {
    listId: text("list_id").notNull(),
    contactId: text("contact_id").notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.listId, t.contactId] }), index("list_members_contact").on(t.contactId)],
);

export const contactImports = sqliteTable(
  "contact_imports",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    listId: text("list_id"),
    status: text("status", { enum: ["pending", "processing", "completed", "failed"] }).notNull(),
    mapping: text("mapping", { mode: "json" }).$type<Record<string, string>>().notNull(),
    inputKey: text("input_key").notNull(),
    // Byte offset in the CSV of the first record not yet imported: where the next chunk resumes.
    inputOffset: integer("input_offset").notNull().default(0),
    // `verify: true`: each chunk's addresses without a fresh result are checked by a verification job of their own.
    verify: integer("verify", { mode: "boolean" }).notNull().default(false),
    total: integer("total").notNull().default(0),
    processed: integer("processed").notNull().default(0),
    created: integer("created").notNull().default(0),
    updated: integer("updated").notNull().default(0),
    failed: integer("failed").notNull().default(0),
    error: text("error"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("contact_imports_account").on(t.accountId, t.createdAt), index("contact_imports_status_updated").on(t.status, t.updatedAt)],
);

export const contactImportErrors = sqliteTable(
  "contact_import_errors",
  {
    importId: text("import_id").notNull(),
    row: integer("row").notNull(),
    message: text("message").notNull(),
  },
  (t) => [primaryKey({ columns: [t.importId, t.row] })],
);
