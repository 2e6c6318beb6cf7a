-- model_sent, what the job's model recorded of a step it sent (see
-- 0006), is kept once the step is answered, the job waits for a human or
-- is queued again: it names the job's work elsewhere (a delegate's task
-- on another agent), which the job's next step continues and the job's
-- cancel stops. model_sent_answered is 1 once a write recorded the
-- model's answer since, or moved the job out of RUNNING and REVIEWING:
-- the step is not sent again as the same step. A job that ends other
-- than canceled clears model_sent; a canceled one keeps it until its
-- model's work elsewhere is canceled.
ALTER TABLE agent_jobs ADD COLUMN model_sent_answered INTEGER NOT NULL DEFAULT 0;
