-- The ended jobs by the time they ended, oldest first: those whose task
-- the node's task retention deleted are forgotten with it (Store.Ended,
-- Store.Forget).
CREATE INDEX agent_jobs_ended ON agent_jobs (updated_at, task_id)
	WHERE status IN ('SUCCESS', 'CANCELED', 'HALTED_COST', 'HALTED_TIME');
