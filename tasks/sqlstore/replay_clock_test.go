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

// Two processes on one database, the sweeping one's clock 30 s fast:
// a message dated at the window's future edge, recorded by the process
// whose clock is right, stays refused by it (2006) until its timestamp
// leaves the window, whatever the other sweeps meanwhile. Before, the
// fast process's sweep deleted the record as soon as its own clock
// passed the record's expiry, 30 s early, and a replay in those 30 s was
// taken as fresh. The record goes at a sweep once it expired half its
// lifetime before.
func TestReplaySweepByAFastClock(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		key, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		const fast = 30 * time.Second
		right := testclock.New(t0)
		writer, sweeper := open(t, dsn, Options{}), open(t, dsn, Options{})
		validate := func(raw []byte) error {
			// A new Validator each time: no memory of the message but
			// the database's.
			_, err := snap.NewValidator(snap.Config{Now: right.Now, Replay: writer.ReplayStore()}).Validate(ctx, raw)
			return err
		}
		d := int64(snap.DefaultMaxDrift / time.Second)
		ahead := signedAt(t, key, "ahead", t0.Unix()+d)
		if err := validate(ahead); err != nil {
			t.Fatal(err)
		}
		// Every 10 s the fast process sweeps, and the message is
		// replayed, until the last second its timestamp is in the window.
		for right.Now().Unix() < t0.Unix()+2*d {
			right.Advance(10 * time.Second)
			if _, err := sweeper.ReplayStore().Sweep(ctx, right.Now().Add(fast)); err != nil {
				t.Fatal(err)
			}
			if err := validate(ahead); snapCode(err) != snap.CodeDuplicateMessage {
				t.Fatalf("at %v, the sweeper's clock at %v: %v, want 2006", right.Now(), right.Now().Add(fast), err)
			}
		}
		// Past the window, the record is swept once it expired half its
		// lifetime (121 s) before the sweeper's clock.
		rec, ok, err := writer.ReplayStore().Lookup(ctx, key.Address(identity.Mainnet), "ahead", right.Now())
		if err != nil || !ok {
			t.Fatalf("lookup: %v, %v", ok, err)
		}
		margin := rec.Expires.Sub(rec.FirstSeen) / 2
		if margin < MinSweepMargin {
			t.Fatalf("a record of %v", rec.Expires.Sub(rec.FirstSeen))
		}
		if n, err := sweeper.ReplayStore().Sweep(ctx, rec.Expires.Add(margin-time.Microsecond)); err != nil || n != 0 {
			t.Fatalf("sweep within the margin: %d, %v; want 0", n, err)
		}
		if n, err := sweeper.ReplayStore().Sweep(ctx, rec.Expires.Add(margin)); err != nil || n != 1 {
			t.Fatalf("sweep at the margin's end: %d, %v; want 1", n, err)
		}
		// A process with a window of 10 minutes keeps a record 20
		// minutes and a second: it is kept 10 minutes past that.
		wide := snap.ReplayRecord{FirstSeen: t0, Expires: t0.Add(20*time.Minute + time.Second)}
		if _, fresh, err := writer.ReplayStore().Remember(ctx, "wide", "m", wide); err != nil || !fresh {
			t.Fatalf("remember: %v, %v", fresh, err)
		}
		if n, err := sweeper.ReplayStore().Sweep(ctx, wide.Expires.Add(10*time.Minute)); err != nil || n != 0 {
			t.Fatalf("sweep 10 minutes after the expiry: %d, %v; want 0", n, err)
		}
		if n, err := sweeper.ReplayStore().Sweep(ctx, wide.Expires.Add(10*time.Minute+time.Second)); err != nil || n != 1 {
			t.Fatalf("sweep 10 minutes and a second after the expiry: %d, %v; want 1", n, err)
		}
	})
}
