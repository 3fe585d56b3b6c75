-- An optional second factor per member (TOTP with recovery codes), and the owner's choice to require it.
ALTER TABLE `accounts` ADD `require_totp` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `members` ADD `totp_secret` text;--> statement-breakpoint
ALTER TABLE `members` ADD `totp_enabled_at` text;--> statement-breakpoint
ALTER TABLE `members` ADD `totp_last_step` integer;--> statement-breakpoint
ALTER TABLE `members` ADD `recovery_codes` text;