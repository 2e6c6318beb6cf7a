-- model_sent_cancel_until marks the record to cancel (model_sent_cancel,
-- see 0011) taken: the process that took it is sending the cancel, until
-- then (microseconds since the epoch; 0: not taken). The record is
-- forgotten only once the work's peer answered the cancel; a mark that
-- lapsed (the process stopped or crashed before the answer, or the peer
-- did not answer) lets any process take the record again and send the
-- cancel again. model_sent_cancel_tries counts the takes: past a bound the
-- record is given up.
ALTER TABLE agent_jobs ADD COLUMN model_sent_cancel_until BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agent_jobs ADD COLUMN model_sent_cancel_tries INTEGER NOT NULL DEFAULT 0;
