CREATE TABLE `campaigns` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`status` text DEFAULT 'draft' NOT NULL,
	`sender_id` text,
	`subject` text,
	`preheader` text,
	`html` text,
	`text` text,
	`template_id` text,
	`variables` text NOT NULL,
	`tags` text NOT NULL,
	`lists` text NOT NULL,
	`segments` text NOT NULL,
	`exclude_lists` text NOT NULL,
	`track_opens` integer DEFAULT true NOT NULL,
	`track_clicks` integer DEFAULT true NOT NULL,
	`send_at` text,
	`started_at` text,
	`completed_at` text,
	`credits_reserved` integer DEFAULT 0 NOT NULL,
	`error` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `campaigns_account` ON `campaigns` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `campaigns_account_status` ON `campaigns` (`account_id`,`status`,`created_at`);--> statement-breakpoint
ALTER TABLE `messages` ADD `campaign_id` text;--> statement-breakpoint
CREATE INDEX `messages_campaign_status` ON `messages` (`campaign_id`,`status`);