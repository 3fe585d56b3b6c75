ALTER TABLE `messages` ADD `claimed_at` text;--> statement-breakpoint
CREATE INDEX `messages_status_updated` ON `messages` (`status`,`updated_at`);--> statement-breakpoint
ALTER TABLE `smtp_credentials` ADD `mode` text DEFAULT 'live' NOT NULL;--> statement-breakpoint
-- Contacts are now keyed by the whole address lower-cased, as suppressions are. Spellings that differed only in
-- case merge into the oldest contact: its memberships gain the others', then the others go.
CREATE TABLE `contact_merge` AS
  SELECT c.id AS drop_id,
    (SELECT k.id FROM contacts k WHERE k.account_id = c.account_id AND lower(k.email_key) = lower(c.email_key)
     ORDER BY k.created_at, k.id LIMIT 1) AS keep_id
  FROM contacts c;--> statement-breakpoint
DELETE FROM `contact_merge` WHERE drop_id = keep_id;--> statement-breakpoint
INSERT OR IGNORE INTO `list_members` (list_id, contact_id, created_at)
  SELECT m.list_id, cm.keep_id, m.created_at FROM list_members m JOIN contact_merge cm ON cm.drop_id = m.contact_id;--> statement-breakpoint
-- Never resubscribe anyone: the kept contact takes the strongest status among its spellings.
UPDATE `contacts` SET status = (
    SELECT d.status FROM contacts d JOIN contact_merge cm ON cm.drop_id = d.id WHERE cm.keep_id = contacts.id
    ORDER BY CASE d.status WHEN 'complained' THEN 3 WHEN 'bounced' THEN 2 WHEN 'unsubscribed' THEN 1 ELSE 0 END DESC LIMIT 1)
  WHERE id IN (SELECT keep_id FROM contact_merge)
    AND CASE status WHEN 'complained' THEN 3 WHEN 'bounced' THEN 2 WHEN 'unsubscribed' THEN 1 ELSE 0 END < (
    SELECT MAX(CASE d.status WHEN 'complained' THEN 3 WHEN 'bounced' THEN 2 WHEN 'unsubscribed' THEN 1 ELSE 0 END)
    FROM contacts d JOIN contact_merge cm ON cm.drop_id = d.id WHERE cm.keep_id = contacts.id);--> statement-breakpoint
DELETE FROM `list_members` WHERE contact_id IN (SELECT drop_id FROM contact_merge);--> statement-breakpoint
DELETE FROM `contacts` WHERE id IN (SELECT drop_id FROM contact_merge);--> statement-breakpoint
DROP TABLE `contact_merge`;--> statement-breakpoint
UPDATE `contacts` SET email_key = lower(email_key);
