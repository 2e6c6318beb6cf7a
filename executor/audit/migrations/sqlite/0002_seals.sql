-- The seals (step 'sealed'): Seal and Prune find the newest one without
-- reading the log.
CREATE INDEX audit_log_sealed ON audit_log (seq) WHERE step = 'sealed';
