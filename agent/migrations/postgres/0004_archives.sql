-- History archives: a job's oldest interactions, once its stored history
-- passes agent.max_history_bytes, moved into compressed segments, in order
-- (idx from 0). body is the interactions' JSON, one a line, gzipped, and
-- sealed (AES-256-GCM) when sealed is 1. hash chains the segments:
-- SHA-256 of the previous segment's hash, the sequences and the body.
CREATE TABLE agent_history_segments (
	task_id   TEXT    NOT NULL,
	idx       BIGINT  NOT NULL,
	first_seq BIGINT  NOT NULL,
	last_seq  BIGINT  NOT NULL,
	sealed    BIGINT  NOT NULL DEFAULT 0,
	prev_hash TEXT    NOT NULL,
	hash      TEXT    NOT NULL,
	body      BYTEA   NOT NULL,
	PRIMARY KEY (task_id, idx)
);
