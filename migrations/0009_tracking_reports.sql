CREATE TABLE `campaign_links` (
	`campaign_id` text NOT NULL,
	`url` text NOT NULL,
	`clicks` integer DEFAULT 0 NOT NULL,
	`unique_clicks` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`campaign_id`, `url`)
);
--> statement-breakpoint
CREATE TABLE `daily_stats` (
	`account_id` text NOT NULL,
	`day` text NOT NULL,
	`domain` text NOT NULL,
	`provider` text NOT NULL,
	`campaign_id` text NOT NULL,
	`sent` integer DEFAULT 0 NOT NULL,
	`delivered` integer DEFAULT 0 NOT NULL,
	`hard_bounces` integer DEFAULT 0 NOT NULL,
	`soft_bounces` integer DEFAULT 0 NOT NULL,
	`opens` integer DEFAULT 0 NOT NULL,
	`unique_opens` integer DEFAULT 0 NOT NULL,
	`machine_opens` integer DEFAULT 0 NOT NULL,
	`clicks` integer DEFAULT 0 NOT NULL,
	`unique_clicks` integer DEFAULT 0 NOT NULL,
	`unsubscribes` integer DEFAULT 0 NOT NULL,
	`complaints` integer DEFAULT 0 NOT NULL,
	`failed` integer DEFAULT 0 NOT NULL,
	`suppressed` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`account_id`, `day`, `domain`, `provider`, `campaign_id`)
);
--> statement-breakpoint
CREATE INDEX `daily_stats_campaign` ON `daily_stats` (`campaign_id`,`day`);--> statement-breakpoint
CREATE TABLE `usage_daily` (
	`account_id` text NOT NULL,
	`day` text NOT NULL,
	`api_calls` integer DEFAULT 0 NOT NULL,
	`verifications` integer DEFAULT 0 NOT NULL,
	`send_charged` integer DEFAULT 0 NOT NULL,
	`send_refunded` integer DEFAULT 0 NOT NULL,
	`send_reserved` integer DEFAULT 0 NOT NULL,
	`send_released` integer DEFAULT 0 NOT NULL,
	`verify_charged` integer DEFAULT 0 NOT NULL,
	`verify_refunded` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`account_id`, `day`)
);
--> statement-breakpoint
ALTER TABLE `contacts` ADD `last_activity_at` text;--> statement-breakpoint
ALTER TABLE `message_recipients` ADD `provider` text;--> statement-breakpoint
ALTER TABLE `message_recipients` ADD `opened_at` text;--> statement-breakpoint
ALTER TABLE `message_recipients` ADD `clicked_at` text;--> statement-breakpoint
ALTER TABLE `message_recipients` ADD `opens` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `message_recipients` ADD `clicks` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `messages` ADD `track_opens` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `messages` ADD `track_clicks` integer DEFAULT false NOT NULL;