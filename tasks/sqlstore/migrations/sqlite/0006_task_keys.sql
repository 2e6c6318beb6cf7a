-- The idempotency keys sent with messages to existing tasks
-- (tasks.Store.AppendKeyed), kept in the transaction of the message they
-- came with, one per (owner, key) as the key that created a task is
-- (tasks.idempotency_key), so that a retry after a restart finds it. They
-- go with their task (ON DELETE CASCADE) when it is pruned; a task holds at
-- most one per message of its history.
CREATE TABLE task_keys (
	owner    TEXT NOT NULL,
	idem_key TEXT NOT NULL,
	task_id  TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	PRIMARY KEY (owner, idem_key)
) WITHOUT ROWID;
-- The cascade finds a pruned task's keys.
CREATE INDEX task_keys_task ON task_keys (task_id);
