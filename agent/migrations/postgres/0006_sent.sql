-- model_sent is what the job's model recorded of a step it sent and whose
-- answer the job has not recorded yet (a delegate's message/send: its
-- idempotency key and message id, JSON): a node that stopped in between
-- sends the step again as the same step. '' is none; the write that
-- records the answer, or moves the job out of RUNNING and REVIEWING,
-- clears it.
ALTER TABLE agent_jobs ADD COLUMN model_sent TEXT NOT NULL DEFAULT '';
