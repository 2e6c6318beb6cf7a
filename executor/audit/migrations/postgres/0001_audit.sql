-- The audit log: one row per entry, in the order of seq (gapless, from 1).
-- Times are microseconds since the Unix epoch. Hashes are lowercase hex
-- SHA-256; detail is compact JSON kept as text (jsonb would reorder its
-- keys and change the hashed bytes), '' for none. No CHECK constraints:
-- the hash chain, not the schema, is what says whether a row is genuine,
-- and Verify reads whatever the table holds. Identifiers compare bytewise.
CREATE TABLE audit_log (
	seq            bigint NOT NULL PRIMARY KEY,
	ts             bigint NOT NULL,
	actor          text COLLATE "C" NOT NULL,
	task           text COLLATE "C" NOT NULL DEFAULT '',
	action         text COLLATE "C" NOT NULL DEFAULT '',
	step           text COLLATE "C" NOT NULL,
	decision       text NOT NULL DEFAULT '',
	reason         text NOT NULL DEFAULT '',
	policy_version text NOT NULL DEFAULT '',
	pre_hash       text NOT NULL DEFAULT '',
	post_hash      text NOT NULL DEFAULT '',
	detail         text NOT NULL DEFAULT '',
	prev           text COLLATE "C" NOT NULL,
	hash           text COLLATE "C" NOT NULL
);
-- Query's filters: a task's or an action's entries in order.
CREATE INDEX audit_log_task   ON audit_log (task, seq) WHERE task <> '';
CREATE INDEX audit_log_action ON audit_log (action, seq) WHERE action <> '';

-- The head record, one row: where the retained chain starts (the first
-- seq kept and the hash its entry chains to: the genesis value, or the
-- hash of the last entry pruned) and where it ends (the last seq and its
-- hash). Every append and every prune updates it in its transaction,
-- holding it with SELECT … FOR UPDATE, which also serializes appenders in
-- all processes sharing the database.
CREATE TABLE audit_head (
	id         integer NOT NULL PRIMARY KEY CHECK (id = 1),
	first_seq  bigint  NOT NULL,
	first_prev text    NOT NULL,
	last_seq   bigint  NOT NULL,
	last_hash  text    NOT NULL
);
INSERT INTO audit_head (id, first_seq, first_prev, last_seq, last_hash) VALUES (1, 1,
	'0000000000000000000000000000000000000000000000000000000000000000', 0,
	'0000000000000000000000000000000000000000000000000000000000000000');
