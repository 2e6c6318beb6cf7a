-- What each event counts against the store's bound (Config.StoreMaxBytes):
-- its JSON and, twice, its indexed tags (the tags table and its index).
-- NULL for events stored before: they count by their JSON.
ALTER TABLE events ADD COLUMN size INTEGER;
-- The regular events, oldest first: the first the bound deletes.
CREATE INDEX events_regular ON events(seq)
	WHERE NOT (kind IN (0, 3) OR kind BETWEEN 10000 AND 19999 OR kind BETWEEN 30000 AND 39999);
