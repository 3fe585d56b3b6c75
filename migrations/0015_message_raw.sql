-- The signed bytes of a message as it left (R2 key), for GET /messages/{id}/raw and /content; deleted with the message.
ALTER TABLE `messages` ADD `raw_key` text;
