-- The token of the call that holds the action (claim_token): a new one
-- is written by each claim (an approval's, a rollback's) and by a
-- promotion inserted as "promoting", and every later write of that call
-- is conditioned on it as well as on the state. A record in no state a
-- call holds (anything but approving, promoting, rolling_back) has ''; a
-- recovery that takes up an action left standing past reconcile_after
-- moves it to such a state, so that the stalled call, and no later
-- claim's, finds it no longer holds the action. Records made before have
-- '', which the next claim replaces.
ALTER TABLE executor_actions ADD COLUMN claim_token TEXT NOT NULL DEFAULT '';
