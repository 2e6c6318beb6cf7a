-- Where the inbox resumes on each relay after a restart: by relay URL,
-- the newest created_at (seconds since the Unix epoch) that relay brought,
-- every request it held up to then received and processed. A relay with
-- no row resumes from the newest processed request. It only moves
-- forward; a row far older than the newest (a relay no longer configured,
-- or away that long) is deleted as new points come.
CREATE TABLE inbox_relays (
	relay_url TEXT   NOT NULL PRIMARY KEY,
	resume_at BIGINT NOT NULL
);
