-- The free plan's monthly verification credits (docs/verification.md): granted and expired credits per day in usage_daily.
ALTER TABLE `usage_daily` ADD `verify_granted` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `usage_daily` ADD `verify_expired` integer DEFAULT 0 NOT NULL;
