package snap_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

const t0 = 1_770_163_200

var (
	keyA = mustKey(strings.Repeat("0a", 32))
	keyB = mustKey(strings.Repeat("0b", 32))
	keyC = mustKey(strings.Repeat("0c", 32))
)

func mustKey(h string) *identity.Key {
	k, err := identity.FromHex(h)
	if err != nil {
		panic(err)
	}
	return k
}

// signed returns a signed request from A to B with the given id.
func signed(t testing.TB, id string, ts int64) []byte {
	t.Helper()
	m := &snap.Message{
		ID: id, Version: "0.1", Type: snap.TypeRequest, Method: "message/send",
		From: keyA.Address(identity.Mainnet), To: keyB.Address(identity.Mainnet),
		Payload:   []byte(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`),
		Timestamp: ts,
	}
	if err := m.Sign(keyA); err != nil {
		t.Fatal(err)
	}
	raw, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func code(err error) snap.Code {
	var e *snap.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// A forged message that reuses a (from, id) already seen must fail on its
// signature, not as a duplicate: the replay store is no oracle, and forged
// traffic never burns a sender's ids.
func TestReplayRecordedOnlyAfterSignature(t *testing.T) {
	store := snap.NewMemoryReplayStore(0)
	v := snap.NewValidator(snap.Config{Now: at(t0), Replay: store})
	ctx := context.Background()

	// A forgery arrives first, with an id the real sender will use.
	forged := signed(t, "victim-id", t0)
	forged = []byte(strings.Replace(string(forged), `"hi"`, `"ho"`, 1))
	if _, err := v.Validate(ctx, forged); code(err) != snap.CodeSignatureInvalid {
		t.Fatalf("forgery: %v, want 2001", err)
	}
	if store.Len() != 0 {
		t.Fatalf("forgery was recorded: %d records", store.Len())
	}
	// The genuine message with that id still gets through.
	genuine := signed(t, "victim-id", t0)
	if _, err := v.Validate(ctx, genuine); err != nil {
		t.Fatalf("genuine message after forgery: %v", err)
	}
	// Its byte-for-byte replay is a duplicate …
	_, err := v.Validate(ctx, genuine)
	var se *snap.Error
	if !errors.As(err, &se) || se.Code != snap.CodeDuplicateMessage || se.Data["id"] != "victim-id" || se.Data["firstSeen"] != int64(t0) {
		t.Fatalf("replay: %v, want 2006 with id and firstSeen", err)
	}
	// … and a forgery reusing the now-seen id still fails on its signature.
	if _, err := v.Validate(ctx, forged); code(err) != snap.CodeSignatureInvalid {
		t.Fatalf("forgery of a seen id: %v, want 2001", err)
	}
	// The same id freshly signed again (different aux, different sig) is a
	// duplicate after verification.
	if _, err := v.Validate(ctx, signed(t, "victim-id", t0)); code(err) != snap.CodeDuplicateMessage {
		t.Fatalf("re-signed reuse of an id: %v, want 2006", err)
	}
}

// Copies of one message arriving at once (several relays, retries) are
// processed exactly once.
func TestConcurrentDuplicatesProcessedOnce(t *testing.T) {
	v := snap.NewValidator(snap.Config{Now: at(t0), Replay: snap.NewMemoryReplayStore(0)})
	raw := signed(t, "race", t0)
	var ok, dup atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			_, err := v.Validate(context.Background(), raw)
			switch code(err) {
			case 0:
				ok.Add(1)
			case snap.CodeDuplicateMessage:
				dup.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || dup.Load() != 31 {
		t.Errorf("accepted %d, duplicates %d; want 1 and 31", ok.Load(), dup.Load())
	}
}

func TestReplayStoreFullRefusesWithRetryAfter(t *testing.T) {
	v := snap.NewValidator(snap.Config{Now: at(t0), Replay: snap.NewMemoryReplayStore(1)})
	ctx := context.Background()
	if _, err := v.Validate(ctx, signed(t, "one", t0)); err != nil {
		t.Fatal(err)
	}
	_, err := v.Validate(ctx, signed(t, "two", t0))
	var se *snap.Error
	if !errors.As(err, &se) || se.Code != snap.CodeServiceUnavailable || se.Data["retryAfter"] == nil {
		t.Fatalf("full store: %v, want 5003 with retryAfter", err)
	}
}

func TestTimestampWindowConfigurable(t *testing.T) {
	ctx := context.Background()
	v := snap.NewValidator(snap.Config{Now: at(t0), MaxDrift: 300 * time.Second})
	if _, err := v.Validate(ctx, signed(t, "a", t0-300)); err != nil {
		t.Errorf("300 s old with a 300 s window: %v", err)
	}
	_, err := v.Validate(ctx, signed(t, "b", t0+301))
	var se *snap.Error
	if !errors.As(err, &se) || se.Code != snap.CodeTimestampExpired || se.Data["maxDrift"] != int64(300) ||
		se.Data["provided"] != int64(t0+301) || se.Data["serverTime"] != int64(t0) {
		t.Errorf("301 s ahead: %v, want 2004 with the configured maxDrift", err)
	}
}

// The clock is read per message: a message valid now is stale later.
func TestTimestampUsesClock(t *testing.T) {
	var now atomic.Int64
	now.Store(t0)
	v := snap.NewValidator(snap.Config{Now: func() time.Time { return time.Unix(now.Load(), 0) }})
	raw := signed(t, "c", t0)
	if _, err := v.Validate(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	now.Store(t0 + 61)
	if _, err := v.Validate(context.Background(), raw); code(err) != snap.CodeTimestampExpired {
		t.Errorf("61 s later: %v, want 2004", err)
	}
}

// Only the key of from can sign for from: a message from A signed by C
// fails, even though C's signature is itself well formed.
func TestSignatureByAnotherKey(t *testing.T) {
	m, err := snap.Parse(signed(t, "x", t0))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Sign(keyC); !errors.Is(err, snap.ErrWrongKey) {
		t.Fatalf("Sign with a key that is not from's: %v", err)
	}
}

func TestRecipient(t *testing.T) {
	ctx := context.Background()
	self := keyB.Address(identity.Mainnet)
	v := snap.NewValidator(snap.Config{Now: at(t0), Self: self})
	if _, err := v.Validate(ctx, signed(t, "r1", t0)); err != nil {
		t.Fatalf("message to self: %v", err)
	}
	other := snap.NewValidator(snap.Config{Now: at(t0), Self: keyC.Address(identity.Mainnet)})
	_, err := other.Validate(ctx, signed(t, "r2", t0))
	var se *snap.Error
	if !errors.As(err, &se) || se.Code != snap.CodeInvalidPayload || se.Field() != "to" || se.Data["constraint"] != "recipient" {
		t.Fatalf("message to another agent: %v, want 1004 to/recipient", err)
	}
}

// countingReplay counts the calls a Validator makes to its replay store.
type countingReplay struct {
	snap.ReplayStore
	lookups, remembers int
}

func (c *countingReplay) Lookup(ctx context.Context, from, id string, now time.Time) (snap.ReplayRecord, bool, error) {
	c.lookups++
	return c.ReplayStore.Lookup(ctx, from, id, now)
}

func (c *countingReplay) Remember(ctx context.Context, from, id string, rec snap.ReplayRecord) (snap.ReplayRecord, bool, error) {
	c.remembers++
	return c.ReplayStore.Remember(ctx, from, id, rec)
}

// A fresh message costs the replay store one call (its Remember), and a
// byte-for-byte replay none: the store may be a database a round trip
// away. A second process sharing the store (a replica, or the node after
// a restart) catches the replay through the store once, then by itself.
func TestReplayStoreCallsPerMessage(t *testing.T) {
	ctx := context.Background()
	store := &countingReplay{ReplayStore: snap.NewMemoryReplayStore(0)}
	v := snap.NewValidator(snap.Config{Now: at(t0), Replay: store})
	raw := signed(t, "once", t0)
	if _, err := v.Validate(ctx, raw); err != nil {
		t.Fatal(err)
	}
	if store.lookups != 0 || store.remembers != 1 {
		t.Fatalf("fresh message: %d lookups, %d remembers; want 0 and 1", store.lookups, store.remembers)
	}
	for range 3 {
		if _, err := v.Validate(ctx, raw); code(err) != snap.CodeDuplicateMessage {
			t.Fatalf("replay: %v, want 2006", err)
		}
	}
	if store.lookups != 0 || store.remembers != 1 {
		t.Fatalf("after 3 replays: %d lookups, %d remembers; want 0 and 1", store.lookups, store.remembers)
	}

	other := snap.NewValidator(snap.Config{Now: at(t0), Replay: store})
	for range 3 {
		if _, err := other.Validate(ctx, raw); code(err) != snap.CodeDuplicateMessage {
			t.Fatalf("replay to a second validator: %v, want 2006", err)
		}
	}
	if store.lookups != 0 || store.remembers != 2 {
		t.Fatalf("second validator, 3 replays: %d lookups, %d remembers; want 0 and 2", store.lookups, store.remembers)
	}
	// A different signature over a seen id still asks the store, after
	// verifying: the cache answers byte-for-byte replays only.
	if _, err := other.Validate(ctx, signed(t, "once", t0)); code(err) != snap.CodeDuplicateMessage {
		t.Fatalf("re-signed reuse: %v, want 2006", err)
	}
	if store.remembers != 3 {
		t.Fatalf("re-signed reuse: %d remembers, want 3", store.remembers)
	}
}

// The spec's window at its bounds: |now − timestamp| of exactly 60 s is
// accepted, 61 s is 2004, either way. And a message is remembered for as
// long as its timestamp can be accepted: a copy arriving at any moment
// its timestamp is still within the window, here just before its end
// with a window of 300 s, is 2006, never served a second time; so
// replay records are kept max(120 s, 2·MaxDrift + 1 s).
func TestTimestampBoundsAndReplayRetention(t *testing.T) {
	ctx := context.Background()
	v := snap.NewValidator(snap.Config{Now: at(t0), Replay: snap.NewMemoryReplayStore(0)})
	for _, d := range []int64{-60, 60} {
		if _, err := v.Validate(ctx, signed(t, fmt.Sprintf("in%d", d+60), t0+d)); err != nil {
			t.Errorf("%+d s: %v, want accepted", d, err)
		}
	}
	for _, d := range []int64{-61, 61} {
		if _, err := v.Validate(ctx, signed(t, fmt.Sprintf("out%d", d+61), t0+d)); code(err) != snap.CodeTimestampExpired {
			t.Errorf("%+d s: %v, want 2004", d, err)
		}
	}
	if got, want := v.Retention(), 121*time.Second; got != want {
		t.Errorf("retention with the default window: %v, want %v", got, want)
	}

	var now atomic.Int64
	now.Store(t0 - 300)
	store := snap.NewMemoryReplayStore(0)
	v = snap.NewValidator(snap.Config{Now: func() time.Time { return time.Unix(now.Load(), 0) }, MaxDrift: 300 * time.Second, Replay: store})
	if got, want := v.Retention(), 601*time.Second; got != want {
		t.Errorf("retention with a 300 s window: %v, want %v", got, want)
	}
	raw := signed(t, "late-copy", t0) // 300 s ahead of the clock: accepted
	if _, err := v.Validate(ctx, raw); err != nil {
		t.Fatal(err)
	}
	// A second Validator on the same store: the copy is caught by the
	// store's record, not by the first Validator's cache.
	v2 := snap.NewValidator(snap.Config{Now: func() time.Time { return time.Unix(now.Load(), 0) }, MaxDrift: 300 * time.Second, Replay: store})
	now.Store(t0 + 300) // 600 s later, the timestamp still within the window
	for _, v := range []*snap.Validator{v, v2} {
		if _, err := v.Validate(ctx, raw); code(err) != snap.CodeDuplicateMessage {
			t.Errorf("a copy 600 s later: %v, want 2006", err)
		}
	}
}
