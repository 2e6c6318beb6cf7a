-- PostgreSQL's 0007 announces task events to the other processes sharing
-- the database. A SQLite file has one process (the node locks its data
-- folder): nothing to announce, and this version only keeps the two
-- dialects' numbers in step.
SELECT 1;
