ALTER TABLE `domains` ADD `receiving` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `domains` ADD `receiving_addresses` text;--> statement-breakpoint
CREATE UNIQUE INDEX `domains_receiving_name` ON `domains` (`name`) WHERE "domains"."receiving" = 1;--> statement-breakpoint
ALTER TABLE `daily_stats` ADD `replies` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE TABLE `inbound_emails` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`domain_id` text NOT NULL,
	`envelope_from` text NOT NULL,
	`envelope_to` text NOT NULL,
	`from_header` text,
	`from_address` text,
	`to_addresses` text NOT NULL,
	`cc_addresses` text NOT NULL,
	`reply_to` text,
	`subject` text,
	`date` text,
	`message_id_header` text,
	`in_reply_to` text,
	`references` text NOT NULL,
	`text` text,
	`html` text,
	`body_key` text,
	`attachments` text NOT NULL,
	`size` integer NOT NULL,
	`raw_key` text NOT NULL,
	`authentication` text NOT NULL,
	`auto_submitted` text,
	`in_reply_to_message_id` text,
	`campaign_id` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE INDEX `inbound_emails_account_created` ON `inbound_emails` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `inbound_emails_account_to` ON `inbound_emails` (`account_id`,`envelope_to`,`created_at`);--> statement-breakpoint
CREATE INDEX `inbound_emails_domain_created` ON `inbound_emails` (`domain_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `inbound_emails_created` ON `inbound_emails` (`created_at`);
