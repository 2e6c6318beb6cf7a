-- Nothing on PostgreSQL. SQLite keeps each requester's snapshot bytes in
-- executor_snapshot_totals (its 0005), so that a promotion need not sum
-- them; on PostgreSQL, which several processes write at once, a totals row
-- locked by one promotion's commit while its pruning reaches another
-- requester's snapshots could make two commits wait for each other, so the
-- promotion sums the requester's snapshots in one statement, as before.
SELECT 1;
