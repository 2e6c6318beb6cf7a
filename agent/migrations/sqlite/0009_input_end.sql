-- input_end counts the bytes ever added to the job's pending input (each
-- text with the separator before it): the pending input is their last
-- part, so a step that read it up to a point takes off exactly what it
-- was told, even when the bound (agent.max_pending_input_bytes) dropped
-- the oldest of it since.
ALTER TABLE agent_jobs ADD COLUMN input_end BIGINT NOT NULL DEFAULT 0;
