-- forgotten marks a job being forgotten (Store.Forget): set in one
-- transaction before its history is deleted a page at a time, and its row
-- deleted last, so that a Forget cut short leaves a job that reads as
-- forgotten, not a history missing some of its rows, and that the next
-- Forget finishes.
ALTER TABLE agent_jobs ADD COLUMN forgotten INTEGER NOT NULL DEFAULT 0;
