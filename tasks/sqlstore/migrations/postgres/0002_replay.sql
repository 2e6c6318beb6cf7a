-- The replay record of snap.ReplayStore: one row per (from, id) of an
-- authenticated message, shared by every replica on the database. Times are
-- microseconds since the Unix epoch.
CREATE TABLE replay (
	sender      text COLLATE "C" NOT NULL,
	msg_id      text COLLATE "C" NOT NULL,
	first_seen  bigint NOT NULL,
	expires     bigint NOT NULL,
	fingerprint bytea  NOT NULL CHECK (length(fingerprint) = 32),
	PRIMARY KEY (sender, msg_id)
);
CREATE INDEX replay_expires ON replay (expires);
