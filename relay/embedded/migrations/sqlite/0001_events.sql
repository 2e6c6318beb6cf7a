-- The relay's events and their tags (older builds created these tables
-- and set PRAGMA user_version = 1).
CREATE TABLE IF NOT EXISTS events (
	seq        INTEGER PRIMARY KEY,
	id         TEXT    NOT NULL UNIQUE,
	pubkey     TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	kind       INTEGER NOT NULL,
	d_tag      TEXT,    -- addressable events only
	expiration INTEGER, -- NIP-40, NULL when none
	raw        BLOB    NOT NULL
);
CREATE INDEX IF NOT EXISTS events_created ON events(created_at DESC, id);
CREATE INDEX IF NOT EXISTS events_pubkey_kind ON events(pubkey, kind, created_at DESC, id);
CREATE INDEX IF NOT EXISTS events_kind ON events(kind, created_at DESC, id);
CREATE INDEX IF NOT EXISTS events_address ON events(pubkey, kind, d_tag) WHERE d_tag IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_expiration ON events(expiration) WHERE expiration IS NOT NULL;
CREATE TABLE IF NOT EXISTS tags (
	event_seq  INTEGER NOT NULL, -- events.seq
	name       TEXT    NOT NULL,
	value      TEXT    NOT NULL,
	created_at INTEGER NOT NULL  -- copied from the event, for ordered index scans
);
CREATE INDEX IF NOT EXISTS tags_name_value ON tags(name, value, created_at DESC);
CREATE INDEX IF NOT EXISTS tags_event ON tags(event_seq);
