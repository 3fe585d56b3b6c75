-- The audit log: who changed what in an account, when and from where; purged with RETENTION_DAYS.
CREATE TABLE `audit_log` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`action` text NOT NULL,
	`actor_type` text NOT NULL,
	`actor_id` text NOT NULL,
	`actor_name` text NOT NULL,
	`target_type` text,
	`target_id` text,
	`via` text NOT NULL,
	`ip` text,
	`user_agent` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE INDEX `audit_log_account_created` ON `audit_log` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `audit_log_account_action` ON `audit_log` (`account_id`,`action`,`created_at`);--> statement-breakpoint
CREATE INDEX `audit_log_account_actor` ON `audit_log` (`account_id`,`actor_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `audit_log_created` ON `audit_log` (`created_at`);