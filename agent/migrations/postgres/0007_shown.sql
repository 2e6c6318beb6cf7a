-- shown is what the task of a job waiting for a human shows its
-- requester, written with the job's status, when it is not the job's
-- reason (the operator's, which may name the node's addresses): the
-- reconcile shows it, as the job did. '' is the reason.
ALTER TABLE agent_jobs ADD COLUMN shown TEXT NOT NULL DEFAULT '';
