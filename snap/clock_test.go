package snap_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/snap"
)

// A message is remembered for as long as its timestamp is acceptable,
// whatever the fraction of the second the clock reads: one sent at the
// window's future edge, first seen at .999 of a second, is caught as a
// replay at every moment until its timestamp leaves the window, by the
// Validator that saw it and by another on the same store (a replica, or
// the node after a restart), and only then is it 2004.
func TestReplayRecordOutlivesTheWindowAtEitherEdge(t *testing.T) {
	ctx := context.Background()
	for _, drift := range []time.Duration{snap.DefaultMaxDrift, 300 * time.Second} {
		for _, edge := range []int64{-1, 1} {
			t.Run(fmt.Sprintf("%v/%+d", drift, edge), func(t *testing.T) {
				clock := testclock.New(time.Unix(t0, 999_999_999))
				store := snap.NewMemoryReplayStore(0)
				cfg := snap.Config{Now: clock.Now, MaxDrift: drift, Replay: store}
				v := snap.NewValidator(cfg)
				d := int64(drift / time.Second)
				raw := signed(t, "edge", t0+edge*d)
				if _, err := v.Validate(ctx, raw); err != nil {
					t.Fatalf("at the edge of the window: %v", err)
				}
				// The last moment the timestamp is acceptable.
				last := time.Unix(t0+edge*d+d, 999_999_999)
				for clock.Now().Before(last) {
					// Every 7 s, and the last moment.
					clock.Advance(min(7*time.Second, last.Sub(clock.Now())))
					for i, v := range []*snap.Validator{v, snap.NewValidator(cfg)} {
						if _, err := v.Validate(ctx, raw); code(err) != snap.CodeDuplicateMessage {
							t.Fatalf("validator %d at %v (%d s after the timestamp): %v, want 2006",
								i, clock.Now(), clock.Now().Unix()-(t0+edge*d), err)
						}
					}
				}
				clock.Advance(time.Nanosecond)
				if _, err := snap.NewValidator(cfg).Validate(ctx, raw); code(err) != snap.CodeTimestampExpired {
					t.Fatalf("past the window: %v, want 2004", err)
				}
			})
		}
	}
}

// The wall clock stepped back (an NTP step, an operator's date): a
// message accepted before the step is still a replay when the clock
// reaches its time again, the record kept by the wall clock, not by the
// time that passed.
func TestReplayRecordSurvivesAClockStepBack(t *testing.T) {
	ctx := context.Background()
	clock := testclock.New(time.Unix(t0, 0))
	store := snap.NewMemoryReplayStore(0)
	cfg := snap.Config{Now: clock.Now, Replay: store}
	raw := signed(t, "before-the-step", t0)
	if _, err := snap.NewValidator(cfg).Validate(ctx, raw); err != nil {
		t.Fatal(err)
	}
	clock.Advance(-time.Hour)
	v := snap.NewValidator(cfg)
	if _, err := v.Validate(ctx, raw); code(err) != snap.CodeTimestampExpired {
		t.Fatalf("an hour after the clock's step back: %v, want 2004 (the timestamp is ahead)", err)
	}
	// Others' messages in the hour the clock takes to return.
	for i := range 100 {
		clock.Advance(36 * time.Second)
		if _, err := v.Validate(ctx, signed(t, fmt.Sprint("during-", i), clock.Now().Unix())); err != nil {
			t.Fatalf("a message during the hour: %v", err)
		}
	}
	for _, v := range []*snap.Validator{v, snap.NewValidator(cfg)} {
		if _, err := v.Validate(ctx, raw); code(err) != snap.CodeDuplicateMessage {
			t.Fatalf("the clock back at the message's time: %v, want 2006", err)
		}
	}
}

// A window so wide that it is no window (max_drift of a century or more,
// as one might set to turn the check off) still leaves every message
// remembered: the record's retention and its expiry do not wrap around
// the range of a time.Duration or of Unix nanoseconds (year 2262), and
// the message cannot be served twice, neither at once nor minutes later.
func TestReplayRecordOfAHugeWindow(t *testing.T) {
	ctx := context.Background()
	const year = 365 * 24 * time.Hour
	for _, drift := range []time.Duration{130 * year, 200 * year, 290 * year} {
		t.Run(fmt.Sprint(int64(drift/year), "y"), func(t *testing.T) {
			clock := testclock.New(time.Unix(t0, 0))
			cfg := snap.Config{Now: clock.Now, MaxDrift: drift, Replay: snap.NewMemoryReplayStore(0)}
			v := snap.NewValidator(cfg)
			if r := v.Retention(); r < 2*snap.DefaultMaxDrift {
				t.Errorf("retention %v", r)
			}
			raw := signed(t, "huge", t0)
			if _, err := v.Validate(ctx, raw); err != nil {
				t.Fatal(err)
			}
			for _, after := range []time.Duration{0, time.Hour, 30 * 24 * time.Hour} {
				clock.Advance(after)
				if _, err := snap.NewValidator(cfg).Validate(ctx, raw); code(err) != snap.CodeDuplicateMessage {
					t.Fatalf("%v later: %v, want 2006", clock.Now().Sub(time.Unix(t0, 0)), err)
				}
			}
		})
	}
}
