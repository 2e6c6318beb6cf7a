-- The Nostr deliveries recorded, by event id: processes sharing the
-- requests out ask which of the requests they passed over another process
-- took (ReplayStore.Recorded) before they forget them. Only Nostr
-- deliveries have an id.
CREATE INDEX replay_via ON replay (via) WHERE via <> '';
