ALTER TABLE `domains` ADD `dkim_ed25519_public_key` text;--> statement-breakpoint
ALTER TABLE `domains` ADD `dkim_ed25519_private_key` text;