-- settled is 0 while a job's task has yet to show the job's status (the
-- job waits for a human or ended, and the task's state was not written
-- yet): a node that stopped in between finishes it at its next start.
ALTER TABLE agent_jobs ADD COLUMN settled INTEGER NOT NULL DEFAULT 1;
CREATE INDEX agent_jobs_unsettled ON agent_jobs (settled) WHERE settled = 0;
