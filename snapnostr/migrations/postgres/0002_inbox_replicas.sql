-- The replicas of this identity sharing the database: each process beats
-- its row (beat counts up) while it receives requests, so that the others
-- divide the requests among those alive. A row whose beat stops moving is
-- a replica gone; a replica that stops cleanly deletes its own row.
CREATE TABLE inbox_replicas (
	replica   TEXT    NOT NULL PRIMARY KEY,
	beat      BIGINT  NOT NULL,
	receiving INTEGER NOT NULL
);
