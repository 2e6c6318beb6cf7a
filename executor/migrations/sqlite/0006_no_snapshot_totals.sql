-- Nothing on SQLite, whose one writer makes the totals of 0005 safe: the
-- same version on PostgreSQL removes them there (see its 0006).
SELECT 1;
