-- The inbox checkpoint: the stored (kind 4339) events the inbox has
-- processed, by event id, with their created_at (seconds since the Unix
-- epoch). Ids far older than the newest are deleted as new ones come.
CREATE TABLE inbox_processed (
	event_id   TEXT    NOT NULL PRIMARY KEY,
	created_at BIGINT  NOT NULL
);
CREATE INDEX inbox_processed_created ON inbox_processed (created_at);
