-- Balances beside the ledger (issue #43): an account's balances move from the shared accounts table to its own
-- account_balances row, so a charge and what it pays for are one transaction in the account's database. Every
-- account's balances are copied, then the three columns are dropped (SQLite 3.35+ and D1 drop unindexed columns).
CREATE TABLE `account_balances` (
	`account_id` text PRIMARY KEY NOT NULL,
	`send_balance` integer DEFAULT 0 NOT NULL,
	`send_reserved` integer DEFAULT 0 NOT NULL,
	`verify_balance` integer DEFAULT 0 NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
INSERT INTO `account_balances` (`account_id`, `send_balance`, `send_reserved`, `verify_balance`, `updated_at`)
	SELECT `id`, `send_balance`, `send_reserved`, `verify_balance`, `updated_at` FROM `accounts`;--> statement-breakpoint
ALTER TABLE `accounts` DROP COLUMN `send_balance`;--> statement-breakpoint
ALTER TABLE `accounts` DROP COLUMN `send_reserved`;--> statement-breakpoint
ALTER TABLE `accounts` DROP COLUMN `verify_balance`;