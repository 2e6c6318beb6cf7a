-- Whom each replica counts among those sharing the requests. run names the
-- replica's present spell of receiving (a number it changes each time it
-- begins to receive, 0 while it does not); counts names each replica it
-- counts with the run read in that one's row ("id:run", space separated).
-- A replica takes no share of its own until every other row beating and
-- receiving names it with its present run. NULL: a row written by a build
-- from before these columns, which says nothing of whom it counts.
ALTER TABLE inbox_replicas ADD COLUMN run BIGINT;
ALTER TABLE inbox_replicas ADD COLUMN counts TEXT;
