-- model_sent_cancel is what the job's model last recorded of the job
-- (model_sent, see 0006 and 0010) once the job no longer continues the
-- work it names (a delegate's task on another agent): the job ended other
-- than in success (canceled, halted at a limit, its task failed), or was
-- rewound to a checkpoint. The write that ends or rewinds the job moves
-- model_sent here; the process that takes it (sets it to '') cancels that
-- work, once. Canceled jobs' records kept in model_sent (0010) move here.
ALTER TABLE agent_jobs ADD COLUMN model_sent_cancel TEXT NOT NULL DEFAULT '';
UPDATE agent_jobs SET model_sent_cancel = model_sent, model_sent = '' WHERE status = 'CANCELED' AND model_sent <> '';
-- Each reconcile pass lists the records left to take.
CREATE INDEX agent_jobs_sent_cancel ON agent_jobs (task_id) WHERE model_sent_cancel <> '';
