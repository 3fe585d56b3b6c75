CREATE TABLE `campaign_purged_messages` (
	`campaign_id` text NOT NULL,
	`status` text NOT NULL,
	`total` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`campaign_id`, `status`)
);
