import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { createdAt } from "./util/columns";

export type InboundAttachment = {
  filename: string | null;
  content_type: string;
  size: number;
  content_id: string | null;
  disposition: "attachment" | "inline" | null;
};

/** The authentication results Email Routing added on top of the message, as it wrote them. */
export type InboundAuthentication = {
  spf: string | null;
  dkim: string | null;
  dmarc: string | null;
  /** The header's value as received (Authentication-Results, or ARC-Authentication-Results). */
  header: string | null;
  received_spf: string | null;
};

// Mail received on a receiving domain through the email() handler (docs/inbound.md): the raw bytes in R2
// (`raw_key`), each attachment beside it, the parsed fields here. Bodies too large for a row live in R2 (`body_key`).
// The id is derived from the envelope recipient and the Message-ID, so a redelivered message is stored once.
export const inboundEmails = sqliteTable(
  "inbound_emails",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    domainId: text("domain_id").notNull(),
    envelopeFrom: text("envelope_from").notNull(),
    envelopeTo: text("envelope_to").notNull(),
    fromHeader: text("from_header"),
    fromAddress: text("from_address"),
    toAddresses: text("to_addresses", { mode: "json" }).$type<string[]>().notNull(),
    ccAddresses: text("cc_addresses", { mode: "json" }).$type<string[]>().notNull(),
    replyTo: text("reply_to"),
    subject: text("subject"),
    date: text("date"),
    messageIdHeader: text("message_id_header"),
    inReplyTo: text("in_reply_to"),
    references: text("references", { mode: "json" }).$type<string[]>().notNull(),
    text: text("text"),
    html: text("html"),
    bodyKey: text("body_key"),
    attachments: text("attachments", { mode: "json" }).$type<InboundAttachment[]>().notNull(),
    size: integer("size").notNull(),
    rawKey: text("raw_key").notNull(),
    authentication: text("authentication", { mode: "json" }).$type<InboundAuthentication>().notNull(),
    autoSubmitted: text("auto_submitted"),
    // The message we sent that this mail answers (its In-Reply-To or References named our Message-ID), and its campaign.
    inReplyToMessageId: text("in_reply_to_message_id"),
    campaignId: text("campaign_id"),
    createdAt: createdAt(),
  },
  (t) => [
    index("inbound_emails_account_created").on(t.accountId, t.createdAt),
    index("inbound_emails_account_to").on(t.accountId, t.envelopeTo, t.createdAt),
    // The per-domain hourly cap counts over this.
    index("inbound_emails_domain_created").on(t.domainId, t.createdAt),
    // The retention purge's oldest-first pages.
    index("inbound_emails_created").on(t.createdAt),
  ],
);
