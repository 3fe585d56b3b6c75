CREATE TABLE `ai_requests` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`status` text DEFAULT 'queued' NOT NULL,
	`input` text NOT NULL,
	`result` text,
	`campaign_ids` text NOT NULL,
	`error` text,
	`input_tokens` integer,
	`output_tokens` integer,
	`attempts` integer DEFAULT 0 NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`completed_at` text,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `ai_requests_account` ON `ai_requests` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `ai_requests_account_completed` ON `ai_requests` (`account_id`,`status`,`completed_at`);--> statement-breakpoint
CREATE TABLE `automation_run_steps` (
	`run_id` text NOT NULL,
	`step_index` integer NOT NULL,
	`type` text NOT NULL,
	`status` text NOT NULL,
	`detail` text NOT NULL,
	`started_at` text,
	`finished_at` text,
	PRIMARY KEY(`run_id`, `step_index`)
);
--> statement-breakpoint
CREATE TABLE `automation_runs` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`automation_id` text NOT NULL,
	`contact_id` text NOT NULL,
	`email` text NOT NULL,
	`event_id` text NOT NULL,
	`status` text DEFAULT 'running' NOT NULL,
	`steps` text NOT NULL,
	`input` text NOT NULL,
	`error` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`completed_at` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `automation_runs_event` ON `automation_runs` (`automation_id`,`event_id`);--> statement-breakpoint
CREATE INDEX `automation_runs_account` ON `automation_runs` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `automation_runs_automation` ON `automation_runs` (`automation_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `automations` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`status` text DEFAULT 'active' NOT NULL,
	`steps` text NOT NULL,
	`redirect_url` text,
	`private_path` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `automations_account` ON `automations` (`account_id`,`created_at`);--> statement-breakpoint
CREATE UNIQUE INDEX `automations_private_path` ON `automations` (`private_path`);--> statement-breakpoint
ALTER TABLE `accounts` ADD `ai_generations_per_month` integer DEFAULT 0 NOT NULL;