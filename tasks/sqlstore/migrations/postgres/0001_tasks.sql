-- Tasks: the columns List and the node query, plus the task's JSON.
-- Times are microseconds since the Unix epoch, as in SQLite (to_timestamp(
-- created_at / 1e6) reads them); history, artifacts and metadata are the
-- JSON of the Go values, kept as text so that the bytes a peer sent come
-- back unchanged (jsonb would reorder keys). Identifiers compare bytewise
-- (COLLATE "C"), as Go and SQLite order them.
CREATE TABLE tasks (
	id              text COLLATE "C" NOT NULL PRIMARY KEY,
	owner           text COLLATE "C" NOT NULL,
	context_id      text COLLATE "C" NOT NULL DEFAULT '',
	state           text COLLATE "C" NOT NULL CHECK (state IN ('submitted', 'working', 'input_required', 'completed', 'failed', 'canceled')),
	status_ts       bigint NOT NULL,
	status_message  text   NOT NULL DEFAULT '',
	version         bigint NOT NULL CHECK (version >= 1),
	idempotency_key text COLLATE "C" NOT NULL DEFAULT '',
	created_at      bigint NOT NULL,
	updated_at      bigint NOT NULL,
	history         text   NOT NULL,
	artifacts       text   NOT NULL,
	metadata        text   NOT NULL
);
-- One index per List filter, each ending with List's order.
CREATE INDEX tasks_owner   ON tasks (owner, created_at, id);
CREATE INDEX tasks_context ON tasks (context_id, created_at, id);
CREATE INDEX tasks_state   ON tasks (state, created_at, id);
CREATE INDEX tasks_created ON tasks (created_at, id);
CREATE INDEX tasks_idempotency ON tasks (owner, idempotency_key) WHERE idempotency_key <> '';
