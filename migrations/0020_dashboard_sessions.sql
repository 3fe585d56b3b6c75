-- Dashboard sessions kept on the server, so signing out ends a session even for a copy of its cookie.
CREATE TABLE `dashboard_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`api_key_id` text NOT NULL,
	`expires_at` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`api_key_id`) REFERENCES `api_keys`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `dashboard_sessions_key_expiry` ON `dashboard_sessions` (`api_key_id`,`expires_at`);
