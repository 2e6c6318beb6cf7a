-- agent_sent_cancels holds the work elsewhere (a delegate's task on
-- another agent) that jobs no longer go on with and that is not canceled
-- yet: one row for each record of a job's model (model_sent, see 0006)
-- given up to be canceled, by the write that ended the job other than in
-- success or rewound it to a checkpoint, or by the model itself (a step's
-- cancel its peer did not answer). A job's rows do not take each other's
-- place, as the one record of model_sent_cancel (0011, 0012) did: a job
-- rewound while its earlier cancel was pending, and which ended again,
-- lost that cancel. id orders the rows; sent is the model's record (which
-- names the peer and its task); taken_until marks the row taken by the
-- process sending the cancel, until then (microseconds since the epoch;
-- 0: not taken); tries counts the takes, past a bound the row is given
-- up. A row is deleted once its cancel was answered or given up, or when
-- the job gives up more than a bound of rows (the oldest go).
CREATE TABLE agent_sent_cancels (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	task_id     TEXT    NOT NULL,
	sent        TEXT    NOT NULL,
	taken_until INTEGER NOT NULL DEFAULT 0,
	tries       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX agent_sent_cancels_job ON agent_sent_cancels (task_id, id);
-- The records waiting in model_sent_cancel move here, taken as they were.
INSERT INTO agent_sent_cancels (task_id, sent, taken_until, tries)
	SELECT task_id, model_sent_cancel, model_sent_cancel_until, model_sent_cancel_tries
	FROM agent_jobs WHERE model_sent_cancel <> '' ORDER BY task_id;
DROP INDEX agent_jobs_sent_cancel;
ALTER TABLE agent_jobs DROP COLUMN model_sent_cancel;
ALTER TABLE agent_jobs DROP COLUMN model_sent_cancel_until;
ALTER TABLE agent_jobs DROP COLUMN model_sent_cancel_tries;
