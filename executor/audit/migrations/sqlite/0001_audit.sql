-- The audit log: one row per entry, in the order of seq (gapless, from 1).
-- Times are microseconds since the Unix epoch. Hashes are lowercase hex
-- SHA-256; detail is compact JSON, '' for none. No CHECK constraints: the
-- hash chain, not the schema, is what says whether a row is genuine, and
-- Verify reads whatever the table holds.
CREATE TABLE audit_log (
	seq            INTEGER PRIMARY KEY,
	ts             INTEGER NOT NULL,
	actor          TEXT    NOT NULL,
	task           TEXT    NOT NULL DEFAULT '',
	action         TEXT    NOT NULL DEFAULT '',
	step           TEXT    NOT NULL,
	decision       TEXT    NOT NULL DEFAULT '',
	reason         TEXT    NOT NULL DEFAULT '',
	policy_version TEXT    NOT NULL DEFAULT '',
	pre_hash       TEXT    NOT NULL DEFAULT '',
	post_hash      TEXT    NOT NULL DEFAULT '',
	detail         TEXT    NOT NULL DEFAULT '',
	prev           TEXT    NOT NULL,
	hash           TEXT    NOT NULL
);
-- Query's filters: a task's or an action's entries in order.
CREATE INDEX audit_log_task   ON audit_log (task, seq) WHERE task <> '';
CREATE INDEX audit_log_action ON audit_log (action, seq) WHERE action <> '';

-- The head record, one row: where the retained chain starts (the first
-- seq kept and the hash its entry chains to: the genesis value, or the
-- hash of the last entry pruned) and where it ends (the last seq and its
-- hash). Every append and every prune updates it in its transaction, so
-- that deleting entries at either end is seen by Verify.
CREATE TABLE audit_head (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	first_seq  INTEGER NOT NULL,
	first_prev TEXT    NOT NULL,
	last_seq   INTEGER NOT NULL,
	last_hash  TEXT    NOT NULL
);
INSERT INTO audit_head (id, first_seq, first_prev, last_seq, last_hash) VALUES (1, 1,
	'0000000000000000000000000000000000000000000000000000000000000000', 0,
	'0000000000000000000000000000000000000000000000000000000000000000');
