package sqlstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/snap"
)

// signedAt is a message/send from key to the test's recipient, signed,
// with timestamp ts.
func signedAt(t *testing.T, key *identity.Key, id string, ts int64) []byte {
	t.Helper()
	m := &snap.Message{ID: id, Version: "0.1", Type: snap.TypeRequest, Method: "message/send",
		From: key.Address(identity.Mainnet), Payload: []byte(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`), Timestamp: ts}
	if err := m.Sign(key); err != nil {
		t.Fatal(err)
	}
	raw, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func snapCode(err error) snap.Code {
	if e, ok := errors.AsType[*snap.Error](err); ok {
		return e.Code
	}
	return 0
}

// The durable replay record holds a message for as long as its timestamp
// is acceptable, across a restart and the sweeper's rounds: a message
// dated at the window's future edge and first seen at .999 of a second is
// a replay (2006) at the last moment its timestamp is in the window, to a
// new Validator on the reopened database after a sweep at that moment,
// and 2004 just after. A step of the wall clock back keeps the record:
// the message is 2006 again when the clock returns to its time.
func TestReplayRecordHeldWhileTheTimestampIsAcceptable(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		key, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Unix(t0.Unix(), 999_999_999)
		clock := testclock.New(start)
		validator := func(s *Store) *snap.Validator {
			return snap.NewValidator(snap.Config{Now: clock.Now, Replay: s.ReplayStore()})
		}
		d := int64(snap.DefaultMaxDrift / time.Second)
		ahead := signedAt(t, key, "ahead", t0.Unix()+d)
		stepped := signedAt(t, key, "stepped", t0.Unix())
		s := open(t, dsn, Options{})
		for _, raw := range [][]byte{ahead, stepped} {
			if _, err := validator(s).Validate(ctx, raw); err != nil {
				t.Fatal(err)
			}
		}

		// The clock steps back an hour and comes back.
		clock.Advance(-time.Hour)
		if n, err := s.ReplayStore().Sweep(ctx, clock.Now()); err != nil || n != 0 {
			t.Fatalf("sweep after the step back: %d, %v", n, err)
		}
		clock.Advance(time.Hour)
		if _, err := validator(s).Validate(ctx, stepped); snapCode(err) != snap.CodeDuplicateMessage {
			t.Fatalf("the clock back at the message's time: %v, want 2006", err)
		}

		// A restart, then the last moment of ahead's window.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t, dsn, Options{})
		last := time.Unix(t0.Unix()+2*d, 999_999_999)
		clock.Advance(last.Sub(clock.Now()))
		if _, err := s.ReplayStore().Sweep(ctx, clock.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := validator(s).Validate(ctx, ahead); snapCode(err) != snap.CodeDuplicateMessage {
			t.Fatalf("at %v, %d s past the timestamp: %v, want 2006", clock.Now(), clock.Now().Unix()-(t0.Unix()+d), err)
		}
		clock.Advance(time.Nanosecond)
		if _, err := validator(s).Validate(ctx, ahead); snapCode(err) != snap.CodeTimestampExpired {
			t.Fatalf("past the window: %v, want 2004", err)
		}
	})
}
