ALTER TABLE `accounts` ADD `database` text DEFAULT 'DB' NOT NULL;--> statement-breakpoint
ALTER TABLE `accounts` ADD `moving_to` text;--> statement-breakpoint
CREATE INDEX `accounts_database` ON `accounts` (`database`);