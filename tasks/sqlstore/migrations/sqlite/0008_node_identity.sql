-- The node whose database this is: its address (P2TR, of its network),
-- recorded at its first start (or at the first start after this
-- migration, on a database made before it) and never changed. A node
-- started with another key, or replicas on PostgreSQL with another key,
-- are refused rather than carry these tasks, jobs and audit log on under
-- another address. recorded_at is microseconds since the Unix epoch.
CREATE TABLE node_identity (
	id          INTEGER PRIMARY KEY CHECK (id = 1),
	address     TEXT    NOT NULL,
	recorded_at INTEGER NOT NULL
);
