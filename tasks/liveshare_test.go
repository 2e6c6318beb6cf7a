package tasks

import (
	"context"
	"fmt"
	"testing"

	"github.com/snapnode/snapnode/snap"
)

// TestOneRequesterCannotFillTheMemoryStore: a requester whose tasks stay
// live (proposals wait in a memory node) is refused past its share of the
// store's live tasks, 5002 scope "requester", so that another requester
// still gets a task; before, bob's live tasks filled the store and every
// requester got 5003 until a restart.
func TestOneRequesterCannotFillTheMemoryStore(t *testing.T) {
	const max, share = 20, 5
	s := NewService(NewMemoryStore(MemoryStoreOptions{MaxTasks: max, MaxLivePerOwner: share}), ServiceOptions{})
	ctx := context.Background()
	refused := 0
	for i := range max {
		_, err := sendJSON(ctx, s, bob, []byte(send(fmt.Sprintf(`{"text":"bob %d"}`, i))))
		if err != nil {
			if i < share {
				t.Fatalf("bob's task %d within his share: %v", i, err)
			}
			wantSnap(t, err, snap.CodeRateLimitExceeded, map[string]any{"scope": "requester", "limit": share})
			refused++
		}
	}
	if refused != max-share {
		t.Fatalf("bob refused %d times, want %d", refused, max-share)
	}
	task := mustSend(t, s, alice, send(`{"text":"alice's"}`))
	if task.Owner != alice {
		t.Fatalf("owner %q", task.Owner)
	}
	// A task that ends gives its place back to its owner.
	if _, err := s.CancelTask(ctx, bob, &CancelParams{TaskID: firstOf(t, s, bob)}); err != nil {
		t.Fatal(err)
	}
	mustSend(t, s, bob, send(`{"text":"bob again"}`))
}

func firstOf(t *testing.T, s *Service, owner string) string {
	t.Helper()
	ts, err := s.List(context.Background(), Filter{Owner: owner, Limit: 1})
	if err != nil || len(ts) == 0 {
		t.Fatalf("no task of %s: %v", owner, err)
	}
	return ts[0].ID
}

// A LiveCount recounted keeps what Take and Drop did while the count was
// read, bounds each owner and all of them, and holds no owner with no
// live task.
func TestLiveCount(t *testing.T) {
	ctx := context.Background()
	c := NewLiveCount(LiveLimits{PerOwner: 2, Total: 3})
	err := c.Recount(ctx, func(context.Context) (map[string]int, error) {
		if err := c.Take("carol", "c1"); err != nil { // while the count is read
			t.Fatal(err)
		}
		return map[string]int{"alice": 2, "bob": 0}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Of("alice") != 2 || c.Of("carol") != 1 || len(c.live) != 2 || c.sum != 3 {
		t.Fatalf("counted %v (%d in all)", c.live, c.sum)
	}
	if err := c.Take("dave", "d1"); snap.CodeOf(err) != snap.CodeServiceUnavailable {
		t.Fatalf("a 4th live task in all: %v", err)
	}
	c.Drop("carol")
	if err := c.Take("alice", "a3"); snap.CodeOf(err) != snap.CodeRateLimitExceeded {
		t.Fatalf("alice's 3rd: %v", err)
	}
	c.Drop("bob") // counted elsewhere: never below zero
	if len(c.live) != 1 || c.sum != 2 {
		t.Fatalf("counted %v (%d in all)", c.live, c.sum)
	}
	if NewLiveCount(LiveLimits{}) != nil {
		t.Fatal("a count with no limits")
	}
}

// A reservation counts against the limits as a live task does until it is
// released (once), a Recount keeps it, and an owner's entry goes once it
// has neither live tasks nor reservations; a count made with NewCount
// refuses with its own errors.
func TestLiveCountReserve(t *testing.T) {
	ctx := context.Background()
	var refusals []string
	c := NewCount(LiveLimits{PerOwner: 2, Total: 3}, func(owner, id, scope string, held, limit int) error {
		refusals = append(refusals, fmt.Sprintf("%s %s %d/%d", owner, scope, held, limit))
		return fmt.Errorf("refused %s", owner)
	})
	r1, err := c.Reserve("alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Recount(ctx, func(context.Context) (map[string]int, error) { return map[string]int{"alice": 1}, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reserve("alice", nil); err == nil {
		t.Fatal("alice's 3rd, a reservation kept by the recount among them: admitted")
	}
	if err := c.Take("bob", "b1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reserve("carol", nil); err == nil {
		t.Fatal("a 4th in all: admitted")
	}
	r1()
	r1() // a second call does nothing
	if c.reservedSum != 0 || len(c.reserved) != 0 {
		t.Fatalf("reserved %v (%d in all) after the release", c.reserved, c.reservedSum)
	}
	r2, err := c.Reserve("carol", nil)
	if err != nil {
		t.Fatal(err)
	}
	r2()
	if want := []string{"alice requester 2/2", "carol node 3/3"}; fmt.Sprint(refusals) != fmt.Sprint(want) {
		t.Fatalf("refusals %q, want %q", refusals, want)
	}
	var nilCount *LiveCount
	if release, err := nilCount.Reserve("x", nil); err != nil || release == nil {
		t.Fatalf("a nil count: %v", err)
	}
}

// TestLiveCountNewcomers: past LiveLimits.Newcomers a reservation is
// refused with scope "newcomers" unless its owner is known; whether it
// is is asked only then, and not of an owner past its own share or of a
// full count; Take is not held to it.
func TestLiveCountNewcomers(t *testing.T) {
	var refusals []string
	c := NewCount(LiveLimits{PerOwner: 2, Total: 4, Newcomers: 2}, func(owner, id, scope string, held, limit int) error {
		refusals = append(refusals, fmt.Sprintf("%s %s %d/%d", owner, scope, held, limit))
		return fmt.Errorf("refused %s", owner)
	})
	var asked []string
	known := func(who string, is bool) func() bool {
		return func() bool { asked = append(asked, who); return is }
	}
	for _, who := range []string{"fresh-1", "fresh-2"} {
		if _, err := c.Reserve(who, known(who, false)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Reserve("fresh-3", known("fresh-3", false)); err == nil {
		t.Fatal("a newcomer past the newcomers' share: admitted")
	}
	if _, err := c.Reserve("fresh-3", nil); err == nil {
		t.Fatal("a newcomer with no lookup past the newcomers' share: admitted")
	}
	if _, err := c.Reserve("alice", known("alice", true)); err != nil {
		t.Fatalf("a known owner past the newcomers' share: %v", err)
	}
	if err := c.Take("bob", "b1"); err != nil {
		t.Fatalf("Take past the newcomers' share: %v", err)
	}
	if _, err := c.Reserve("carol", known("carol", true)); err == nil {
		t.Fatal("a 5th in all: admitted")
	}
	if want := []string{"fresh-3", "alice"}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Fatalf("asked about %q, want %q", asked, want)
	}
	want := []string{"fresh-3 newcomers 2/2", "fresh-3 newcomers 2/2", "carol node 4/4"}
	if fmt.Sprint(refusals) != fmt.Sprint(want) {
		t.Fatalf("refusals %q, want %q", refusals, want)
	}
	if c := NewCount(LiveLimits{Total: 4, Newcomers: 4}, nil); c.lim.Newcomers != 0 {
		t.Fatalf("a newcomers' share of the whole count: %+v, want none", c.lim)
	}
}

// A lookup that panics (a driver's bug) reaches Reserve's caller as a
// panic, which net/http and the runtime's workers recover, and leaves the
// count usable: before, Reserve's deferred unlock ran on the mutex the
// lookup had been called without, and "unlock of unlocked mutex" is a
// fatal error no recover stops, ending the node.
func TestLiveCountReserveSurvivesAPanickingLookup(t *testing.T) {
	c := NewCount(LiveLimits{PerOwner: 4, Total: 4, Newcomers: 1}, refuseLive)
	if _, err := c.Reserve("fresh-1", nil); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != "driver bug" {
				t.Errorf("recovered %v, want the lookup's panic", r)
			}
		}()
		c.Reserve("fresh-2", func() bool { panic("driver bug") })
	}()
	if err := c.Take("bob", "b1"); err != nil { // the lock is free again
		t.Fatalf("Take after the panic: %v", err)
	}
	if _, err := c.Reserve("alice", func() bool { return true }); err != nil {
		t.Fatalf("a known owner after the panic: %v", err)
	}
}
