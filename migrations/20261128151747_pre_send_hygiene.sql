-- Pre-send hygiene (issue #42): a contact keeps its last verification, a campaign its verification mode, the job of its checks and the contacts those left out.
CREATE TABLE `campaign_skips` (
	`campaign_id` text NOT NULL,
	`contact_id` text NOT NULL,
	`account_id` text NOT NULL,
	`email` text NOT NULL,
	`result` text NOT NULL,
	`reason` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	PRIMARY KEY(`campaign_id`, `contact_id`)
);
--> statement-breakpoint
ALTER TABLE `campaigns` ADD `verification` text DEFAULT 'off' NOT NULL;--> statement-breakpoint
ALTER TABLE `campaigns` ADD `verification_job_id` text;--> statement-breakpoint
ALTER TABLE `contacts` ADD `verification_result` text;--> statement-breakpoint
ALTER TABLE `contacts` ADD `verification_status` text;--> statement-breakpoint
ALTER TABLE `contacts` ADD `verification_sub_status` text;--> statement-breakpoint
ALTER TABLE `contacts` ADD `verified_at` text;--> statement-breakpoint
ALTER TABLE `verification_jobs` ADD `campaign_id` text;