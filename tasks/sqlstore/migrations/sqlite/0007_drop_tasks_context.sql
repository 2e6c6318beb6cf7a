-- No query the node makes reads tasks by context: each task has a context
-- of its own, and only a List filter no caller sets matched on it, so the
-- index on (context_id, created_at, id) was one more B-tree every task's
-- commit wrote for nothing. A List by context alone now reads the table; by
-- owner and context, the owner's index.
DROP INDEX tasks_context;
