-- cancels_dropped counts the records of a job's work elsewhere to cancel
-- (agent_sent_cancels, 0013) that were dropped past the job's bound: work
-- the node does not cancel, which the job's history tells (a count, not
-- the records).
ALTER TABLE agent_jobs ADD COLUMN cancels_dropped INTEGER NOT NULL DEFAULT 0;
