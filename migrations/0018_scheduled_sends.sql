-- Scheduled sends (POST /send with scheduled_at): the time an API or SMTP message is due, NULL for one sent at once
-- and for campaign messages (whose campaign holds the time). The cron finds the due ones by (status, scheduled_at).
ALTER TABLE `messages` ADD `scheduled_at` text;--> statement-breakpoint
CREATE INDEX `messages_status_scheduled` ON `messages` (`status`, `scheduled_at`);
