CREATE TABLE `delivery_feedback` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`message_id` text NOT NULL,
	`recipient` text NOT NULL,
	`kind` text NOT NULL,
	`bounce_type` text,
	`source` text NOT NULL,
	`detail` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE INDEX `delivery_feedback_message` ON `delivery_feedback` (`message_id`);--> statement-breakpoint
CREATE TABLE `warmup_usage` (
	`domain_id` text NOT NULL,
	`day` text NOT NULL,
	`sent` integer DEFAULT 0 NOT NULL,
	`granted` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`domain_id`, `day`)
);
--> statement-breakpoint
ALTER TABLE `domains` ADD `warmup_status` text DEFAULT 'off' NOT NULL;--> statement-breakpoint
ALTER TABLE `domains` ADD `warmup_schedule` text;--> statement-breakpoint
ALTER TABLE `domains` ADD `warmup_started_at` text;--> statement-breakpoint
ALTER TABLE `domains` ADD `warmup_paused_reason` text;--> statement-breakpoint
ALTER TABLE `domains` ADD `reputation_status` text DEFAULT 'ok' NOT NULL;--> statement-breakpoint
ALTER TABLE `domains` ADD `reputation_reason` text;--> statement-breakpoint
ALTER TABLE `domains` ADD `reputation_held_at` text;--> statement-breakpoint
ALTER TABLE `message_recipients` ADD `provider_message_id` text;--> statement-breakpoint
CREATE INDEX `message_recipients_provider_message` ON `message_recipients` (`provider_message_id`);--> statement-breakpoint
ALTER TABLE `messages` ADD `next_attempt_at` text;