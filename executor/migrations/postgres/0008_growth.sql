-- What an action adds to its requester's usage, each count at zero or
-- more (grow_bytes, grow_files, grow_dirs): written with the record that
-- goes "promoting", and counted against the requester's quotas, with the
-- usage row, while the record is still promoting. Every way out of
-- "promoting" (promoted and counted in usage, failed, back to approval,
-- undone) drops it by itself.
ALTER TABLE executor_actions ADD COLUMN grow_bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE executor_actions ADD COLUMN grow_files bigint NOT NULL DEFAULT 0;
ALTER TABLE executor_actions ADD COLUMN grow_dirs bigint NOT NULL DEFAULT 0;
