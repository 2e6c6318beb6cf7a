-- The replay record of snap.ReplayStore: one row per (from, id) of an
-- authenticated message. Times are microseconds since the Unix epoch.
CREATE TABLE replay (
	sender      TEXT    NOT NULL,
	msg_id      TEXT    NOT NULL,
	first_seen  INTEGER NOT NULL,
	expires     INTEGER NOT NULL,
	fingerprint BLOB    NOT NULL CHECK (length(fingerprint) = 32),
	PRIMARY KEY (sender, msg_id)
) WITHOUT ROWID;
CREATE INDEX replay_expires ON replay (expires);
