-- The delivery that carried each message first (a Nostr event id; see
-- snap.Inbound.Via), so that replicas sharing the database answer one
-- delivery once, and the message/send result a retry gets back
-- (snap.ResultStore), kept with the record it belongs to.
ALTER TABLE replay ADD COLUMN via TEXT NOT NULL DEFAULT '';
ALTER TABLE replay ADD COLUMN result BLOB;
