-- The agent's jobs: one row per task the agent works on. Times are
-- microseconds since the Unix epoch; 0 is none.
--   status         the job manifest status (PENDING, RUNNING, …)
--   lease_holder   the process that works on it; lease_until when that
--                  claim lapses (a job whose node died is claimed again)
--   next_seq       the sequence of the next interaction
--   pending_input  what the next model call is told first: a follow-up
--                  message, an operator's decision
--   recovery_seq   the sequence after the last recovery point (-1: none)
CREATE TABLE agent_jobs (
	task_id           TEXT    NOT NULL PRIMARY KEY,
	requester         TEXT    NOT NULL,
	description       TEXT    NOT NULL DEFAULT '',
	status            TEXT    NOT NULL,
	phase             TEXT    NOT NULL DEFAULT 'work',
	lease_holder      TEXT    NOT NULL DEFAULT '',
	lease_until       INTEGER NOT NULL DEFAULT 0,
	steps             INTEGER NOT NULL DEFAULT 0,
	cost_cents        REAL    NOT NULL DEFAULT 0,
	seconds           REAL    NOT NULL DEFAULT 0,
	prompt_tokens     INTEGER NOT NULL DEFAULT 0,
	completion_tokens INTEGER NOT NULL DEFAULT 0,
	retries           INTEGER NOT NULL DEFAULT 0,
	history_bytes     INTEGER NOT NULL DEFAULT 0,
	next_seq          INTEGER NOT NULL DEFAULT 0,
	pending_input     TEXT    NOT NULL DEFAULT '',
	recovery_seq      INTEGER NOT NULL DEFAULT -1,
	reason            TEXT    NOT NULL DEFAULT '',
	created_at        INTEGER NOT NULL,
	updated_at        INTEGER NOT NULL
);
-- The runnable jobs, oldest first.
CREATE INDEX agent_jobs_runnable ON agent_jobs (status, lease_until, created_at);
-- One row per model call (and per decision fed back), in order: the job
-- history. body is the interaction's JSON.
CREATE TABLE agent_interactions (
	task_id TEXT    NOT NULL,
	seq     INTEGER NOT NULL,
	body    TEXT    NOT NULL,
	PRIMARY KEY (task_id, seq)
);
-- Recovery points: one row per completed phase.
CREATE TABLE agent_recovery_points (
	task_id TEXT    NOT NULL,
	seq     INTEGER NOT NULL,
	body    TEXT    NOT NULL,
	PRIMARY KEY (task_id, seq)
);
