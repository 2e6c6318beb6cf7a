-- The records of actions that ended and can change nothing more, by the
-- time they last changed: those whose task the node's task retention
-- deleted are forgotten with it (Executor.Forget).
CREATE INDEX executor_actions_ended ON executor_actions (updated_at, action_id)
	WHERE snapshot = '' AND state IN ('completed', 'denied', 'failed', 'promoted', 'rolled_back');
