-- cancels_given_up counts the records of a job's work elsewhere to cancel
-- (agent_sent_cancels, 0013) given up after their last try, the peer not
-- answering the cancel: work the node did not cancel, which the job's
-- history tells (a count, not the records), as cancels_dropped (0014)
-- tells those dropped past the job's bound.
ALTER TABLE agent_jobs ADD COLUMN cancels_given_up BIGINT NOT NULL DEFAULT 0;
