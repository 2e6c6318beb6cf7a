-- Tasks: the columns List and the node query, plus the task's JSON.
-- Times are microseconds since the Unix epoch (the precision the service
-- keeps); history, artifacts and metadata are the JSON of the Go values.
CREATE TABLE tasks (
	id              TEXT    NOT NULL PRIMARY KEY,
	owner           TEXT    NOT NULL,
	context_id      TEXT    NOT NULL DEFAULT '',
	state           TEXT    NOT NULL CHECK (state IN ('submitted', 'working', 'input_required', 'completed', 'failed', 'canceled')),
	status_ts       INTEGER NOT NULL,
	status_message  TEXT    NOT NULL DEFAULT '',
	version         INTEGER NOT NULL CHECK (version >= 1),
	idempotency_key TEXT    NOT NULL DEFAULT '',
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	history         TEXT    NOT NULL,
	artifacts       TEXT    NOT NULL,
	metadata        TEXT    NOT NULL
);
-- One index per List filter, each ending with List's order.
CREATE INDEX tasks_owner   ON tasks (owner, created_at, id);
CREATE INDEX tasks_context ON tasks (context_id, created_at, id);
CREATE INDEX tasks_state   ON tasks (state, created_at, id);
CREATE INDEX tasks_created ON tasks (created_at, id);
CREATE INDEX tasks_idempotency ON tasks (owner, idempotency_key) WHERE idempotency_key <> '';
