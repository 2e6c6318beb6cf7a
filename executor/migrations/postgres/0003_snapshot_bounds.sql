-- Rollback snapshots are bounded: by age (snapshot_at, when the snapshot
-- was stored) and by the bytes one requester's snapshots take together
-- (snapshot_bytes). A pruned snapshot is emptied and snapshot_pruned_at
-- says when, so that a rollback past the bound says why it cannot be done.
-- Times are microseconds since the Unix epoch; 0 is none.
ALTER TABLE executor_actions ADD COLUMN snapshot_at bigint NOT NULL DEFAULT 0;
ALTER TABLE executor_actions ADD COLUMN snapshot_bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE executor_actions ADD COLUMN snapshot_pruned_at bigint NOT NULL DEFAULT 0;
UPDATE executor_actions SET snapshot_at = updated_at, snapshot_bytes = octet_length(snapshot)
	WHERE snapshot <> '';
-- The snapshots kept, by age and per requester, newest first.
CREATE INDEX executor_actions_snapshots ON executor_actions (snapshot_at) WHERE snapshot <> '';
CREATE INDEX executor_actions_requester_snapshots ON executor_actions (requester, snapshot_at) WHERE snapshot <> '';
