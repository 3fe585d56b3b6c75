CREATE TABLE `contact_topics` (
	`contact_id` text NOT NULL,
	`topic_id` text NOT NULL,
	`account_id` text NOT NULL,
	`subscribed` integer NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	PRIMARY KEY(`contact_id`, `topic_id`)
);
--> statement-breakpoint
CREATE INDEX `contact_topics_topic` ON `contact_topics` (`topic_id`,`subscribed`);--> statement-breakpoint
CREATE TABLE `forms` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`lists` text NOT NULL,
	`topics` text NOT NULL,
	`double_opt_in` integer DEFAULT true NOT NULL,
	`sender_id` text,
	`redirect_url` text,
	`fields` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `forms_account` ON `forms` (`account_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `topics` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`default_subscribed` integer DEFAULT true NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `topics_account` ON `topics` (`account_id`,`created_at`);--> statement-breakpoint
CREATE UNIQUE INDEX `topics_account_name` ON `topics` (`account_id`,`name`);--> statement-breakpoint
CREATE TABLE `__new_suppressions` (
	`account_id` text NOT NULL,
	`email` text NOT NULL,
	`reason` text NOT NULL,
	`scope` text DEFAULT 'all' NOT NULL,
	`source_message_id` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	PRIMARY KEY(`account_id`, `email`, `scope`)
);
--> statement-breakpoint
-- An unsubscribe kept broadcast mail away; receipts and resets go on (issue #44). Bounces, complaints and manual
-- entries keep every stream away, as they did.
INSERT INTO `__new_suppressions`("account_id", "email", "reason", "scope", "source_message_id", "created_at") SELECT "account_id", "email", "reason", CASE "reason" WHEN 'unsubscribe' THEN 'broadcast' ELSE 'all' END, "source_message_id", "created_at" FROM `suppressions`;--> statement-breakpoint
DROP TABLE `suppressions`;--> statement-breakpoint
ALTER TABLE `__new_suppressions` RENAME TO `suppressions`;--> statement-breakpoint
CREATE INDEX `suppressions_account_created` ON `suppressions` (`account_id`,`created_at`);--> statement-breakpoint
ALTER TABLE `campaigns` ADD `topic_id` text;--> statement-breakpoint
ALTER TABLE `contacts` ADD `consent_form_id` text;--> statement-breakpoint
ALTER TABLE `contacts` ADD `consented_at` text;--> statement-breakpoint
ALTER TABLE `contacts` ADD `consent_ip` text;--> statement-breakpoint
ALTER TABLE `messages` ADD `stream` text DEFAULT 'transactional' NOT NULL;--> statement-breakpoint
ALTER TABLE `messages` ADD `topic_id` text;--> statement-breakpoint
ALTER TABLE `messages` ADD `list_unsubscribe` integer DEFAULT false NOT NULL;--> statement-breakpoint
-- Campaign mail is broadcast mail.
UPDATE `messages` SET `stream` = 'broadcast' WHERE `campaign_id` IS NOT NULL;