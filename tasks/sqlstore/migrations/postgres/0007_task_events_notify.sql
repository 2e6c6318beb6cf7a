-- Each task event written is announced, at its commit, on the channel
-- snapnode_task_events with its task's id as the payload (PostgreSQL sends
-- one notice per task and transaction), so that the processes sharing the
-- database can stream the events the others write (Store.Watch).
CREATE FUNCTION snapnode_task_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('snapnode_task_events', NEW.task_id);
	RETURN NULL;
END
$$;
CREATE TRIGGER task_events_notify AFTER INSERT ON task_events
	FOR EACH ROW EXECUTE FUNCTION snapnode_task_events_notify();
