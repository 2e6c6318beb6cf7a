-- told is how many of its task's messages the job was given (the first
-- as its description, the others as follow-ups), so that a message whose
-- hand-over failed after it was stored is given later; -1 for a job
-- stored before it was counted, whose messages are taken as given.
ALTER TABLE agent_jobs ADD COLUMN told INTEGER NOT NULL DEFAULT -1;
