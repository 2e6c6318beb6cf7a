-- Task events (tasks.Store.Events): each status change and artifact, at the
-- task version the change produced, written in the transaction of the
-- change. They go with their task (ON DELETE CASCADE) when it is pruned.
CREATE TABLE task_events (
	task_id text COLLATE "C" NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	version bigint NOT NULL CHECK (version >= 1),
	kind    text   NOT NULL CHECK (kind IN ('status', 'artifact')),
	body    text   NOT NULL,
	PRIMARY KEY (task_id, version)
);
-- Prune finds terminal tasks by the time they became terminal.
CREATE INDEX tasks_terminal ON tasks (status_ts) WHERE state IN ('completed', 'failed', 'canceled');
