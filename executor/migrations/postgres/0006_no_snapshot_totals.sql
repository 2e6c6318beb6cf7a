-- PostgreSQL keeps no snapshot totals after all: on a database that
-- several processes write at once, a totals row locked by one promotion's
-- commit while its pruning reached another requester's snapshots could
-- make two commits wait for each other. A promotion sums the requester's
-- snapshots in one statement instead (see the executor's
-- pruneSnapshotsTx); 0005's trigger, function and table go.
DROP TRIGGER IF EXISTS executor_snapshot_totals_count ON executor_actions;
DROP FUNCTION IF EXISTS executor_snapshot_totals_count();
DROP TABLE IF EXISTS executor_snapshot_totals;
