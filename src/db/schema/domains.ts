import { sql } from "drizzle-orm";
import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { ownerAccount } from "./accounts";
import { createdAt, updatedAt } from "./util/columns";

export type DnsRecordCheck = {
  type: "TXT" | "MX" | "CNAME";
  name: string;
  value: string;
  purpose: "dkim" | "spf" | "dmarc" | "return_path" | "dkim_ed25519" | "inbound";
  status: "pending" | "verified" | "failed" | "not_found";
  found?: string[];
};

export const domains = sqliteTable(
  "domains",
  {
    id: text("id").primaryKey(),
    accountId: ownerAccount(),
    name: text("name").notNull(),
    status: text("status", { enum: ["pending", "verified", "failed"] })
      .notNull()
      .default("pending"),
    dkimSelector: text("dkim_selector").notNull(),
    dkimPublicKey: text("dkim_public_key").notNull(),
    // AES-GCM ciphertext (DKIM_ENCRYPTION_KEY), never the clear key.
    dkimPrivateKey: text("dkim_private_key").notNull(),
    // A second, Ed25519 signature (RFC 8463) beside the RSA one, for receivers that prefer it; optional to publish.
    dkimEd25519PublicKey: text("dkim_ed25519_public_key"),
    dkimEd25519PrivateKey: text("dkim_ed25519_private_key"),
    records: text("records", { mode: "json" }).$type<DnsRecordCheck[]>().notNull(),
    lastCheckedAt: text("last_checked_at"),
    verifiedAt: text("verified_at"),
    // Warm-up (docs/deliverability.md): daily caps from `warmup_started_at` (a UTC day); past the last cap it completes.
    warmupStatus: text("warmup_status", { enum: ["off", "active", "paused", "completed"] })
      .notNull()
      .default("off"),
    warmupSchedule: text("warmup_schedule", { mode: "json" }).$type<number[]>(),
    warmupStartedAt: text("warmup_started_at"),
    warmupPausedReason: text("warmup_paused_reason"),
    // Reputation guard: `held` refuses new campaign sends from the domain until an operator clears it.
    reputationStatus: text("reputation_status", { enum: ["ok", "held"] })
      .notNull()
      .default("ok"),
    reputationReason: text("reputation_reason"),
    reputationHeldAt: text("reputation_held_at"),
    // Inbound mail (docs/inbound.md): whether the email() handler accepts mail for the domain, and for which local
    // parts (null: every address, a catch-all).
    receiving: integer("receiving", { mode: "boolean" }).notNull().default(false),
    receivingAddresses: text("receiving_addresses", { mode: "json" }).$type<string[]>(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    uniqueIndex("domains_account_name").on(t.accountId, t.name),
    index("domains_status").on(t.status),
    // One account at most receives a domain's mail: two accounts may both verify a name for sending.
    uniqueIndex("domains_receiving_name").on(t.name).where(sql`${t.receiving} = 1`),
  ],
);
