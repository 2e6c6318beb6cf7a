-- review_seq is the sequence of the worker's COMPLETED answer the
-- supervisor reviews while the job is in its review phase (-1: none).
ALTER TABLE agent_jobs ADD COLUMN review_seq INTEGER NOT NULL DEFAULT -1;
