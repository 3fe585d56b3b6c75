ALTER TABLE `contact_imports` ADD `input_offset` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX `contacts_account_email_lower` ON `contacts` (`account_id`,lower("email_key"));--> statement-breakpoint
CREATE INDEX `suppressions_account_created` ON `suppressions` (`account_id`,`created_at`);