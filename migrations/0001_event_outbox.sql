ALTER TABLE `events` ADD `dispatched_at` text;--> statement-breakpoint
CREATE INDEX `events_undispatched` ON `events` (`dispatched_at`,`created_at`);