-- Reports count transactional and broadcast mail apart (issue #44). Until now only campaigns sent broadcast mail.
CREATE TABLE `__new_daily_stats` (
	`account_id` text NOT NULL,
	`day` text NOT NULL,
	`domain` text NOT NULL,
	`provider` text NOT NULL,
	`campaign_id` text NOT NULL,
	`stream` text DEFAULT 'transactional' NOT NULL,
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
	`replies` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`account_id`, `day`, `domain`, `provider`, `campaign_id`, `stream`)
);
--> statement-breakpoint
INSERT INTO `__new_daily_stats`("account_id", "day", "domain", "provider", "campaign_id", "stream", "sent", "delivered", "hard_bounces", "soft_bounces", "opens", "unique_opens", "machine_opens", "clicks", "unique_clicks", "unsubscribes", "complaints", "failed", "suppressed", "replies") SELECT "account_id", "day", "domain", "provider", "campaign_id", CASE WHEN "campaign_id" = '' THEN 'transactional' ELSE 'broadcast' END, "sent", "delivered", "hard_bounces", "soft_bounces", "opens", "unique_opens", "machine_opens", "clicks", "unique_clicks", "unsubscribes", "complaints", "failed", "suppressed", "replies" FROM `daily_stats`;--> statement-breakpoint
DROP TABLE `daily_stats`;--> statement-breakpoint
ALTER TABLE `__new_daily_stats` RENAME TO `daily_stats`;--> statement-breakpoint
CREATE INDEX `daily_stats_campaign` ON `daily_stats` (`campaign_id`,`day`);