-- The bytes of each requester's prunable snapshots (stored, and of a
-- record neither promoting nor rolling back), kept by a trigger on every
-- write of executor_actions, so that a promotion reads one row to learn
-- whether the byte bound is passed instead of summing the requester's
-- snapshots every time. A row may reach zero; it is kept.
CREATE TABLE executor_snapshot_totals (
	requester TEXT   NOT NULL PRIMARY KEY,
	bytes     BIGINT NOT NULL
);
INSERT INTO executor_snapshot_totals (requester, bytes)
	SELECT requester, SUM(snapshot_bytes) FROM executor_actions
	WHERE snapshot <> '' AND state NOT IN ('promoting', 'rolling_back')
	GROUP BY requester;
CREATE FUNCTION executor_snapshot_totals_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	before_bytes BIGINT := 0;
	after_bytes BIGINT := 0;
BEGIN
	IF TG_OP <> 'INSERT' AND OLD.snapshot <> '' AND OLD.state NOT IN ('promoting', 'rolling_back') THEN
		before_bytes := OLD.snapshot_bytes;
	END IF;
	IF TG_OP <> 'DELETE' AND NEW.snapshot <> '' AND NEW.state NOT IN ('promoting', 'rolling_back') THEN
		after_bytes := NEW.snapshot_bytes;
	END IF;
	IF TG_OP = 'UPDATE' AND OLD.requester = NEW.requester THEN
		IF before_bytes <> after_bytes THEN
			INSERT INTO executor_snapshot_totals (requester, bytes) VALUES (NEW.requester, after_bytes - before_bytes)
				ON CONFLICT (requester) DO UPDATE SET bytes = executor_snapshot_totals.bytes + EXCLUDED.bytes;
		END IF;
		RETURN NULL;
	END IF;
	IF before_bytes <> 0 THEN
		INSERT INTO executor_snapshot_totals (requester, bytes) VALUES (OLD.requester, -before_bytes)
			ON CONFLICT (requester) DO UPDATE SET bytes = executor_snapshot_totals.bytes + EXCLUDED.bytes;
	END IF;
	IF after_bytes <> 0 THEN
		INSERT INTO executor_snapshot_totals (requester, bytes) VALUES (NEW.requester, after_bytes)
			ON CONFLICT (requester) DO UPDATE SET bytes = executor_snapshot_totals.bytes + EXCLUDED.bytes;
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER executor_snapshot_totals_count AFTER INSERT OR UPDATE OR DELETE ON executor_actions
	FOR EACH ROW EXECUTE FUNCTION executor_snapshot_totals_count();
