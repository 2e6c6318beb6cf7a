-- What each requester has added to the workspace: the net bytes, regular
-- files and directories of the actions it proposed that are promoted and
-- not rolled back (never below zero), checked against the requester
-- quotas. Written in the commit that records a promotion or a rollback;
-- a row back to all zeros is deleted.
CREATE TABLE executor_usage (
	requester text COLLATE "C" NOT NULL PRIMARY KEY,
	bytes     bigint NOT NULL,
	files     bigint NOT NULL,
	dirs      bigint NOT NULL
);
