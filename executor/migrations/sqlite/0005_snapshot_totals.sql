-- The bytes of each requester's prunable snapshots (stored, and of a
-- record neither promoting nor rolling back), kept by triggers on every
-- write of executor_actions, so that a promotion reads one row to learn
-- whether the byte bound is passed instead of summing the requester's
-- snapshots every time. A row may reach zero; it is kept.
CREATE TABLE executor_snapshot_totals (
	requester TEXT    NOT NULL PRIMARY KEY,
	bytes     INTEGER NOT NULL
);
INSERT INTO executor_snapshot_totals (requester, bytes)
	SELECT requester, SUM(snapshot_bytes) FROM executor_actions
	WHERE snapshot <> '' AND state NOT IN ('promoting', 'rolling_back')
	GROUP BY requester;
CREATE TRIGGER executor_snapshot_totals_insert AFTER INSERT ON executor_actions
	WHEN NEW.snapshot <> '' AND NEW.state NOT IN ('promoting', 'rolling_back')
BEGIN
	INSERT INTO executor_snapshot_totals (requester, bytes) VALUES (NEW.requester, NEW.snapshot_bytes)
		ON CONFLICT (requester) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER executor_snapshot_totals_update AFTER UPDATE OF requester, state, snapshot, snapshot_bytes ON executor_actions
	WHEN OLD.requester <> NEW.requester
		OR CASE WHEN OLD.snapshot <> '' AND OLD.state NOT IN ('promoting', 'rolling_back') THEN OLD.snapshot_bytes ELSE 0 END
		<> CASE WHEN NEW.snapshot <> '' AND NEW.state NOT IN ('promoting', 'rolling_back') THEN NEW.snapshot_bytes ELSE 0 END
BEGIN
	INSERT INTO executor_snapshot_totals (requester, bytes)
		SELECT OLD.requester, -OLD.snapshot_bytes
		WHERE OLD.snapshot <> '' AND OLD.state NOT IN ('promoting', 'rolling_back')
		ON CONFLICT (requester) DO UPDATE SET bytes = bytes + excluded.bytes;
	INSERT INTO executor_snapshot_totals (requester, bytes)
		SELECT NEW.requester, NEW.snapshot_bytes
		WHERE NEW.snapshot <> '' AND NEW.state NOT IN ('promoting', 'rolling_back')
		ON CONFLICT (requester) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER executor_snapshot_totals_delete AFTER DELETE ON executor_actions
	WHEN OLD.snapshot <> '' AND OLD.state NOT IN ('promoting', 'rolling_back')
BEGIN
	INSERT INTO executor_snapshot_totals (requester, bytes) VALUES (OLD.requester, -OLD.snapshot_bytes)
		ON CONFLICT (requester) DO UPDATE SET bytes = bytes + excluded.bytes;
END;
