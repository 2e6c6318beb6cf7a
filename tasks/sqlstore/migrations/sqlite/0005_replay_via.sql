-- Nothing on SQLite: processes share the requests out on PostgreSQL only
-- (see the PostgreSQL migration of this number), and one process using a
-- SQLite file never asks ReplayStore.Recorded. Kept so that both dialects
-- number their migrations alike.
SELECT 1;
