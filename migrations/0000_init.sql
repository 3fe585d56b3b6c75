CREATE TABLE `accounts` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`plan` text DEFAULT 'free' NOT NULL,
	`features` text NOT NULL,
	`daily_send_limit` integer NOT NULL,
	`rate_limit_per_minute` integer NOT NULL,
	`send_balance` integer DEFAULT 0 NOT NULL,
	`send_reserved` integer DEFAULT 0 NOT NULL,
	`verify_balance` integer DEFAULT 0 NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE TABLE `api_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`prefix` text NOT NULL,
	`key_hash` text NOT NULL,
	`scopes` text,
	`mode` text DEFAULT 'live' NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`last_used_at` text,
	`revoked_at` text,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `api_keys_key_hash` ON `api_keys` (`key_hash`);--> statement-breakpoint
CREATE INDEX `api_keys_account` ON `api_keys` (`account_id`);--> statement-breakpoint
CREATE TABLE `contact_import_errors` (
	`import_id` text NOT NULL,
	`row` integer NOT NULL,
	`message` text NOT NULL,
	PRIMARY KEY(`import_id`, `row`)
);
--> statement-breakpoint
CREATE TABLE `contact_imports` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`list_id` text,
	`status` text NOT NULL,
	`mapping` text NOT NULL,
	`input_key` text NOT NULL,
	`total` integer DEFAULT 0 NOT NULL,
	`processed` integer DEFAULT 0 NOT NULL,
	`created` integer DEFAULT 0 NOT NULL,
	`updated` integer DEFAULT 0 NOT NULL,
	`failed` integer DEFAULT 0 NOT NULL,
	`error` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `contact_imports_account` ON `contact_imports` (`account_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `contacts` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`email` text NOT NULL,
	`email_key` text NOT NULL,
	`first_name` text,
	`last_name` text,
	`company` text,
	`phone` text,
	`country` text,
	`custom_fields` text NOT NULL,
	`status` text DEFAULT 'subscribed' NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `contacts_account_email` ON `contacts` (`account_id`,`email_key`);--> statement-breakpoint
CREATE INDEX `contacts_account_created` ON `contacts` (`account_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `credit_ledger` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`balance` text NOT NULL,
	`kind` text NOT NULL,
	`amount` integer NOT NULL,
	`reference_id` text,
	`note` text,
	`balance_after` integer NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `credit_ledger_account` ON `credit_ledger` (`account_id`,`created_at`);--> statement-breakpoint
CREATE UNIQUE INDEX `credit_ledger_reference` ON `credit_ledger` (`balance`,`kind`,`reference_id`);--> statement-breakpoint
CREATE TABLE `dns_cache` (
	`name` text NOT NULL,
	`type` text NOT NULL,
	`answer` text NOT NULL,
	`expires_at` integer NOT NULL,
	PRIMARY KEY(`name`, `type`)
);
--> statement-breakpoint
CREATE TABLE `domains` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`status` text DEFAULT 'pending' NOT NULL,
	`dkim_selector` text NOT NULL,
	`dkim_public_key` text NOT NULL,
	`dkim_private_key` text NOT NULL,
	`records` text NOT NULL,
	`last_checked_at` text,
	`verified_at` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `domains_account_name` ON `domains` (`account_id`,`name`);--> statement-breakpoint
CREATE INDEX `domains_status` ON `domains` (`status`);--> statement-breakpoint
CREATE TABLE `events` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`type` text NOT NULL,
	`subject_id` text,
	`dedupe_key` text NOT NULL,
	`data` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `events_dedupe` ON `events` (`account_id`,`dedupe_key`);--> statement-breakpoint
CREATE INDEX `events_account_created` ON `events` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `events_subject` ON `events` (`subject_id`);--> statement-breakpoint
CREATE TABLE `idempotency_keys` (
	`account_id` text NOT NULL,
	`key` text NOT NULL,
	`route` text NOT NULL,
	`request_hash` text NOT NULL,
	`response_status` integer,
	`response_body` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	PRIMARY KEY(`account_id`, `route`, `key`)
);
--> statement-breakpoint
CREATE INDEX `idempotency_keys_created` ON `idempotency_keys` (`created_at`);--> statement-breakpoint
CREATE TABLE `list_members` (
	`list_id` text NOT NULL,
	`contact_id` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	PRIMARY KEY(`list_id`, `contact_id`)
);
--> statement-breakpoint
CREATE INDEX `list_members_contact` ON `list_members` (`contact_id`);--> statement-breakpoint
CREATE TABLE `lists` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `lists_account` ON `lists` (`account_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `message_recipients` (
	`message_id` text NOT NULL,
	`email` text NOT NULL,
	`account_id` text NOT NULL,
	`status` text NOT NULL,
	`smtp_response` text,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	PRIMARY KEY(`message_id`, `email`),
	FOREIGN KEY (`message_id`) REFERENCES `messages`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `message_recipients_account_email` ON `message_recipients` (`account_id`,`email`);--> statement-breakpoint
CREATE TABLE `message_tags` (
	`message_id` text NOT NULL,
	`account_id` text NOT NULL,
	`tag` text NOT NULL,
	PRIMARY KEY(`message_id`, `tag`)
);
--> statement-breakpoint
CREATE INDEX `message_tags_account_tag` ON `message_tags` (`account_id`,`tag`);--> statement-breakpoint
CREATE TABLE `messages` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`source` text NOT NULL,
	`status` text NOT NULL,
	`from_address` text NOT NULL,
	`from_name` text,
	`domain_id` text NOT NULL,
	`reply_to` text,
	`subject` text NOT NULL,
	`tags` text NOT NULL,
	`metadata` text NOT NULL,
	`content` text,
	`content_key` text,
	`credits_charged` integer NOT NULL,
	`test_mode` integer DEFAULT false NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`smtp_response` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`sent_at` text,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `messages_account_created` ON `messages` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `messages_account_status` ON `messages` (`account_id`,`status`);--> statement-breakpoint
CREATE TABLE `smtp_credentials` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`username` text NOT NULL,
	`password_hash` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`last_used_at` text,
	`revoked_at` text,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `smtp_credentials_username` ON `smtp_credentials` (`username`);--> statement-breakpoint
CREATE INDEX `smtp_credentials_account` ON `smtp_credentials` (`account_id`);--> statement-breakpoint
CREATE TABLE `suppressions` (
	`account_id` text NOT NULL,
	`email` text NOT NULL,
	`reason` text NOT NULL,
	`source_message_id` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	PRIMARY KEY(`account_id`, `email`)
);
--> statement-breakpoint
CREATE TABLE `templates` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`subject` text NOT NULL,
	`html` text,
	`text` text,
	`variables` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `templates_account` ON `templates` (`account_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `verification_jobs` (
	`id` text PRIMARY KEY NOT NULL,
	`seq` integer NOT NULL,
	`account_id` text NOT NULL,
	`source` text NOT NULL,
	`name` text,
	`status` text NOT NULL,
	`total` integer NOT NULL,
	`processed` integer DEFAULT 0 NOT NULL,
	`chargeable` integer DEFAULT 0 NOT NULL,
	`credits_charged` integer DEFAULT 0 NOT NULL,
	`counts` text NOT NULL,
	`input_key` text,
	`error` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`completed_at` text,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `verification_jobs_seq` ON `verification_jobs` (`seq`);--> statement-breakpoint
CREATE INDEX `verification_jobs_account` ON `verification_jobs` (`account_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `verification_results` (
	`job_id` text NOT NULL,
	`position` integer NOT NULL,
	`email` text NOT NULL,
	`result` text NOT NULL,
	`status` text NOT NULL,
	`detail` text NOT NULL,
	PRIMARY KEY(`job_id`, `position`)
);
--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`id` text PRIMARY KEY NOT NULL,
	`endpoint_id` text NOT NULL,
	`account_id` text NOT NULL,
	`event_id` text NOT NULL,
	`event_type` text NOT NULL,
	`attempt` integer NOT NULL,
	`status` text NOT NULL,
	`status_code` integer,
	`response_snippet` text,
	`duration_ms` integer,
	`next_retry_at` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE INDEX `webhook_deliveries_endpoint` ON `webhook_deliveries` (`endpoint_id`,`created_at`);--> statement-breakpoint
CREATE UNIQUE INDEX `webhook_deliveries_attempt` ON `webhook_deliveries` (`endpoint_id`,`event_id`,`attempt`);--> statement-breakpoint
CREATE TABLE `webhook_endpoints` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`url` text NOT NULL,
	`description` text,
	`events` text NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	`secret` text NOT NULL,
	`previous_secret` text,
	`previous_secret_expires_at` text,
	`failing_since` text,
	`disabled_reason` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `webhook_endpoints_account` ON `webhook_endpoints` (`account_id`);