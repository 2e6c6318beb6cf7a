-- The executor's durable records: one row per action with effects (and
-- per action held for confirmation), from the moment it is held or about
-- to be promoted. Times are microseconds since the Unix epoch; 0 is none.
--   data        the proposal or descriptor exactly as received
--   diff        the text diff shown to the operator
--   pre_images  JSON [{path, kind, size, sha256}] the diff was made against
--   snapshot    JSON of the sandbox snapshot (pre-images with content),
--               stored before promotion, kept for rollback
--   repeat_key  SHA-256 of requester, action and paths: the same proposal
--               repeated after a rollback has the same key
CREATE TABLE executor_actions (
	action_id      TEXT    NOT NULL PRIMARY KEY,
	task           TEXT    NOT NULL DEFAULT '',
	requester      TEXT    NOT NULL,
	proposal_id    TEXT    NOT NULL DEFAULT '',
	action         TEXT    NOT NULL,
	state          TEXT    NOT NULL CHECK (state IN ('pending', 'approving', 'promoting', 'promoted',
	                       'rolling_back', 'rolled_back', 'completed', 'denied', 'failed')),
	data           BLOB    NOT NULL,
	diff           TEXT    NOT NULL DEFAULT '',
	pre_images     TEXT    NOT NULL DEFAULT '[]',
	reason         TEXT    NOT NULL DEFAULT '',
	snapshot       TEXT    NOT NULL DEFAULT '',
	repeat_key     TEXT    NOT NULL DEFAULT '',
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL,
	rolled_back_at INTEGER NOT NULL DEFAULT 0
);
-- Pending actions of a task (snapnode approve TASK), in order.
CREATE INDEX executor_actions_task ON executor_actions (task, created_at, action_id) WHERE task <> '';
-- Pending actions of the node, and interrupted ones at start-up.
CREATE INDEX executor_actions_state ON executor_actions (state, created_at, action_id);
-- The rollback cooldown: the last rollback of the same proposal.
CREATE INDEX executor_actions_repeat ON executor_actions (repeat_key, rolled_back_at) WHERE rolled_back_at > 0;
