-- The rollback cooldown is per path, not per requester: when each path was
-- last restored by a rollback. An action that changes one of these paths
-- within the cooldown needs confirmation, whoever proposes it, so a second
-- identity cannot send an undone change back in. Times are microseconds
-- since the Unix epoch; rows older than the cooldown are deleted at each
-- rollback. executor_actions.repeat_key (the cooldown of one requester's
-- same proposal) is no longer written or read.
CREATE TABLE executor_rollback_paths (
	path           TEXT    NOT NULL PRIMARY KEY,
	rolled_back_at INTEGER NOT NULL
);
CREATE INDEX executor_rollback_paths_at ON executor_rollback_paths (rolled_back_at);
DROP INDEX executor_actions_repeat;
