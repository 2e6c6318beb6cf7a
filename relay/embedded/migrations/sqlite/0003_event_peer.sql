-- Where each event came from (Config.StorePeerShare): the peer's key, an
-- IPv4 address or an IPv6 /64; '' for loopback clients, the node's own
-- connection and the events stored before, which count against no share.
ALTER TABLE events ADD COLUMN peer TEXT NOT NULL DEFAULT '';
-- A peer's events, oldest first: the first its share deletes.
CREATE INDEX events_peer ON events(peer, seq) WHERE peer <> '';
-- Its regular events, oldest first: the first of them that go. The
-- queries repeat the conditions (peer <> '' too: SQLite does not infer it
-- from peer = ?), or the planner cannot use these partial indexes.
CREATE INDEX events_peer_regular ON events(peer, seq)
	WHERE peer <> '' AND NOT (kind IN (0, 3) OR kind BETWEEN 10000 AND 19999 OR kind BETWEEN 30000 AND 39999);
-- What each peer holds, kept by the triggers below whatever deletes an
-- event (the bound, a replacement, the expiry sweep), so that a write
-- reads one row instead of counting the peer's events.
CREATE TABLE peer_usage (
	peer   TEXT    NOT NULL PRIMARY KEY,
	events INTEGER NOT NULL,
	bytes  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER events_peer_insert AFTER INSERT ON events WHEN NEW.peer <> '' BEGIN
	INSERT INTO peer_usage (peer, events, bytes) VALUES (NEW.peer, 1, coalesce(NEW.size, length(NEW.raw)))
		ON CONFLICT (peer) DO UPDATE SET events = events + 1, bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER events_peer_delete AFTER DELETE ON events WHEN OLD.peer <> '' BEGIN
	UPDATE peer_usage SET events = events - 1, bytes = bytes - coalesce(OLD.size, length(OLD.raw))
		WHERE peer = OLD.peer;
	DELETE FROM peer_usage WHERE peer = OLD.peer AND events <= 0;
END;
